"""Plain values across the boundary between the candidate's process and the trusted tests.

Only values whose meaning is fixed by Python itself cross: ``None``, ``bool``, ``int``,
``float``, ``complex``, ``str``, ``bytes``, ``bytearray`` and ``list``, ``tuple``, ``dict``,
``set``, ``frozenset`` of them, and the standard library's ``fractions.Fraction`` and
``decimal.Decimal``, each of exactly that type (a subclass of ``int`` could carry
an ``__eq__`` of the candidate's). Anything else stays in the process that owns it and crosses
as a handle, ``{"h": id}``, that the other side can only call, read attributes of or iterate,
never compare. The trusted side decodes with ``decode``, which builds nothing but these types
from JSON, so no byte the candidate sends can become code, an object with behaviour of its
own, or a value of unbounded size.

Frames are a 4-byte big-endian length and that many bytes of UTF-8 JSON.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

# Deeper than this is almost surely a cycle or a bomb; no test compares such a value.
MAX_DEPTH = 100
# Elements in one value. A test compares answers, not data sets: a million is far past any
# HumanEval or MBPP answer and still cheap to copy.
MAX_NODES = 1_000_000
# Bytes in one frame: bounds what the trusted side ever reads, and so what parsing it can
# build, well inside the memory limit (the worst case, 16 MB of "{}", parses to ~350 MB).
MAX_FRAME = 16 * 1024 * 1024
# Ints beyond this many bits travel as hex text: JSON's decimal form is limited to 4300 digits
# by default, and hex conversion has no such limit.
_SMALL_INT_BITS = 62


class WireError(ValueError):
    """A value that cannot cross, or bytes that are not a well-formed frame or value."""


class _Budget:
    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_NODES

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise WireError(f"the value has more than {MAX_NODES:,} elements")


def encode(value: Any, other: Callable[[Any], dict[str, Any]]) -> Any:
    """``value`` as a JSON-ready tree; ``other`` turns anything that is not plain into a
    handle (or raises ``WireError`` where handles are not allowed)."""
    return _encode(value, other, 0, _Budget())


def _encode(value: Any, other: Callable[[Any], dict[str, Any]], depth: int, budget: _Budget) -> Any:
    budget.spend()
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        if value.bit_length() <= _SMALL_INT_BITS:
            return value
        return {"i": format(value, "x")}
    if kind is float:
        # NaN and the infinities too: Python's json writes and reads them as literals.
        return value
    if depth >= MAX_DEPTH:
        raise WireError(f"the value is nested deeper than {MAX_DEPTH} levels")
    deeper = depth + 1
    if kind is list:
        return {"l": [_encode(item, other, deeper, budget) for item in value]}
    if kind is tuple:
        return {"t": [_encode(item, other, deeper, budget) for item in value]}
    if kind is dict:
        return {
            "d": [
                [_encode(k, other, deeper, budget), _encode(v, other, deeper, budget)]
                for k, v in value.items()
            ]
        }
    if kind is set:
        return {"s": [_encode(item, other, deeper, budget) for item in value]}
    if kind is frozenset:
        return {"f": [_encode(item, other, deeper, budget) for item in value]}
    if kind is bytes:
        return {"b": base64.b64encode(value).decode("ascii")}
    if kind is bytearray:
        return {"ba": base64.b64encode(bytes(value)).decode("ascii")}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    if kind is Fraction:
        return {
            "q": [
                _encode(value.numerator, other, deeper, budget),
                _encode(value.denominator, other, deeper, budget),
            ]
        }
    if kind is Decimal:
        return {"m": str(value)}
    return other(value)


def decode(tree: Any, handle: Callable[[dict[str, Any]], Any]) -> Any:
    """The value a tree from ``encode`` stands for; ``handle`` makes the local stand-in for a
    handle. Raises ``WireError`` on anything ``encode`` would not have produced."""
    try:
        return _decode(tree, handle, 0, _Budget())
    except WireError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        raise WireError(f"malformed value: {type(exc).__name__}: {exc}") from None


def _decode(tree: Any, handle: Callable[[dict[str, Any]], Any], depth: int, budget: _Budget) -> Any:
    budget.spend()
    kind = type(tree)
    if tree is None or kind is bool or kind is str or kind is int or kind is float:
        return tree
    if kind is not dict or len(tree) == 0:
        raise WireError(f"malformed value: unexpected {kind.__name__}")
    if depth >= MAX_DEPTH:
        raise WireError(f"the value is nested deeper than {MAX_DEPTH} levels")
    deeper = depth + 1
    if "h" in tree:
        if type(tree["h"]) is not int:
            raise WireError("malformed handle")
        return handle(tree)
    if len(tree) != 1:
        raise WireError("malformed value: a tagged value has one key")
    ((tag, body),) = tree.items()
    if tag in ("l", "t", "s", "f"):
        if type(body) is not list:
            raise WireError(f"malformed value: {tag!r} holds {type(body).__name__}")
        items = [_decode(item, handle, deeper, budget) for item in body]
        if tag == "l":
            return items
        if tag == "t":
            return tuple(items)
        return set(items) if tag == "s" else frozenset(items)
    if tag == "d":
        if type(body) is not list or any(type(p) is not list or len(p) != 2 for p in body):
            raise WireError("malformed value: a dict is a list of pairs")
        return {
            _decode(k, handle, deeper, budget): _decode(v, handle, deeper, budget) for k, v in body
        }
    if tag == "i" and type(body) is str:
        return int(body, 16)
    if tag in ("b", "ba") and type(body) is str:
        raw = base64.b64decode(body.encode("ascii"), validate=True)
        return raw if tag == "b" else bytearray(raw)
    if tag == "c" and type(body) is list and len(body) == 2:
        real, imag = body
        if type(real) not in (int, float) or type(imag) not in (int, float):
            raise WireError("malformed value: a complex is two numbers")
        return complex(real, imag)
    if tag == "q" and type(body) is list and len(body) == 2:
        numerator, denominator = (_decode(part, handle, deeper, budget) for part in body)
        if type(numerator) is not int or type(denominator) is not int or denominator <= 0:
            raise WireError("malformed value: a fraction is two whole numbers")
        return Fraction(numerator, denominator)
    if tag == "m" and type(body) is str and len(body) <= 4096:
        return Decimal(body)
    raise WireError(f"malformed value: unknown tag {tag!r}")


def no_handles(value: Any) -> dict[str, Any]:
    raise WireError(f"a {type(value).__name__} cannot be copied across the sandbox boundary")


def send(fd: int, message: Any) -> None:
    """Write one frame; the JSON is ASCII, so lone surrogates in strings survive."""
    data = json.dumps(message, separators=(",", ":")).encode("ascii")
    if len(data) > MAX_FRAME:
        raise WireError(f"the message is {len(data):,} bytes, over the {MAX_FRAME:,} limit")
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def receive(fd: int) -> Any:
    """The next frame's message; ``EOFError`` when the other side has gone."""
    head = _read_exactly(fd, 4)
    if head is None:
        raise EOFError("the other side closed the channel")
    (size,) = struct.unpack(">I", head)
    if size > MAX_FRAME:
        raise WireError(f"a frame of {size:,} bytes is over the {MAX_FRAME:,} limit")
    body = _read_exactly(fd, size)
    if body is None:
        raise EOFError("the other side closed the channel mid-message")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"a frame that is not JSON: {exc}") from None
