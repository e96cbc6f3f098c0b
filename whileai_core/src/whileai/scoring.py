"""The one grading path: whatever scores a row (a verifier, a callable, a judge) goes through it.

``as_scorer`` turns what a user hands over into a :class:`Scorer`; ``grade_row`` runs it on a
row and writes the verdict with its provenance (``judge_name``, ``judge_status``,
``judge_meta``, ``label_source``). A scorer that raises gives a row with
``judge_status: "error"`` and the reason, never a silent 0; a scorer that returns something
that is not a score in [0, 1] is a bug in the scorer and raises, naming the row.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from whileai.schema.records import RowError

#: What a judge may raise that fails its row rather than the grading: any exception, and
#: SystemExit. A judge that calls ``sys.exit(0)`` would otherwise end the process with status
#: 0 and nothing written, leaving the last grading's file in place as if it were this one's.
#: (KeyboardInterrupt still stops the grading: that is the person at the keyboard.)
JUDGE_FAILURES = (Exception, SystemExit)


def _strings(values: Iterable[Any]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


@attrs.frozen
class Verdict:
    """What a scorer decided about one row."""

    reward: float | None
    reason: str | None = None
    status: str = "ok"
    meta: Mapping[str, Any] = attrs.field(factory=dict)
    #: what of the answer key ``reason`` or ``meta`` quote in a form other than as written
    #: (a reference normalised or parsed, a value the grader looked up in the world): kept on
    #: the row's privileged block as ``quoted``, so an export masks them with the rest of it
    quotes: tuple[str, ...] = attrs.field(default=(), converter=_strings)

    @classmethod
    def error(cls, reason: str, **meta: Any) -> Verdict:
        return cls(None, reason, "error", meta)


@runtime_checkable
class Verifier(Protocol):
    """A programmatic grader of one completion against its reference."""

    name: str
    version: str

    def verify(self, completion: str, reference: Any, prompt: str | None = None) -> Verdict: ...


@attrs.frozen
class Scorer:
    """A normalised scorer: ``score(row) -> Verdict`` plus who it is.

    ``score_many(rows) -> verdicts`` is there when the scorer decides a batch faster than one
    row at a time (a verifier with ``verify_many``, which spreads the rows over its workers).
    """

    name: str
    label_source: str
    meta: Mapping[str, Any]
    score: Callable[[Mapping[str, Any]], Verdict] = attrs.field(repr=False)
    score_many: Callable[[Sequence[Mapping[str, Any]]], list[Verdict]] | None = attrs.field(
        default=None, repr=False
    )


def grade_batch(
    rows: Sequence[Mapping[str, Any]], scorer: Scorer, *, names: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """``grade_row`` over ``rows``, in order: in one batch when the scorer decides batches
    (``score_many``), row by row otherwise, and row by row after a batch that raised, so one
    bad row still costs only its own verdict. A scorer's bug (a reward outside [0, 1]) raises
    RowError naming the row (``names[i]`` when given)."""
    verdicts: list[Any] | None = None
    if scorer.score_many is not None and len(rows) > 1:
        try:
            verdicts = list(scorer.score_many(rows))
        except JUDGE_FAILURES:
            verdicts = None
        if verdicts is not None and len(verdicts) != len(rows):
            verdicts = None
    out: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        try:
            out.append(grade_row(row, scorer, index=i, verdict=verdicts[i] if verdicts else None))
        except RowError as exc:
            if names is None:
                raise
            raise RowError(f"{names[i]}: {exc}") from None
    return out


def keep_quotes(row: dict[str, Any], verdict: Verdict) -> None:
    """Record what ``verdict`` quotes of the answer key on ``row``'s privileged block (a new
    block: the row it was copied from keeps its own)."""
    if not verdict.quotes:
        return
    held = row.get("privileged")
    block = dict(held) if isinstance(held, Mapping) else {}
    block["quoted"] = [*block.get("quoted", ()), *verdict.quotes]
    row["privileged"] = block


def reference_of(row: Mapping[str, Any]) -> Any:
    """The gold answer of a row, where only graders look: ``privileged.reference``."""
    privileged = row.get("privileged")
    return privileged.get("reference") if isinstance(privileged, Mapping) else None


def _callable_name(fn: Any) -> str:
    name = getattr(fn, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _positional_arity(fn: Callable[..., Any]) -> int:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return 1
    params = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values()):
        return max(len(params), 3)
    return len(params)


def as_verdict(value: Any, *, what: str) -> Verdict:
    """Normalise a scorer's return value (a Verdict, number, bool or mapping) to a Verdict."""
    if isinstance(value, Verdict):
        verdict = value
    elif isinstance(value, bool):
        verdict = Verdict(1.0 if value else 0.0)
    elif isinstance(value, int | float):
        verdict = Verdict(float(value))
    elif isinstance(value, Mapping) and "reward" in value:
        verdict = Verdict(
            value["reward"],
            value.get("reason"),
            value.get("status", value.get("judge_status", "ok")),
            dict(value.get("meta", {})),
            tuple(value.get("quotes", ())),
        )
    else:
        raise RowError(
            f"{what} returned {value!r}; a scorer returns a number in [0, 1], a bool, "
            "a Verdict or a mapping with 'reward'"
        )
    reward = verdict.reward
    if reward is not None and (
        isinstance(reward, bool)
        or not isinstance(reward, int | float)
        or not math.isfinite(reward)
        or not 0 <= reward <= 1
    ):
        raise RowError(f"{what} returned reward {reward!r}, outside [0, 1]")
    return verdict


def as_scorer(reward: Any) -> Scorer:
    """A Scorer for a verifier, a ``(prompt, completion[, reference])`` callable or a judge-
    contract callable ``(row) -> verdict``."""
    if isinstance(reward, Scorer):
        return reward
    if isinstance(reward, Verifier):
        verifier = reward

        def score_verifier(row: Mapping[str, Any]) -> Verdict:
            return verifier.verify(row["final_text"], reference_of(row), prompt=row.get("prompt"))

        verifier_meta: dict[str, Any] = {"name": verifier.name, "version": verifier.version}
        verifier_meta.update(getattr(verifier, "meta", {}) or {})
        many = getattr(verifier, "verify_many", None)
        score_many = None
        if callable(many):

            def score_many(rows: Sequence[Mapping[str, Any]]) -> list[Verdict]:
                return list(
                    many([(r["final_text"], reference_of(r), r.get("prompt")) for r in rows])
                )

        return Scorer(verifier.name, "verifier", verifier_meta, score_verifier, score_many)
    if callable(reward):
        fn = reward
        arity = _positional_arity(fn)
        name = _callable_name(fn)
        meta: dict[str, Any] = {"name": name, "version": getattr(fn, "version", None)}
        if arity >= 3:
            return Scorer(
                name,
                "callable",
                meta,
                lambda row: fn(row["prompt"], row["final_text"], reference_of(row)),
            )
        if arity == 2:
            return Scorer(name, "callable", meta, lambda row: fn(row["prompt"], row["final_text"]))
        return Scorer(name, "judge", meta, lambda row: fn(row))
    raise TypeError(
        "reward must be a verifier (wai.verify.MathEqual()), a callable (prompt, completion"
        f"[, reference]) or (row), or the rewards themselves; got {type(reward).__name__}"
    )


def grade_row(
    row: Mapping[str, Any],
    scorer: Scorer,
    *,
    index: int | None = None,
    verdict: Any = None,
) -> dict[str, Any]:
    """A copy of ``row`` with the scorer's verdict and its provenance written on it
    (``verdict``, when a batch already decided it; the scorer is asked otherwise)."""
    where = f"row {index}" if index is not None else "row"
    if verdict is not None:
        verdict = as_verdict(verdict, what=f"{scorer.name} on {where}")
    else:
        try:
            raw = scorer.score(row)
        except JUDGE_FAILURES as exc:
            verdict = Verdict.error(f"{type(exc).__name__}: {exc}")
        else:
            verdict = as_verdict(raw, what=f"{scorer.name} on {where}")
    graded = dict(row)
    graded["reward"] = verdict.reward
    graded["judge_name"] = scorer.name
    graded["judge_status"] = verdict.status
    graded["judge_meta"] = {**scorer.meta, **verdict.meta}
    graded["label_source"] = scorer.label_source
    if verdict.reason is not None:
        graded["reason"] = verdict.reason
    else:
        graded.pop("reason", None)
    keep_quotes(graded, verdict)
    return graded
