"""Rows as JSON text, encoded by orjson where it writes exactly what the row holds.

A run writes every row it plays, so the encoder is on its hot path: the standard library's
C encoder takes about 58 µs for a 4.4 KB row here, orjson about 5. orjson is not a drop-in
replacement, though: it writes ``NaN`` and infinities as ``null``, a datetime in its own
format rather than its ``str()``, and refuses integers past 64 bits, keys that are not
strings and strings with lone surrogates. So its text is used only when it reads back as a
value equal to the one encoded (the check is the decode the export needs anyway, for its
copy); anything else is written by ``json`` exactly as before (``ensure_ascii=False``,
``default=str``). Both are JSON that ``json.loads`` reads back to the same row; orjson's is
compact (no space after ``,`` and ``:``).

Reading a row back (:func:`loads_line`) takes the same care the other way: orjson reads a
line at about three times ``json.loads``' speed, but reads an integer past 64 bits as a
float and refuses a few things json reads (``NaN``, lone surrogates, numbers that overflow a
float), so such lines are read by json.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

#: json.dumps(..., ensure_ascii=False, default=str), built once: dumps with options builds an
#: encoder per call, a tenth of the time of writing a short row
STDLIB = json.JSONEncoder(ensure_ascii=False, default=str)


def dumps_exact(value: Any, option: int = 0) -> tuple[bytes, Any] | None:
    """``value`` as orjson writes it (with its ``option`` flags), and that text read back (a
    fresh copy, equal to ``value``); None when orjson cannot write it or what it wrote reads
    back as something else (a NaN, a tuple, a set or an object written by its ``str()``)."""
    try:
        text = orjson.dumps(value, default=str, option=option)
    except (TypeError, orjson.JSONEncodeError):
        return None
    copy = orjson.loads(text)
    if copy != value:
        return None
    return text, copy


#: every digit as "0": a run of digits becomes a run of zeros, found by a plain byte search
#: (a regular expression for it takes four times orjson's whole read of the row)
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else b for b in range(256))
#: nineteen digits in a row: an integer orjson may read as a float (past 64 bits), or a number
#: written longer than a float holds (json reads both; a string of digits only costs a detour)
_LONG_NUMBER = b"0" * 19


def loads_line(raw: bytes) -> Any:
    """``json.loads(raw)``: orjson's reading where it is surely the same (no run of 19 digits,
    and orjson reads it at all), json's otherwise, with json's error for text that is not
    JSON."""
    if _LONG_NUMBER not in raw.translate(_DIGITS_AS_ZERO):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


def line_of(value: Any) -> bytes:
    """``value`` as one JSONL line, UTF-8: orjson's text when it is exact, json's otherwise."""
    exact = dumps_exact(value)
    if exact is not None:
        return exact[0] + b"\n"
    return (STDLIB.encode(value) + "\n").encode()


def line_of_loaded(value: Any) -> bytes:
    """:func:`line_of` for a value made only of what ``orjson.loads`` returns (dicts with
    string keys, lists, strings, finite numbers, booleans, None) and strings put in their
    place: orjson writes such a value exactly, so it is not read back to be sure (a shop row
    masked after its first encoding spent a fifth of its export reading itself back)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_APPEND_NEWLINE)
    except (TypeError, orjson.JSONEncodeError):
        return line_of(value)


def key_text(value: Any) -> str | bytes | None:
    """``value`` as text a cache can be keyed by (keys sorted, so equal mappings key alike):
    orjson's where it reads back exactly, json's where it does not (so two values that orjson
    would write alike, a NaN and a None, never share a key), None when neither can write it."""
    exact = dumps_exact(value, orjson.OPT_SORT_KEYS)
    if exact is not None:
        return exact[0]
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return None
