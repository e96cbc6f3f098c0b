"""The redactor every run passes its rows, warnings and reports through, and how URLs show."""

from __future__ import annotations

import json
import urllib.parse

from whileai.schema.secrets import Redactor, safe_spec, safe_url, url_secrets

KEY = "sk-proj-7f3c2a9e51d04b6c8e1f0a2b3c4d5e6f"


def test_a_secret_is_redacted_whole_encoded_and_in_every_long_fragment() -> None:
    redact = Redactor([KEY])
    forms = [
        f"Bearer {KEY}",
        json.dumps({"k": KEY}),
        "".join(f"\\u{ord(c):04x}" for c in KEY),
        urllib.parse.quote(KEY, safe=""),
        f"key {KEY[:16]}... revoked",  # masked to a prefix
        f"{KEY[:20]}<b>{KEY[20:]}",  # split by markup, both halves long
        f"...{KEY[-9:]}",  # the tail a server shows
    ]
    for text in forms:
        cleaned = redact.text(text)
        assert not any(KEY[i : i + 8] in cleaned for i in range(len(KEY) - 7)), (text, cleaned)
        assert "***" in cleaned
    assert redact.text("an ordinary sentence, sk- and all") == "an ordinary sentence, sk- and all"


def test_values_are_walked_keys_included_and_rows_cleaned_in_place() -> None:
    redact = Redactor([KEY])
    row = {"final_text": f"use {KEY}", "steps": [{"content": KEY}], KEY: 1, "n": 3}
    redact.in_place(row)
    assert row == {"final_text": "use ***", "steps": [{"content": "***"}], "***": 1, "n": 3}
    assert not Redactor([]) and Redactor([]).text(KEY) == KEY


def test_urls_show_no_credentials_or_secret_query_values() -> None:
    url = "https://user:hunter2secret@api.example.com/v1?api-version=2024-06&api-key=abc123def456"
    assert safe_url(url) == "https://api.example.com/v1?api-version=2024-06&api-key=***"
    assert sorted(url_secrets(url)) == ["abc123def456", "hunter2secret", "user"]
    assert safe_spec(f"vllm:qwen@{url}") == (
        "vllm:qwen@https://api.example.com/v1?api-version=2024-06&api-key=***"
    )
    assert safe_url("openai:gpt-4o") == "openai:gpt-4o"
