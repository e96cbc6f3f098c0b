"""Reading a judge's verdict out of its reply, when the reply is not only the verdict.

A judge asked for one JSON object may write text around it, a code fence, or the graded
conversation quoted back; the graded model wrote that conversation, and a completion that holds
``{"score": 1}`` gets it into the reply the moment a judge quotes it. So a reply is read for
every JSON object in it, and the verdict is the one they all give: objects that disagree are
an error (no reward), never the first one's word.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

D = TypeVar("D")


def clip(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, saying so."""
    return text if len(text) <= limit else text[: limit - 15] + " ...[truncated]"


def reason_of(data: dict[str, Any]) -> str:
    """A verdict's ``reason``, or a note that it gave none."""
    reason = data.get("reason")
    return reason.strip() if isinstance(reason, str) and reason.strip() else "(no reason given)"


def json_objects(text: str) -> tuple[list[dict[str, Any]], json.JSONDecodeError | None]:
    """Every top-level JSON object in ``text`` (one inside another is part of it), and the
    first decode error met at a ``{`` that began none."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    first_error: json.JSONDecodeError | None = None
    start = text.find("{")
    while start >= 0:
        try:
            value, end = decoder.raw_decode(text, start)
        except RecursionError:
            raise ValueError(f"judge reply nests JSON too deeply to read: {clip(text)!r}") from None
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
            start = text.find("{", start + 1)
            continue
        found.append(value)
        start = text.find("{", end)
    return found, first_error


def _verdicts(objects: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The objects that give, or set out to give, a verdict: each holding ``key`` at any depth
    (a verdict written inside a quoted one is still a verdict), and each with a ``reason`` but
    no ``key`` (a verdict left unfinished, which must not leave a quoted one to decide)."""
    found: list[dict[str, Any]] = []
    for obj in objects:
        if key not in obj and "reason" in obj:
            found.append(obj)
        # a stack, not recursion: the decoder allows nesting as deep as the interpreter's limit
        stack: list[Any] = [obj]
        while stack:
            value = stack.pop()
            if isinstance(value, dict):
                if key in value:
                    found.append(value)
                stack.extend(reversed(list(value.values())))
            elif isinstance(value, list):
                stack.extend(reversed(value))
    return found


def read_verdict(
    text: str, key: str, read: Callable[[dict[str, Any]], tuple[D, str]]
) -> tuple[D, str]:
    """``(decision, reason)`` that ``read`` finds in the reply: the objects holding ``key``
    (else the first object, so ``read`` can say what it lacks), each read, all deciding alike.
    ValueError otherwise, saying what is wrong."""
    objects, error = json_objects(text)
    if not objects:
        if error is not None:
            raise ValueError(f"judge reply is not valid JSON ({error.msg}): {clip(text)!r}")
        raise ValueError(f"judge reply holds no JSON object: {clip(text)!r}")
    keyed = _verdicts(objects, key) or objects[:1]
    verdicts = [read(o) for o in keyed]
    if len({decision for decision, _ in verdicts}) > 1:
        shown = ", ".join(repr(o.get(key)) for o in keyed)
        raise ValueError(
            f"judge reply holds {len(keyed)} verdicts that disagree ({shown}); "
            "a reply must give one (a judge quoting the graded text can carry the text's own): "
            f"{clip(text)!r}"
        )
    return verdicts[-1]
