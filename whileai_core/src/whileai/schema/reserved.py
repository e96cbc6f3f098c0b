"""Reserved keys out of a value, in whatever encoding the value carries them.

A :class:`Stripper` removes every key whose name is reserved (compared without case, spaces,
hyphens or underscores, so ``Privileged``, ``REFERENCE``, ``"reference "`` and ``hidden-state``
are the names they look like). It walks mappings, lists, tuples, sets and attrs objects, and it
reads strings: a string that holds a JSON or Python-literal structure (whole, after a prose
prefix, nested as a JSON string inside a JSON string, with ``\\u`` escapes in its keys, or used
as a dict key) is parsed, cleaned and written back in the same form. A string in which a
reserved name still stands where a key does (``"reference":``, ``'rubric' :``,
``hidden_state=``) but which does not parse (truncated JSON, an object's repr) loses
everything from that name on: text we cannot read is cut rather than trusted.

Anything else is returned as it was, the same object when nothing changed.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, AnyStr

import attrs

MASK = "***"

#: How many keys and clean texts a stripper remembers, and how long a remembered text may be
#: (0.5 MB at most: a text is a field name, a model name, an id, a system prompt's head).
_REMEMBERED = 2048
_SHORT = 256


@functools.lru_cache(maxsize=8192)
def compact_name(name: str) -> str:
    """A key as the reserved names are compared: lower case, no spaces, ``-`` or ``_``."""
    return re.sub(r"[\s_\-]+", "", name).lower()


_ESCAPES = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})|\\([\"'\\/])")


def unescaped(text: str) -> str:
    """``text`` with ``\\uXXXX``, ``\\xXX`` and escaped quotes or backslashes decoded, as often
    as it takes (a JSON string inside a JSON string escapes twice)."""
    for _ in range(16):
        if "\\" not in text:
            return text
        decoded = _ESCAPES.sub(
            lambda m: chr(int(m.group(1) or m.group(2), 16)) if m.group(3) is None else m.group(3),
            text,
        )
        if decoded == text:
            return text
        text = decoded
    return text


class Stripper:
    """Removes the keys named in ``names`` at any depth, in every encoding listed above."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(compact_name(n) for n in names)
        # a name as a key spells it: white space, "_" or "-" may stand between any letters
        spelled = "|".join(
            r"[\s_\-]*".join(re.escape(letter) for letter in n) for n in sorted(self.names)
        )
        # a reserved name where a key stands: quoted and followed by ":" or "=", or bare and
        # followed by "=" (a keyword argument in a repr)
        self._key_position = re.compile(
            rf"""["'`]\s*(?:{spelled})\s*["'`]\s*[:=]|\b(?:{spelled})\s*=(?!=)""", re.IGNORECASE
        )
        self._mention = re.compile(rf"(?:{spelled})", re.IGNORECASE)
        self._needles = tuple(_spellings(n)[0] for n in sorted(self.names))
        self._encoded_names = tuple(n.encode() for n in sorted(self.names))
        # keys and short texts repeat from row to row (field names, model names, run ids, the
        # head of the system prompt): what each became is remembered, a bounded number of
        # them, the memory cleared when full so a long-lived process keeps the current run's
        self._fates: dict[str, tuple[bool, str]] = {}
        self._clean: set[str] = set()
        #: whether each key met is a reserved name: a row's thirty-odd field names are asked
        #: on every row it exports
        self._named: dict[str, bool] = {}
        #: the names in ``_named`` that are not reserved: a row's top level is told free of
        #: reserved names by one set operation
        self._plain: set[str] = set()

    def holds_none(self, written: str) -> bool:
        """Whether ``written``, a value as ``json.dumps`` writes it, surely holds no reserved
        key in any form this stripper reads: then :meth:`value` would only copy the value.
        (False means it may: the walk decides.)"""
        if "\\u" in written or "\\x" in written:
            # an escape the walk decodes may spell a name
            return False
        lowered = written.lower()
        for needle in self._needles:
            if needle in lowered:
                return False
        return not _spelled_apart(lowered, self.names)

    def holds_none_encoded(self, written: bytes) -> bool:
        """:meth:`holds_none` for JSON text as UTF-8 bytes (orjson's): on ASCII text the same
        test in bytes operations, which run at C speed where the text's ``translate`` maps
        every character through a dict; other text is decoded and read by :meth:`holds_none`."""
        if not written.isascii():
            return self.holds_none(written.decode())
        # (one byte's search first: a two-byte one scans at a third of memchr's speed)
        if b"\\" in written and (b"\\u" in written or b"\\x" in written):
            return False
        # on ASCII text the only separators are ASCII ones, and lower() is str.lower(): one
        # pass lowers the text and drops them
        compact = written.translate(_ASCII_LOWER, _ASCII_SEPARATORS)
        if b"\\" in compact and _escapes_more_than_quotes(compact):
            compact = _without_escaped_separators(compact.decode("ascii")).encode("ascii")
        # a plain loop: twice as fast as all() over a generator on these few names
        for name in self._encoded_names:  # noqa: SIM110
            if name in compact:
                return False
        return True

    def reserved(self, key: Any) -> bool:
        if type(key) is str:
            named = self._named.get(key)
            if named is None:
                named = compact_name(key) in self.names
                if len(self._named) >= _REMEMBERED:
                    self._named.clear()
                    self._plain.clear()
                self._named[key] = named
                if not named:
                    self._plain.add(key)
            return named
        return isinstance(key, str) and compact_name(key) in self.names

    def unreserved(self, mapping: Mapping[Any, Any]) -> dict[Any, Any]:
        """A shallow copy of ``mapping`` without its reserved keys (its values as they are):
        a row's top level, where the names repeat from row to row. The names the stripper
        already knows to be free are set aside in one set operation; only the rest (a row's
        ``privileged`` and ``vector``, a name not met before) are asked about."""
        out = dict(mapping)
        for key in mapping.keys() - self._plain:
            if self.reserved(key):
                del out[key]
        return out

    def value(self, value: Any) -> Any:
        """A copy of ``value`` without reserved keys (``value`` itself when it held none)."""
        kind = type(value)
        # the common kinds first, by exact type: this walk runs over every row a run exports
        if kind is str:
            return self.text(value)
        if kind is dict:
            return self._mapping(value)
        if kind is list or kind is tuple:
            return [self.value(v) for v in value]
        if value is None or kind is int or kind is float or kind is bool:
            return value
        if isinstance(value, Mapping):
            return self._mapping(value)
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, set | frozenset):
            # a set cannot go to JSON; written with default=str its repr would carry what it
            # holds past the walk
            return [self.value(v) for v in sorted(value, key=repr)]
        if attrs.has(type(value)):
            return self.value(attrs.asdict(value, recurse=True))
        if isinstance(value, bool | int | float):
            return value
        shown = str(value)
        # an object of another kind reaches a file as its str(); it is kept as it is unless
        # that text mentions a reserved name
        return self.text(shown) if self._mention.search(compact_name(shown)) else value

    def _mapping(self, value: Mapping[Any, Any]) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        fates = self._fates
        for k, v in value.items():
            if type(k) is str:
                fate = fates.get(k)
                drop, k = fate if fate is not None else self._fate(k)
                if drop:
                    continue
            # the kinds most values are, without a call each
            kind = type(v)
            if kind is str:
                out[k] = self.text(v)
            elif v is None or kind is int or kind is float or kind is bool:
                out[k] = v
            else:
                out[k] = self.value(v)
        return out

    def _fate(self, key: str) -> tuple[bool, str]:
        """Whether the stripper drops ``key``, and what it writes in its place if not."""
        fate = (True, key) if self.reserved(key) else (False, self.text(key))
        if len(self._fates) >= _REMEMBERED:
            self._fates.clear()
        self._fates[key] = fate
        return fate

    def key(self, key: Any) -> Any:
        return self.text(key) if isinstance(key, str) else key

    def text(self, text: str) -> str:
        """``text`` with reserved keys removed from any structure it holds."""
        short = len(text) <= _SHORT
        if short and text in self._clean:
            return text
        if not self._may_hold(text):
            if short:
                if len(self._clean) >= _REMEMBERED:
                    self._clean.clear()
                self._clean.add(text)
            return text
        cleaned = self._structures(text)
        view = unescaped(cleaned)
        found = self._key_position.search(view)
        if found is None:
            return cleaned
        return view[: found.start()] + MASK

    def _may_hold(self, text: str) -> bool:
        if "\\" in text and ("\\u" in text or "\\x" in text):
            return True
        # a plain substring test first: it runs on every string and every field a run exports
        lowered = text.lower()
        # a plain loop: twice as fast as any() over a generator on these few needles
        for needle in self._needles:
            if needle in lowered and self._mention.search(text) is not None:
                return True
        # a name spelled apart ("ref erence") counts only as a key, and a key stands quoted
        # before ":" or "=", or bare before "=" (a keyword argument)
        return (
            "=" in text or (":" in text and ('"' in text or "'" in text or "`" in text))
        ) and _spelled_apart(lowered, self.names)

    def _structures(self, text: str) -> str:
        """Every JSON or Python-literal structure in ``text`` cleaned in place."""
        out: list[str] = []
        at = 0
        while True:
            start = _next_open(text, at)
            if start is None:
                out.append(text[at:])
                return "".join(out)
            parsed = _parse_at(text, start)
            if parsed is None:
                out.append(text[at : start + 1])
                at = start + 1
                continue
            obj, end, form = parsed
            cleaned = self.value(obj)
            out.append(text[at:start])
            out.append(text[start:end] if cleaned == obj else _written(cleaned, form))
            at = end


#: What :func:`compact_name` drops, for ``str.translate``: every white space character
#: (``re``'s ``\\s``), ``_`` and ``-``.
_SEPARATORS = str.maketrans(
    dict.fromkeys([c for c in map(chr, range(0x3001)) if c.isspace()] + ["_", "-"])
)


#: The same for ASCII bytes, for ``bytes.translate``'s delete argument.
_ASCII_SEPARATORS = bytes(c for c in range(128) if chr(c).isspace() or chr(c) in "_-")
_ASCII_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")


def _spelled_apart(lowered: str, names: frozenset[str]) -> bool:
    """Whether one of ``names`` is in ``lowered`` once white space (as it is, or escaped),
    ``_`` and ``-`` are gone: how a key's name is compared."""
    compact = lowered.translate(_SEPARATORS)
    if "\\" in compact and _escapes_more_than_quotes(compact):
        compact = _without_escaped_separators(compact)
    return any(name in compact for name in names)


def _escapes_more_than_quotes(text: AnyStr) -> bool:
    """Whether a backslash in ``text`` (str or ASCII bytes) escapes anything but a quote. Most
    in a row's text escape the quotes of JSON inside JSON, and those hide no separator: two
    counts tell, where :func:`_without_escaped_separators` would rewrite the text for nothing."""
    if isinstance(text, bytes):
        return text.count(b"\\") != text.count(b'\\"')
    return text.count("\\") != text.count('\\"')


def _without_escaped_separators(text: str) -> str:
    """``text`` without any white space written as an escape, as often escaped as JSON inside
    JSON has it (a run of backslashes ending in ``n``, ``t``, ``r``, ``f`` or ``b``; any other
    run kept as one backslash), so the letters either side of it meet. Plain replaces: the
    pattern ``\\\\+[ntrfb]`` scans a text full of backslashes ten times slower."""
    while "\\\\" in text:
        text = text.replace("\\\\", "\\")
    for letter in "ntrfb":
        text = text.replace("\\" + letter, "")
    return text


def _spellings(name: str) -> list[str]:
    """The pieces of a reserved name between which a writer may put ``_``, ``-`` or a space
    (``hiddenstate`` is ``hidden``/``state``)."""
    return {"hiddenstate": ["hidden", "state"]}.get(name, [name])


_OPENERS = re.compile(r"""[{\["']""")


def _next_open(text: str, at: int) -> int | None:
    found = _OPENERS.search(text, at)
    return found.start() if found else None


_DECODER = json.JSONDecoder()


def _parse_at(text: str, start: int) -> tuple[Any, int, str] | None:
    """The structure that starts at ``start``: (object, end, "json" or "python"), or None.

    A quote opens an encoded string only when it holds an escape (a JSON string inside a
    JSON string, a repr of one): an unescaped quote reads the same as the text around it."""
    if text[start] in "\"'":
        return _string_at(text, start)
    try:
        obj, end = _DECODER.raw_decode(text, start)
    except ValueError:
        pass
    else:
        return obj, end, "json"
    closed = _balanced_end(text, start)
    if closed is None:
        return None
    try:
        obj = _literal(text[start:closed])
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return obj, closed, "python"


def _string_at(text: str, start: int) -> tuple[Any, int, str] | None:
    quote = text[start]
    i = start + 1
    escaped = False
    while i < len(text):
        c = text[i]
        if c == "\\":
            escaped = True
            i += 2
            continue
        if c == quote:
            break
        i += 1
    else:
        return None
    if not escaped:
        return None
    end = i + 1
    try:
        if quote == '"':
            return json.loads(text[start:end]), end, "json"
        return _literal(text[start:end]), end, "python"
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


# CPython 3.11 counts the AST builder's recursion per interpreter, not per thread: two threads
# parsing at once can raise SystemError "AST constructor recursion depth mismatch"
# (python/cpython#106905), and rows are exported from executor threads.
_PARSE = threading.Lock()


@functools.lru_cache(maxsize=256)
def _literal(source: str) -> Any:
    with _PARSE:
        return ast.literal_eval(source)


def _balanced_end(text: str, start: int) -> int | None:
    """Where the bracket opened at ``start`` closes (quotes respected), or None."""
    depth = 0
    quote: str | None = None
    i = start
    while i < len(text):
        c = text[i]
        if quote is not None:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _written(value: Any, form: str) -> str:
    if form == "json":
        return json.dumps(value, ensure_ascii=False, default=str)
    return repr(value)
