"""Secrets out of everything a run writes or shows: the configured API keys and header
values, and every fragment of them long enough to narrow a search.

A backend that holds secrets says so with ``secrets() -> list[str]`` (the OpenAI-compatible
backend lists its API key, secret headers such as an Azure ``api-key``, and credentials or
secret query parameters of its URL). The run builds one :class:`Redactor` from all of them and
passes every trajectory, warning, report and sidecar through it, so a server that echoes a
key (whole, JSON-escaped, cut at a quote, masked to a prefix, or inside a completion) leaves
none of it behind. :func:`safe_url` is what a spec or endpoint URL is shown as: never its
credentials or secret query values.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

#: The shortest piece of a secret that is redacted on its own: eight characters of a key
#: narrow a brute-force search enough to matter, shorter ones match ordinary text.
MIN_FRAGMENT = 8

#: Secrets shorter than this are not redacted by fragments (they would match ordinary words);
#: they are still redacted whole.
MIN_SECRET = 12

MASK = "***"

#: Header and query parameter names whose values are secrets.
SECRET_NAMES = re.compile(
    r"(authorization|api[-_]?key|x[-_]api[-_]key|token|secret|password|passwd|sig|signature"
    r"|credential|session)",
    re.IGNORECASE,
)


class Redactor:
    """Replaces every secret, its JSON-escaped form, and every fragment of it of at least
    ``MIN_FRAGMENT`` characters with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        pieces: set[str] = set()
        for secret in secrets:
            if not isinstance(secret, str) or not secret:
                continue
            for form in {secret, *_encodings(secret)}:
                pieces.add(form)
                if len(form) >= MIN_SECRET:
                    pieces.update(
                        form[i : i + MIN_FRAGMENT] for i in range(len(form) - MIN_FRAGMENT + 1)
                    )
        self._pieces = sorted(pieces, key=len, reverse=True)
        # one alternation, longest first, then runs of masks merged, so "***" never leaves the
        # length of the cut visible
        self._pattern = (
            re.compile("|".join(re.escape(p) for p in self._pieces)) if self._pieces else None
        )

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, value: str) -> str:
        if self._pattern is None or not value:
            return value
        redacted = self._pattern.sub(MASK, value)
        return re.sub(r"(?:\*\*\*)+", MASK, redacted) if redacted != value else value

    def value(self, value: Any) -> Any:
        """``value`` with every string in it redacted (mappings, lists and tuples walked;
        keys too), as a new object; anything else as it is."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.value(v) for v in value)
        return value

    def in_place(self, row: dict[str, Any]) -> dict[str, Any]:
        """Redact a row's values in place (the trajectory a run keeps is the one cleaned)."""
        if self._pattern is not None:
            cleaned = self.value(row)
            row.clear()
            row.update(cleaned)
        return row


def _encodings(secret: str) -> set[str]:
    """How a secret may appear once a server or a log has encoded it."""
    forms = {
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=True)[1:-1],
        "".join(f"\\u{ord(c):04x}" for c in secret),
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
    }
    return {f for f in forms if f != secret}


def safe_url(url: str) -> str:
    """``url`` without credentials, and with the values of secret query parameters masked:
    what a report, a sidecar or a row may say an endpoint was."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    shown = [(k, MASK if SECRET_NAMES.search(k) else v) for k, v in query]
    return urllib.parse.urlunsplit(
        (parts.scheme, netloc, parts.path, urllib.parse.urlencode(shown, safe="*"), parts.fragment)
    )


def url_secrets(url: str) -> list[str]:
    """The secrets a URL carries: its password (and user), and secret query values."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return []
    out = [v for v in (parts.password, parts.username) if v]
    out += [
        v
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if v and SECRET_NAMES.search(k)
    ]
    return out


def safe_spec(spec: str) -> str:
    """A model spec as it may be shown: any URL in it through :func:`safe_url`."""
    return re.sub(r"https?://[^\s@]*@?[^\s]*", lambda m: safe_url(m.group(0)), spec)
