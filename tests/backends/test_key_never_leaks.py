"""An API key planted in the environment reaches the server and no output of a run.

A whole ``simulate()`` runs against an OpenAI-compatible server on loopback that echoes the
key back in its error bodies (as some gateways do with the ``Authorization`` header), fails
some rollouts and makes one retry. Then every output is searched for the key and for any
fragment of it long enough to matter: rows, trajectories, the report, warnings, the JSONL file
and its sidecar, log records at DEBUG, what was printed, and the errors themselves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from pathlib import Path
from typing import Any

import pytest

import whileai as wai
from whileai.backends import BackendError, resolve_backend
from whileai.registry import Registry
from whileai.schema.files import sidecar_path

pytestmark = pytest.mark.plugins

# The fault server ships with the OpenAI plugin; the core-only check runs without it.
_testing = pytest.importorskip("whileai_openai.testing")
FaultServer, Reply = _testing.FaultServer, _testing.Reply

SECRET = "planted9f3c2a7e51d04b6c8e1f0a2b3c4d5e6fKEY"
KEY = f"sk-{SECRET}"
#: a leaked fragment this long would narrow a brute-force search; none may appear
FRAGMENT = 10
#: the plugin quotes the first 300 characters of an error body; this padding puts the cut
#: through the middle of the echoed key, where a redaction of the whole key alone would miss it
STRADDLE = 300 - len('{"error": {"message": "') - len("Bearer ") - len(KEY) // 2


def leaks(text: str) -> list[str]:
    """The key, or any FRAGMENT-long piece of its secret part, found in ``text``."""
    pieces = {SECRET[i : i + FRAGMENT] for i in range(len(SECRET) - FRAGMENT + 1)}
    return sorted(piece for piece in pieces | {KEY} if piece in text)


def echoed(status: int, before: str = "Incorrect API key provided: ") -> Reply:
    return Reply.canned({"error": {"message": f"{before}Bearer {KEY}"}}, status=status)


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WHILEAI_BASE_URL", "OPENAI_BASE_URL", "WHILEAI_AGENT", "WHILEAI_USER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WHILEAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def test_a_run_against_a_server_that_echoes_the_key_never_shows_it(
    planted: None,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    output = tmp_path / "run.jsonl"
    with FaultServer() as server:
        server.push(
            echoed(401),  # rollout 1 fails for good, the key in the error body
            echoed(403, before="x" * STRADDLE),  # rollout 2 too, the quote cut through the key
            echoed(500, before="upstream failed for "),  # rollout 3 is retried (and logged),
            Reply.malformed(),  # and its retry answers with a body that is not JSON
        )  # rollouts 4 to 6 get the server's echo
        data = wai.simulate(
            agent_model=server.url,
            user_model=server.url,
            unique_situations=6,
            repeats=1,
            max_turns=1,
            fault_rate=0.0,
            seed=3,
            output=str(output),
            # one rollout at a time, so the scripted faults land on known rollouts
            advanced={"max_concurrency": 1},
            registry=Registry.load(),
        )
        chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    # the key did go to the server, so every output below had the chance to carry it
    assert chats[0].headers["authorization"] == f"Bearer {KEY}"
    errors = [row["error"] for row in data.rows if row.get("error")]
    assert len(errors) == 3, errors
    assert sum(1 for row in data.rows if not row.get("error")) == 3
    assert any("answered HTTP 401" in json.dumps(e) for e in errors)
    assert any("not JSON" in json.dumps(e) for e in errors)
    assert any("Incorrect API key provided: Bearer ***" in json.dumps(e) for e in errors)

    printed = capsys.readouterr()
    shown: dict[str, str] = {
        "rows": json.dumps(list(data.rows), default=str),
        "trajectories": json.dumps(list(data.trajectories), default=str),
        "report": json.dumps(data.report(), default=str),
        "report text": str(data.report()),
        "warnings": json.dumps(data.warnings),
        "metadata": json.dumps(data.metadata, default=str),
        "pass_at": str(data.pass_at),
        "jsonl file": output.read_text(),
        "sidecar": sidecar_path(output).read_text(),
        "log records": "\n".join(
            f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records
        ),
        "log text": caplog.text,
        "stdout": printed.out,
        "stderr": printed.err,
    }
    # the retry was logged, so the log search below searched a real line
    assert any("retry 1/" in r.getMessage() for r in caplog.records)
    found = {where: leaks(text) for where, text in shown.items() if leaks(text)}
    assert found == {}


def test_a_backend_error_carrying_an_echoed_key_shows_none_of_it(planted: None) -> None:
    with FaultServer() as server:
        server.push(echoed(401), echoed(403, before="x" * STRADDLE))
        backend = resolve_backend(server.url, registry=Registry.load(), model="m")

        async def fail_twice() -> list[BackendError]:
            caught = []
            async with backend:  # type: ignore[attr-defined]
                for _ in range(2):
                    with pytest.raises(BackendError) as info:
                        await backend.complete([{"role": "user", "content": "hi"}])
                    caught.append(info.value)
            return caught

        caught = asyncio.run(fail_twice())
    assert [error.kind for error in caught] == ["http_401", "http_403"]
    shown: list[Any] = [repr(backend)]
    for error in caught:
        shown += [str(error), repr(error), "".join(traceback.format_exception(error))]
    assert [leaks(text) for text in shown] == [[] for _ in shown]


AZURE = "azureplanted71c4e09b2d5a8f36e1d4c7b0a9"
QUERY = "queryplanted5e2b9d10c4a7f38e6b1d2c9a70"


def all_leaks(text: str) -> list[str]:
    """Any 8-character piece of any planted secret found in ``text``."""
    found = []
    for secret in (SECRET, AZURE, QUERY):
        found += [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in text]
    return sorted(set(found))


def escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def test_every_echo_form_and_every_secret_is_kept_out_of_a_run(
    planted: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The key echoed JSON-escaped, masked to its first 16 characters, and inside a 200
    completion; an Azure-style api-key header; a secret in the endpoint URL's query."""
    caplog.set_level(logging.DEBUG)
    output = tmp_path / "run.jsonl"
    with FaultServer() as server:
        raw_escaped = '{"error": {"message": "bad key \\\\u0073' + escaped(KEY[1:]) + '"}}'
        server.push(
            Reply.canned(json.loads(raw_escaped), status=401),
            Reply.canned({"error": {"message": f"key {KEY[:16]}... is revoked"}}, status=403),
            Reply.ok(text=f"I was called with {KEY} and api-key {AZURE} at ?api-key={QUERY}"),
        )

        class Azure:
            @wai.hookimpl
            def whileai_register_backends(self, register: Any) -> None:
                from whileai_openai.backend import OpenAICompatibleBackend

                register(
                    "azure",
                    lambda argument=None, **options: OpenAICompatibleBackend(
                        name="azure",
                        base_url=f"{server.url}?api-key={QUERY}",
                        model="m",
                        headers={"api-key": AZURE},
                        concurrency=options.get("concurrency", 4),
                    ),
                )

        data = wai.simulate(
            agent_model="azure",
            user_model=f"{server.url}?api-key={QUERY}",
            unique_situations=4,
            repeats=1,
            max_turns=1,
            fault_rate=0.0,
            seed=3,
            output=str(output),
            advanced={"max_concurrency": 1},
            registry=Registry.load(plugins=[Azure()]),
        )
        chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert chats[0].headers["api-key"] == AZURE  # the secrets did reach the server
    shown = {
        "rows": json.dumps(list(data.rows), default=str),
        "trajectories": json.dumps(list(data.trajectories), default=str),
        "report": json.dumps(data.report(), default=str),
        "report text": str(data.report()),
        "warnings": json.dumps(data.warnings),
        "metadata": json.dumps(data.metadata, default=str),
        "jsonl file": output.read_text(),
        "sidecar": sidecar_path(output).read_text(),
        "log": caplog.text,
    }
    assert sum(1 for r in data.rows if r.get("error")) == 2
    assert any("***" in r.get("final_text", "") for r in data.rows)  # the echo was there
    found = {where: all_leaks(text) for where, text in shown.items() if all_leaks(text)}
    assert found == {}
