"""The ranking protocol: a judge that says which of two rows is better.

A ranking judge is anything registered through ``whileai_register_judges`` (or handed to
``wai.rank`` directly) whose object has ``compare(row_a, row_b)``, sync or async, returning a
:class:`Preference` (or the bare strings ``"A"``, ``"B"``, ``"tie"``, or a mapping with
``"winner"`` and optionally ``"reason"``), plus a ``name`` and a ``version``.

Judges prefer whichever reply they read first (or second) more often than the replies
deserve, so every pair is asked in both orders and an answer that changes with the order is a
tie (:func:`combine_orders`). A judge that already asks both orders itself sets
``both_orders = True`` and reports the disagreement in ``Preference.flipped``; for any other
judge ``wai.rank`` asks both orders and combines them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

WINNERS: tuple[str, ...] = ("A", "B", "tie")
STATUSES: tuple[str, ...] = ("ok", "error")
_SWAPPED = {"A": "B", "B": "A", "tie": "tie"}
#: what a preference for A is worth to A: a win, half a win, a loss
SCORE_OF_A = {"A": 1.0, "tie": 0.5, "B": 0.0}


def _check_winner(instance: Preference, attribute: attrs.Attribute[Any], value: Any) -> None:
    if instance.status == "ok" and value not in WINNERS:
        raise ValueError(f"a preference's winner must be one of {WINNERS}, got {value!r}")
    if instance.status == "error" and value is not None:
        raise ValueError(f"a failed comparison has no winner, got {value!r}")


@attrs.frozen
class Preference:
    """A judge's verdict on one pair: which row (``"A"``, ``"B"``) is better, or ``"tie"``.

    ``status`` is ``"error"`` (with ``reason``, and no winner) when the comparison failed.
    ``flipped`` says whether the two orders disagreed (None: only one order was asked).
    ``meta`` carries the judge's provenance (model, prompt hash, version, ...).
    """

    winner: str | None = attrs.field(validator=_check_winner)
    reason: str | None = None
    status: str = attrs.field(default="ok", validator=attrs.validators.in_(STATUSES))
    flipped: bool | None = None
    meta: Mapping[str, Any] = attrs.field(factory=dict)

    @classmethod
    def error(cls, reason: str, **meta: Any) -> Preference:
        return cls(None, reason, "error", None, meta)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@runtime_checkable
class RankingJudge(Protocol):
    """What ``wai.rank`` needs from a judge: ``compare(row_a, row_b)``, a name and a version."""

    name: str
    version: str

    def compare(
        self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]
    ) -> Preference | str | Mapping[str, Any] | Awaitable[Preference | str | Mapping[str, Any]]: ...


def as_preference(value: Any, what: str = "judge") -> Preference:
    """A :class:`Preference` from what ``compare`` returned; ValueError saying what is wrong."""
    if isinstance(value, Preference):
        return value
    reason = None
    if isinstance(value, Mapping):
        reason = value.get("reason")
        value = value.get("winner")
    if isinstance(value, str):
        winner = value.strip()
        winner = "tie" if winner.lower() == "tie" else winner.upper()
        if winner in WINNERS:
            return Preference(winner, None if reason is None else str(reason))
    raise ValueError(
        f"{what}.compare must return a Preference, 'A', 'B', 'tie' or a mapping with "
        f"'winner'; got {value!r}"
    )


def combine_orders(first: Preference, second: Preference) -> Preference:
    """One verdict from a pair asked as (A, B) and again as (B, A).

    ``second`` is the verdict on the swapped pair, so its ``"A"`` is the original B. When the
    two name the same winner (or both say tie), that is the verdict; when they disagree the
    judge was reading positions, not replies, and the pair is a tie with ``flipped=True``. A
    failure in either order fails the pair: one order alone cannot cancel position bias.
    """
    meta = {**second.meta, **first.meta}
    for label, verdict in (("A-first", first), ("B-first", second)):
        if not verdict.ok:
            return Preference.error(f"{label} order failed: {verdict.reason}", **meta)
    second_as_first = _SWAPPED[str(second.winner)]
    meta["orders"] = [first.winner, second.winner]
    if first.winner == second_as_first:
        return Preference(first.winner, first.reason, "ok", False, meta)
    reason = (
        f"the verdict changed with the order (A-first: {first.winner}, B-first: "
        f"{second.winner}, i.e. {second_as_first} for the original order), so a tie"
    )
    return Preference("tie", reason, "ok", True, meta)
