"""The built-in markers: behaviour measurements read off one exported row.

A marker is called as ``marker(row)`` on every finished rollout and returns a number, a bool,
or ``None`` when the measurement does not apply to that row (the engine then omits it).
Markers read only what an exported row carries (never ``privileged``), so they give the same
value on a saved file as in memory. Each declares its ``bounds`` (the marker hook's): the
flags ``(0, 1)``, the counts ``(0, None)``.

The step keys they read are the engine's (``whileai.schema.export.step_messages``):
``role`` (``"assistant" | "user" | "tool" | "system"``), ``content``, ``truncated`` on agent
turns, ``fault`` / ``error`` on tool steps (or an ``"error"`` key in the tool result), and
``user_status`` on simulated-user steps; of the row, ``final_text``, ``truncated`` and
``stop_reason`` (how the rollout ended: ``satisfied``, ``gave_up``, ``turn_limit``,
``single_message``, ``error``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import attrs

#: The statuses a simulated user step carries in ``step["user_status"]``.
USER_STATUSES: frozenset[str] = frozenset({"continue", "satisfied", "gave_up"})

#: What counts as a refusal: the agent declining the request itself, in the phrasings
#: instruction-tuned models use. A reply that explains a policy ("that order is past the
#: refund window") is not matched: the agent engaged. Matched case-insensitively, with curly
#: apostrophes read as straight ones.
REFUSAL_PATTERNS: tuple[str, ...] = (
    r"\bI (?:can ?not|can't|won't|will not|am unable to|'m unable to|am not able to|'m not able to) "
    r"(?:help|assist|comply|do that|provide|support|fulfil|fulfill|answer)",
    r"\bI(?:'m| am) sorry,? but I (?:can ?not|can't|won't|will not)\b",
    r"\bI must (?:decline|refuse)\b",
    r"\bI(?:'m| am) not (?:able|allowed|permitted) to (?:help|assist|do that|discuss)",
    r"\bas an AI(?: language model| assistant)?,? I (?:can ?not|can't|don't|do not|am unable)",
    r"\bI (?:can't|cannot|won't) (?:engage|participate) in\b",
    r"\bthat(?:'s| is) not something I can (?:help|assist) with\b",
)


def _steps(row: Mapping[str, Any]) -> Sequence[Mapping[str, Any]] | None:
    steps = row.get("steps")
    if steps is None:
        return None
    if not isinstance(steps, list | tuple):
        raise TypeError(f"row steps must be a list of step mappings, got {type(steps).__name__}")
    return [s for s in steps if isinstance(s, Mapping)]


def _final_text(row: Mapping[str, Any]) -> str | None:
    text = row.get("final_text")
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"row final_text must be a string, got {type(text).__name__}")
    return text


@attrs.frozen
class Refusal:
    """Whether the agent's final answer refuses the request (a pattern in ``patterns``
    matched). ``None`` for a row with no final answer (a failed rollout).

    ``patterns`` replaces the built-in list :data:`REFUSAL_PATTERNS`; ``extra_patterns`` adds
    to it (regular expressions, case-insensitive).
    """

    patterns: tuple[str, ...] = attrs.field(default=REFUSAL_PATTERNS, converter=tuple)
    extra_patterns: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    name: str = "refusal"
    bounds: ClassVar[tuple[float | None, float | None]] = (0, 1)
    version: str = "1"
    _compiled: tuple[re.Pattern[str], ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        compiled = []
        for pattern in (*self.patterns, *self.extra_patterns):
            try:
                compiled.append(re.compile(pattern, re.IGNORECASE))
            except re.error as exc:
                raise ValueError(
                    f"refusal pattern {pattern!r} is not a valid regex: {exc}"
                ) from exc
        object.__setattr__(self, "_compiled", tuple(compiled))

    def __call__(self, row: Mapping[str, Any]) -> bool | None:
        text = _final_text(row)
        if not text:
            return None
        text = text.replace("\u2019", "'").replace("\u2018", "'")
        return any(p.search(text) for p in self._compiled)


def _result_has_error(content: Any) -> bool:
    """Whether a tool result (a mapping, or JSON text of one) carries a truthy ``error``."""
    if isinstance(content, str):
        stripped = content.lstrip()
        if not stripped.startswith("{") or '"error"' not in stripped:
            return False
        try:
            content = json.loads(stripped)
        except ValueError:
            return False
    return isinstance(content, Mapping) and bool(content.get("error"))


@attrs.frozen
class ToolErrors:
    """How many tool results came back as an error or carried a fault: tool steps
    (``role == "tool"``) with a truthy ``fault`` or ``error`` key, or whose result holds a
    truthy ``"error"`` (a refused or invalid call). A silent fault (stale or partial data, a
    malformed payload) counts through its ``fault`` key. ``None`` for a row with no ``steps``
    (nothing says whether tools ran)."""

    name: str = "tool_errors"
    bounds: ClassVar[tuple[float | None, float | None]] = (0, None)
    version: str = "1"

    def __call__(self, row: Mapping[str, Any]) -> int | None:
        steps = _steps(row)
        if steps is None:
            return None
        return sum(
            1
            for s in steps
            if s.get("role") == "tool"
            and (s.get("fault") or s.get("error") or _result_has_error(s.get("content")))
        )


@attrs.frozen
class FaultsMet:
    """How many of the rollout's tool results the world's fault plan shaped (timeouts, errors,
    rate limits, stale, partial or malformed data): the row's ``faults`` list, or, for a row
    without one, its tool steps carrying a ``fault`` key. With ``tool_errors`` beside it, a
    comparison of faults off against on separates what the faults did from the errors the
    agent's own calls met. ``None`` for a row with neither (nothing says whether tools ran)."""

    name: str = "faults_met"
    bounds: ClassVar[tuple[float | None, float | None]] = (0, None)
    version: str = "1"

    def __call__(self, row: Mapping[str, Any]) -> int | None:
        faults = row.get("faults")
        if isinstance(faults, list | tuple):
            return len(faults)
        steps = _steps(row)
        if steps is None:
            return None
        return sum(1 for s in steps if s.get("role") == "tool" and s.get("fault"))


@attrs.frozen
class Length:
    """Characters in the agent's final answer. ``None`` for a row with no final answer."""

    name: str = "length"
    bounds: ClassVar[tuple[float | None, float | None]] = (0, None)
    version: str = "1"

    def __call__(self, row: Mapping[str, Any]) -> int | None:
        text = _final_text(row)
        return None if text is None else len(text)


@attrs.frozen
class Turns:
    """How many turns the agent took: steps with ``role == "assistant"`` (a turn that only
    called tools counts). A row with no steps but a final answer (a plain completion, as
    ``wai.rows()`` builds) is one turn; with neither, ``None``."""

    name: str = "turns"
    bounds: ClassVar[tuple[float | None, float | None]] = (0, None)
    version: str = "1"

    def __call__(self, row: Mapping[str, Any]) -> int | None:
        steps = _steps(row)
        if steps:
            return sum(1 for s in steps if s.get("role") == "assistant")
        return 1 if _final_text(row) else None


@attrs.frozen
class Truncated:
    """Whether any agent turn was cut at the token cap (``step["truncated"]`` on any step, or
    the row's own ``truncated``)."""

    name: str = "truncated"
    bounds: ClassVar[tuple[float | None, float | None]] = (0, 1)
    version: str = "1"

    def __call__(self, row: Mapping[str, Any]) -> bool:
        steps = _steps(row) or ()
        return bool(row.get("truncated")) or any(bool(s.get("truncated")) for s in steps)


@attrs.frozen
class GaveUp:
    """Whether the simulated user gave up.

    Simulated-user steps may carry ``step["user_status"]``, one of ``"continue"`` (the user
    replies and the conversation goes on), ``"satisfied"`` (the user is done, goal met in their
    eyes) or ``"gave_up"`` (patience ran out, or the user stopped trying); the row's
    ``stop_reason`` says how the rollout ended. True when a user step says ``"gave_up"`` or the
    rollout stopped with ``stop_reason == "gave_up"``; False when it ended otherwise with a
    simulated user in it; ``None`` when there was no simulated user to give up (a
    single-message rollout, a rollout that failed, a row with neither key). An unknown
    ``user_status`` raises ValueError.
    """

    name: str = "gave_up"
    bounds: ClassVar[tuple[float | None, float | None]] = (0, 1)
    version: str = "1"

    def __call__(self, row: Mapping[str, Any]) -> bool | None:
        statuses = list(_user_statuses(_steps(row) or ()))
        stop_reason = row.get("stop_reason")
        if "gave_up" in statuses or stop_reason == "gave_up":
            return True
        if statuses:
            return False
        if stop_reason in (None, "single_message", "error"):
            return None
        return False


def _user_statuses(steps: Iterable[Mapping[str, Any]]) -> Iterable[str]:
    for index, step in enumerate(steps):
        status = step.get("user_status")
        if status is None:
            continue
        if status not in USER_STATUSES:
            raise ValueError(
                f"step {index}: user_status {status!r} is not one of {sorted(USER_STATUSES)}"
            )
        yield status


#: Every built-in marker class, by the name it registers under.
MARKERS: dict[str, type[Any]] = {
    "refusal": Refusal,
    "tool_errors": ToolErrors,
    "faults_met": FaultsMet,
    "length": Length,
    "turns": Turns,
    "truncated": Truncated,
    "gave_up": GaveUp,
}
