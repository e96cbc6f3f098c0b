"""How rows are graded: ``judge=`` (a judge or verifier spec, or a callable) as a
:class:`Grader`, shared by ``simulate()``, ``wai.grade`` and ``Simulation.grade``.

How a run grades its rollouts: ``judge=`` (a judge or verifier spec, or a callable) through
``whileai.scoring``, else the world's programmatic ``episode.check``; ``llm_grade=True`` adds
the rubric judge's score as ``llm_reward``; registered markers measure every row.

Sync and async judges both work; a judge from the registry (typically a model call) runs off
the event loop so rollouts keep going while it thinks.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import attrs

from whileai.backend_use import DEFAULT_MAX_CONCURRENCY
from whileai.progress import RunProgress, asking_again
from whileai.registry import Registry, UnknownPluginError
from whileai.schema.marker_bounds import Bounds, bounds_text, checked_bounds, within
from whileai.schema.records import RowError
from whileai.scoring import (
    JUDGE_FAILURES,
    Scorer,
    Verdict,
    Verifier,
    as_scorer,
    as_verdict,
    grade_row,
    keep_quotes,
)

#: Rows graded at once unless concurrency= says otherwise: simulate()'s max_concurrency.
DEFAULT_CONCURRENCY: int = DEFAULT_MAX_CONCURRENCY

#: The model judge of the core's documented defaults: what ``llm_grade=True`` adds as
#: ``llm_reward`` and what ``wai.grade`` runs when given no judge or only a model spec.
#: Resolved through the registry like any name (a missing whileai-judges gives the usual
#: install hint).
LLM_GRADE_JUDGE = "rubric"


@attrs.frozen
class Grader:
    """A scorer plus how to call it: inline, or in a worker thread for blocking judges."""

    scorer: Scorer
    offload: bool = False
    #: the model backend the judge calls, when it has one (the run reports and closes it)
    backend: Any = None

    @property
    def name(self) -> str:
        return self.scorer.name

    async def verdict(self, row: Mapping[str, Any]) -> Verdict:
        try:
            if self.offload:
                raw = await asyncio.to_thread(self.scorer.score, row)
            else:
                raw = self.scorer.score(row)
            if inspect.isawaitable(raw):
                raw = await raw
        except JUDGE_FAILURES as exc:
            return Verdict.error(f"{type(exc).__name__}: {exc}")
        return as_verdict(raw, what=f"judge {self.name}")

    async def grade(self, row: Mapping[str, Any], *, into: str = "reward") -> dict[str, Any]:
        """A copy of ``row`` graded by this judge (``into="llm_reward"`` keeps ``reward``)."""
        verdict = await self.verdict(row)
        if into == "reward":
            return grade_row(row, self.scorer, verdict=verdict)
        graded = dict(row)
        graded[into] = verdict.reward
        graded.setdefault("llm_judge", {})
        graded["llm_judge"] = {
            "name": self.name,
            "status": verdict.status,
            "reason": verdict.reason,
            "meta": {**self.scorer.meta, **verdict.meta},
        }
        keep_quotes(graded, verdict)
        return graded


def _build_judge(spec: str, registry: Registry, judge_model: str | None) -> Any:
    """A registered judge, its factory given the run's registry (so a model spec in it
    resolves where the run's own backends do) and, for a bare name such as ``"rubric"``, the
    run's judge model as ``backend=``; each only when the factory takes it."""
    _, argument = registry.lookup("judge", spec)
    offer: dict[str, Any] = {"registry": registry}
    if argument is None and judge_model is not None:
        offer["backend"] = judge_model
    return registry.resolve("judge", spec, offer=offer)


def resolve_grader(judge: Any, registry: Registry, *, judge_model: str | None = None) -> Grader:
    """A grader for ``judge=``: a registered judge or verifier name/spec, a verifier object,
    or a callable (``(row)``, ``(prompt, completion)`` or ``(prompt, completion, reference)``,
    sync or async). ``judge_model`` is the spec of the run's judge role, handed to a judge
    named without a model of its own."""
    if isinstance(judge, Grader):
        return judge
    if isinstance(judge, str):
        try:
            built = _build_judge(judge, registry, judge_model)
            offload = not (
                inspect.iscoroutinefunction(built)
                or inspect.iscoroutinefunction(type(built).__call__)
            )
            return Grader(
                _judge_scorer(built), offload=offload, backend=getattr(built, "backend", None)
            )
        except UnknownPluginError as judge_error:
            try:
                built = registry.resolve("verifier", judge)
            except UnknownPluginError as verifier_error:
                # both lists, each with its close names: a typo of a verifier's name is as
                # likely as one of a judge's
                raise UnknownPluginError(
                    f"judge={judge!r} names no registered judge or verifier.\n{judge_error}\n"
                    f"{verifier_error}"
                ) from None
            return Grader(as_scorer(built))
    if isinstance(judge, Scorer):
        return Grader(judge)
    if isinstance(judge, Verifier) or callable(judge):
        return Grader(as_scorer(judge))
    raise TypeError(
        f"judge= must be a judge or verifier name, a verifier, or a callable; got {judge!r}"
    )


def _judge_scorer(judge: Callable[[Mapping[str, Any]], Verdict | Awaitable[Verdict]]) -> Scorer:
    name = getattr(judge, "name", None) or type(judge).__name__
    meta: dict[str, Any] = {"name": name, "version": getattr(judge, "version", None)}
    meta.update(getattr(judge, "meta", {}) or {})
    return Scorer(str(name), "judge", meta, judge)  # type: ignore[arg-type]


def world_grader(world: Any, check: Callable[[Mapping[str, Any]], Verdict]) -> Grader:
    """The world's programmatic checks as a grader (``check(row)`` reads the live episode)."""
    meta = {"name": f"world:{world.name}", "version": world.version}
    return Grader(Scorer(f"world:{world.name}", "world", meta, check))


@attrs.frozen
class MarkerSet:
    """Registered markers, each ``marker(row) -> number | bool | None``, and the ``bounds``
    those that declare them keep to."""

    markers: Mapping[str, Callable[[Mapping[str, Any]], Any]]
    bounds: Mapping[str, Bounds] = attrs.field(factory=dict)

    @classmethod
    def from_registry(cls, registry: Registry) -> tuple[MarkerSet, list[str]]:
        built: dict[str, Callable[[Mapping[str, Any]], Any]] = {}
        bounds: dict[str, Bounds] = {}
        problems: list[str] = []
        for entry in registry.entries("marker"):
            try:
                marker = built[entry.name] = entry.load()()
            except Exception as exc:
                problems.append(f"marker {entry.name!r} could not be built: {exc}")
                continue
            declared = getattr(marker, "bounds", None)
            if declared is None:
                continue
            try:
                bounds[entry.name] = checked_bounds(declared, f"marker {entry.name!r}: bounds")
            except ValueError as exc:
                # measured all the same, as a marker that declares none
                problems.append(f"{exc}; its values are measured without bounds")
        return cls(built, bounds), problems

    def recorded(self) -> dict[str, list[float | None]]:
        """The declared bounds as a run's metadata records them (``marker_bounds``)."""
        return {name: list(bounds) for name, bounds in sorted(self.bounds.items())}

    def measure(self, row: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        values: dict[str, Any] = dict(row.get("markers") or {})
        problems: list[str] = []
        for name, marker in self.markers.items():
            try:
                value = marker(row)
            except JUDGE_FAILURES as exc:
                problems.append(f"marker {name!r} failed: {type(exc).__name__}: {exc}")
                continue
            if value is None:
                continue
            if not isinstance(value, bool | int | float):
                problems.append(f"marker {name!r} returned {value!r}, not a number")
                continue
            bounds = self.bounds.get(name)
            if bounds is not None and not within(value, bounds):
                problems.append(
                    f"marker {name!r} returned {value!r}, outside the bounds it declares "
                    f"{bounds_text(bounds)}"
                )
                continue
            values[name] = value
        return values, problems


@attrs.frozen
class Graders:
    """The run's judges, resolved once for all its runs."""

    grader: Grader | None
    llm_grader: Grader | None
    notes: list[str]


def resolve_graders(
    judge: Any,
    llm_grade: bool,
    registry: Registry,
    *,
    judge_model: str | None = None,
    judge_why: str = "",
) -> Graders:
    """``judge=`` and ``llm_grade=`` as graders, with the report's note on the judge model
    (``judge_model`` is the judge role's spec, ``judge_why`` how it was chosen)."""
    grader = resolve_grader(judge, registry, judge_model=judge_model) if judge is not None else None
    llm_grader = (
        resolve_grader(LLM_GRADE_JUDGE, registry, judge_model=judge_model) if llm_grade else None
    )
    notes = []
    if any(g is not None and g.backend is not None for g in (grader, llm_grader)):
        notes.append(f"judge: {judge_model} ({judge_why})")
    return Graders(grader, llm_grader, notes)


def check_concurrency(concurrency: Any) -> int:
    """``concurrency=`` of a grading call: a positive int, or None for the default."""
    if concurrency is None:
        return DEFAULT_CONCURRENCY
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency= must be a positive int, got {concurrency!r}")
    return concurrency


#: How many rows past the one handed on next may be graded or waiting for the judge, per row
#: judged at once: enough that a slow row does not idle the others, few enough that grading
#: a rows file of any length holds a bounded number of rows.
AHEAD_PER_SLOT = 4


async def grade_each(
    rows: Sequence[Mapping[str, Any]],
    grader: Grader,
    concurrency: int,
    *,
    meta_override: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Graded copies of ``rows``, in order (:func:`graded_in_order`, gathered in a list),
    counted on stderr as they are graded."""
    progress = grading_progress(len(rows))
    graded = counted_grading(
        graded_in_order(rows, grader, concurrency, meta_override=meta_override), progress
    )
    with progress.shown(f"the graded rows were held in memory and are gone; {GRADING_AGAIN}"):
        async with aclosing(graded):
            return [row async for _, row in graded]


#: What grading again costs, said when a grading pass is stopped part way.
GRADING_AGAIN = asking_again("grading", "judge")


def grading_progress(total: int) -> RunProgress:
    """The progress line of a grading pass: rows graded and judge errors (a judge model's
    pass over a long run takes a while)."""
    return RunProgress(total, label="rows graded", usage=False)


async def counted_grading(
    graded: AsyncGenerator[tuple[Mapping[str, Any], dict[str, Any]], None],
    progress: RunProgress,
) -> AsyncGenerator[tuple[Mapping[str, Any], dict[str, Any]], None]:
    """``graded`` (:func:`graded_in_order`), each row counted on ``progress`` as it comes (a
    judge's error as one)."""
    async with aclosing(graded):
        async for given, row in graded:
            progress.advance(error=row.get("judge_status") == "error")
            yield given, row


async def graded_in_order(
    rows: Iterable[Mapping[str, Any]],
    grader: Grader,
    concurrency: int,
    *,
    meta_override: Mapping[str, Any] | None = None,
    start: int = 0,
) -> AsyncGenerator[tuple[Mapping[str, Any], dict[str, Any]], None]:
    """Each of ``rows`` with its graded copy, yielded in order as each is ready, at most ``concurrency``
    judged at once and at most :data:`AHEAD_PER_SLOT` times that many read ahead of the row
    yielded next (a rows file is read as it is graded). A row whose rollout failed
    (``error``) is not sent to the judge: it says so with ``judge_status: "skipped"`` and no
    reward, as the engine's rows do (a judge reading a crashed rollout's partial answer would
    reward it). ``meta_override`` replaces keys of each ``judge_meta``. A judge that raises
    ``RowError`` stops the grading there, naming the row (counted from ``start``: the rows
    are the rest of a file a stopped pass began); the rows read ahead are cancelled."""
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int, row: Mapping[str, Any]) -> dict[str, Any]:
        if row.get("error"):
            return _not_judged(row, grader)
        async with gate:
            try:
                graded = await grader.grade(row)
            except RowError as exc:
                raise RowError(f"row {index}: {exc}") from None
        if meta_override:
            graded["judge_meta"] = {**graded["judge_meta"], **meta_override}
        return graded

    ahead = max(1, concurrency) * AHEAD_PER_SLOT
    pending: deque[tuple[Mapping[str, Any], asyncio.Task[dict[str, Any]]]] = deque()
    try:
        for index, row in enumerate(rows, start=start):
            pending.append((row, asyncio.ensure_future(one(index, row))))
            if len(pending) >= ahead:
                given, task = pending.popleft()
                yield given, await task
        while pending:
            given, task = pending.popleft()
            yield given, await task
    finally:
        left = [task for _, task in pending]
        for task in left:
            task.cancel()
        # wait for the cancelled ones, so none outlives the grading
        await asyncio.gather(*left, return_exceptions=True)


def _not_judged(row: Mapping[str, Any], grader: Grader) -> dict[str, Any]:
    out = dict(row)
    out["reward"] = None
    out["judge_name"] = grader.name
    out["judge_status"] = "skipped"
    out["reason"] = f"rollout failed: {row['error']}"
    out.pop("judge_meta", None)
    return out
