"""``wai.rank``: a quality score within each task's group, from a judge comparing rows in pairs.

A binary reward says which rollouts of a task passed, not which of the passing ones is better;
``quality`` is that finer signal (see :mod:`whileai.ranking.bradley_terry` for how pairwise
verdicts become a number in [0, 1]). It never touches ``reward``: ranking adds ``quality`` and
``quality_meta`` to each row and leaves every other key as it was.

What is not ranked gets ``quality: None`` and says why in ``quality_meta`` (``status`` and
``reason``), and the report counts it: a rollout that failed (``error``), an empty reply, the
only rankable row of its group, a row whose every comparison failed. A row that is not a
mapping or lacks ``prompt`` / ``final_text`` is malformed, not unrankable: that raises
``RowError`` naming the row (and the file and line).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from whileai.ranking.bradley_terry import DEFAULT_PRIOR_TIES, expected_win_rate, fit
from whileai.ranking.pairs import DEFAULT_MAX_PAIRS, DEFAULT_MIN_PAIRS_PER_ROW, schedule_pairs
from whileai.ranking.preference import SCORE_OF_A, Preference, as_preference, combine_orders
from whileai.registry import Registry, get_registry
from whileai.schema.files import (
    read_sidecar,
    sidecar_path,
    write_rows,
    write_sidecar,
)
from whileai.schema.records import RowError, check_row, task_key
from whileai.schema.report import Report, fmt
from whileai.schema.source import RowSource, row_source
from whileai.scoring import JUDGE_FAILURES
from whileai.sync import run_sync

METHOD = (
    "Bradley-Terry (MM, Hunter 2004) with one virtual tie per row against a reference; "
    "quality = expected win rate against the other ranked rows of the group"
)
#: pairs compared at once when the caller does not say
DEFAULT_CONCURRENCY = 8

#: The judge ``rank`` compares with when given none: a documented default, resolved by name
#: like any judge, so without whileai-judges installed it is the usual install hint.
DEFAULT_RANK_JUDGE = "pairwise"
#: a position-bias rate from which on the report warns that the qualities are mostly ties
HIGH_POSITION_BIAS = 0.5
#: distinct failure reasons the report keeps (the counts cover all of them)
MAX_FAILURES_SHOWN = 5

SKIP_ERROR = "rollout error"
SKIP_EMPTY = "empty final_text"
SKIP_ALONE = "only rankable row of its group"
SKIP_FAILED = "every comparison failed"


@attrs.define(kw_only=True, repr=False)
class RankReport(Report):
    """What ``wai.rank`` did: counts, the ranker, comparisons, position bias, the rows."""

    title = "rank: quality within each task's group"

    n_rows: int
    n_groups: int
    n_ranked: int
    n_skipped: int
    #: unranked rows by reason (rollout error, empty final_text, only rankable row of its
    #: group, every comparison failed)
    skipped: dict[str, int]
    ranker: str
    model: str | None
    version: str | None
    method: str
    #: pairs judged (each asked in both orders) and how many of them failed
    comparisons: int
    failed_comparisons: int
    #: up to five distinct reasons a comparison failed
    failures: list[str]
    #: pairs whose verdict changed when A and B were swapped (scored as ties)
    flips: int
    #: flips / successful comparisons; None when the judge did not report both orders
    position_bias: float | None
    #: groups larger than max_pairs allows, compared on a seeded subset of their pairs
    subsampled_groups: int
    max_pairs: int
    min_pairs_per_row: int
    seed: int
    #: the file written (the source path, or output=); None when nothing was written
    path: str | None
    #: the ranked rows: copies of the input with quality and quality_meta added
    rows: list[dict[str, Any]]
    notes: list[str] = attrs.field(factory=list)

    def _lines(self) -> list[str]:
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items())) or "none"
        bias = (
            f"{fmt(self.position_bias)} ({self.flips} of "
            f"{self.comparisons - self.failed_comparisons} pairs flipped)"
            if self.position_bias is not None
            else "not reported by the judge"
        )
        rows = [
            ["ranker", f"{self.ranker} {self.version or ''}".strip()],
            ["rows / groups", f"{self.n_rows} / {self.n_groups}"],
            ["ranked", str(self.n_ranked)],
            ["not ranked", f"{self.n_skipped} ({skipped})"],
            ["comparisons (failed)", f"{self.comparisons} ({self.failed_comparisons})"],
            ["position bias", bias],
            ["written to", self.path or "nothing written"],
        ]
        if self.failures:
            rows.insert(5, ["first failure", self.failures[0]])
        return [f"  {name:<22}{value}" for name, value in rows]


def rank(
    source: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | Any,
    judge: Any = DEFAULT_RANK_JUDGE,
    *,
    output: str | os.PathLike[str] | None = None,
    concurrency: int | None = None,
    registry: Registry | None = None,
    seed: int = 0,
    max_pairs: int = DEFAULT_MAX_PAIRS,
    min_pairs_per_row: int = DEFAULT_MIN_PAIRS_PER_ROW,
) -> RankReport:
    """Rank the rows of each task against each other and add ``quality`` in [0, 1].

    ``source`` is a JSONL path (rewritten in place, atomically, unless ``output=`` names
    another file), a list of rows, or a ``Simulation`` (its trajectories are compared, so the
    judge may read their privileged rubric). Rows group by ``task_key(row)``; within a group
    the judge compares pairs (all of them up to ``max_pairs``, else a seeded subset with each
    row in at least ``min_pairs_per_row``), each in both orders.

    ``judge`` is a registered judge name or spec (``"pairwise"``,
    ``"pairwise:openai:gpt-4o"``) resolved in ``registry``, or an object with
    ``compare(row_a, row_b)``. ``concurrency`` bounds the pairs judged at once. ``seed``
    fixes which pairs a large group is compared on.

    Returns a :class:`RankReport`; ``report.rows`` are the ranked rows. The file written, and
    its ``.meta.json`` sidecar (which gains a ``ranking`` entry), go through ``export_row``.
    """
    _check_knobs(concurrency, max_pairs, min_pairs_per_row, seed)
    loaded = row_source(source, "rank(source=)", privileged=True)
    for index, row in enumerate(loaded.rows):
        _check(row, index, loaded)
    target = Path(output) if output is not None else loaded.path
    # read before any judge call, so a broken sidecar fails fast instead of after the work
    base_sidecar = _base_sidecar(loaded) if target is not None else None
    ranker, backend_opened = _build_ranker(judge, registry)

    ranked, stats, notes = run_sync(
        _rank_rows(
            list(loaded.rows),
            ranker,
            concurrency=concurrency or DEFAULT_CONCURRENCY,
            seed=seed,
            max_pairs=max_pairs,
            min_pairs_per_row=min_pairs_per_row,
            close_backend=backend_opened,
        )
    )
    report = _report(ranked, stats, ranker, notes, target, seed, max_pairs, min_pairs_per_row)
    if target is not None:
        write_rows(target, ranked)
        sidecar = dict(base_sidecar or {})
        sidecar["ranking"] = _sidecar_entry(report, loaded.path)
        write_sidecar(sidecar_path(target), sidecar)
    return report


def _check_knobs(
    concurrency: int | None, max_pairs: int, min_pairs_per_row: int, seed: int
) -> None:
    for name, value, floor in (
        ("concurrency", concurrency, 1),
        ("max_pairs", max_pairs, 1),
        ("min_pairs_per_row", min_pairs_per_row, 1),
    ):
        if value is None and name == "concurrency":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < floor:
            raise ValueError(f"{name} must be an integer >= {floor}, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")


def _check(row: Any, index: int, source: RowSource) -> None:
    try:
        check_row(row, index)
        task_key(row, index)
    except RowError as exc:
        where = source.where(index)
        if where is not None:
            raise RowError(f"{where}: {exc}") from None
        raise


def _base_sidecar(source: RowSource) -> dict[str, Any] | None:
    """What the written sidecar starts from: the source file's, or the run's own."""
    if source.path is not None:
        return read_sidecar(sidecar_path(source.path))
    sidecar = getattr(source.run, "sidecar", None)
    if callable(sidecar) and source.rows:
        return dict(sidecar(complete=True))
    return None


def _build_ranker(judge: Any, registry: Registry | None) -> tuple[Any, bool]:
    """The judge object, and whether it was built here (so its backend is closed here)."""
    if isinstance(judge, str):
        reg = get_registry(registry)
        built = reg.resolve("judge", judge, offer={"registry": reg})
        opened = True
    else:
        built, opened = judge, False
    if not callable(getattr(built, "compare", None)):
        if opened and getattr(built, "backend", None) is not None:
            run_sync(_close(built))  # built here for nothing: do not leave its model open
        raise TypeError(
            f"judge {judge!r} cannot rank: it has no compare(row_a, row_b). A judge that "
            "grades one row (such as 'rubric') gives reward; rank needs a pairwise judge, "
            "such as 'pairwise' from whileai-judges"
        )
    return built, opened


@attrs.define
class _RowTally:
    wins: int = 0
    ties: int = 0
    losses: int = 0
    failed: int = 0
    failures: list[str] = attrs.Factory(list)
    version: str | None = None

    @property
    def compared(self) -> int:
        return self.wins + self.ties + self.losses


async def _ask(ranker: Any, row_a: Mapping[str, Any], row_b: Mapping[str, Any]) -> Preference:
    what = str(getattr(ranker, "name", type(ranker).__name__))
    compare = ranker.compare
    try:
        if inspect.iscoroutinefunction(compare):
            raw = await compare(row_a, row_b)
        else:
            # a blocking judge (a local model call) stays off the event loop
            raw = await asyncio.to_thread(compare, row_a, row_b)
            if inspect.isawaitable(raw):
                raw = await raw
        return as_preference(raw, what)
    except JUDGE_FAILURES as exc:  # a judge's sys.exit fails its comparison, not the ranking
        return Preference.error(f"{type(exc).__name__}: {exc}")


async def _judge_pair(
    ranker: Any, row_a: Mapping[str, Any], row_b: Mapping[str, Any]
) -> Preference:
    if getattr(ranker, "both_orders", False):
        return await _ask(ranker, row_a, row_b)
    first = await _ask(ranker, row_a, row_b)
    second = await _ask(ranker, row_b, row_a)
    return combine_orders(first, second)


async def _rank_rows(
    rows: list[Any],
    ranker: Any,
    *,
    concurrency: int,
    seed: int,
    max_pairs: int,
    min_pairs_per_row: int,
    close_backend: bool,
) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    skipped: dict[int, tuple[str, str]] = {}
    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        members = groups.setdefault(task_key(row, index), [])
        if row.get("error"):
            skipped[index] = (SKIP_ERROR, f"the rollout failed: {str(row['error'])[:200]}")
        elif not row["final_text"].strip():
            skipped[index] = (SKIP_EMPTY, "no reply to rank (final_text is empty)")
        else:
            members.append(index)

    jobs: list[tuple[str, int, int]] = []
    subsampled = 0
    for key, members in groups.items():
        if len(members) == 1:
            skipped[members[0]] = (
                SKIP_ALONE,
                "the only rankable row of its group: nothing to compare it with",
            )
            continue
        pairs, cut = schedule_pairs(
            len(members),
            max_pairs=max_pairs,
            min_pairs_per_row=min_pairs_per_row,
            # seeded per group, so one group's pairs do not depend on the others
            rng=random.Random(f"{seed}:{key}"),
        )
        subsampled += cut
        jobs.extend((key, members[i], members[j]) for i, j in pairs)

    gate = asyncio.Semaphore(concurrency)

    async def judged(a: int, b: int) -> Preference:
        async with gate:
            return await _judge_pair(ranker, rows[a], rows[b])

    notes: list[str] = []
    try:
        verdicts = list(await asyncio.gather(*(judged(a, b) for _, a, b in jobs)))
    finally:
        if close_backend and getattr(ranker, "backend", None) is not None:
            notes.extend(await _close(ranker))

    tallies: dict[int, _RowTally] = {}
    outcomes: dict[str, list[tuple[int, int, float]]] = {}
    for (key, a, b), verdict in zip(jobs, verdicts, strict=True):
        ta = tallies.setdefault(a, _RowTally())
        tb = tallies.setdefault(b, _RowTally())
        if not verdict.ok:
            for tally in (ta, tb):
                tally.failed += 1
                tally.failures.append(str(verdict.reason))
            continue
        score = SCORE_OF_A[str(verdict.winner)]
        outcomes.setdefault(key, []).append((a, b, score))
        version = verdict.meta.get("version")
        for tally, own in ((ta, score), (tb, 1 - score)):
            tally.version = tally.version or (str(version) if version else None)
            if own == 1:
                tally.wins += 1
            elif own == 0:
                tally.losses += 1
            else:
                tally.ties += 1

    quality: dict[int, float] = {}
    strength: dict[int, float] = {}
    for key, members in groups.items():
        ranked = [i for i in members if i in tallies and tallies[i].compared]
        for i in members:
            if i in tallies and not tallies[i].compared:
                first = tallies[i].failures[0]
                skipped[i] = (
                    SKIP_FAILED,
                    f"all {tallies[i].failed} comparisons failed; first: {first}",
                )
        if len(ranked) < 2:
            continue
        local = {i: n for n, i in enumerate(ranked)}
        p = fit(
            len(ranked),
            [(local[a], local[b], s) for a, b, s in outcomes.get(key, [])],
            prior_ties=DEFAULT_PRIOR_TIES,
        )
        for i, q, s in zip(ranked, expected_win_rate(p), p, strict=True):
            quality[i] = float(q)
            strength[i] = float(s)

    provenance = {
        "ranker": str(getattr(ranker, "name", type(ranker).__name__)),
        "model": getattr(ranker, "model", None),
        "version": getattr(ranker, "version", None),
    }
    out: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        copy = dict(row)
        seen = tallies.get(index)
        meta: dict[str, Any] = dict(provenance)
        if seen is not None and seen.version:
            meta["version"] = seen.version  # a rubric read from the row is its own judge
        if index in quality and seen is not None:
            tally = seen
            meta.update(
                status="ok",
                method="bradley-terry",
                group_size=sum(1 for i in groups[task_key(row, index)] if i in quality),
                comparisons=tally.compared,
                wins=tally.wins,
                ties=tally.ties,
                losses=tally.losses,
                failed=tally.failed,
                strength=strength[index],
            )
            copy["quality"] = quality[index]
        else:
            why, reason = skipped[index]
            meta.update(status="skipped", skipped=why, reason=reason)
            if seen is not None:
                meta["failed"] = seen.failed
            copy["quality"] = None
        copy["quality_meta"] = meta
        out.append(copy)

    ok = [v for v in verdicts if v.ok]
    known = [v for v in ok if v.flipped is not None]
    failures = list(dict.fromkeys(str(v.reason) for v in verdicts if not v.ok))
    stats = {
        "n_groups": len(groups),
        "skipped": dict(Counter(why for why, _ in skipped.values())),
        "comparisons": len(verdicts),
        "failed_comparisons": len(verdicts) - len(ok),
        "failures": failures[:MAX_FAILURES_SHOWN],
        "flips": sum(1 for v in known if v.flipped),
        "position_bias": (sum(1 for v in known if v.flipped) / len(known)) if known else None,
        "bias_unreported": len(ok) - len(known),
        "subsampled_groups": subsampled,
    }
    return out, stats, notes


async def _close(ranker: Any) -> list[str]:
    from whileai.backend_use import RunBackend, close_backends

    name = str(getattr(ranker, "model", None) or getattr(ranker, "name", "judge"))
    return await close_backends([RunBackend(name, ranker.backend, ["judge"], opened=True)])


def _report(
    rows: list[dict[str, Any]],
    stats: Mapping[str, Any],
    ranker: Any,
    notes: list[str],
    target: Path | None,
    seed: int,
    max_pairs: int,
    min_pairs_per_row: int,
) -> RankReport:
    n_ranked = sum(1 for r in rows if r["quality"] is not None)
    notes = list(notes)
    if stats["subsampled_groups"]:
        notes.append(
            f"{stats['subsampled_groups']} groups had more than max_pairs={max_pairs} pairs and "
            f"were compared on a seeded subset (seed={seed}, each row in at least "
            f"{min_pairs_per_row} pairs where the group allows)"
        )
    if stats["failed_comparisons"]:
        notes.append(
            f"{stats['failed_comparisons']} of {stats['comparisons']} comparisons failed; the "
            "rows in them are ranked on their other comparisons (quality_meta.failed counts them)"
        )
    bias = stats["position_bias"]
    if bias is not None and bias >= HIGH_POSITION_BIAS:
        notes.append(
            f"the judge changed its verdict when A and B were swapped in {bias:.0%} of pairs; "
            "those pairs count as ties, so these qualities carry little signal (a stronger "
            "judge model would separate the rows)"
        )
    if stats["bias_unreported"]:
        notes.append(
            f"{stats['bias_unreported']} comparisons did not say whether the order changed the "
            "verdict; position_bias leaves them out"
        )
    if n_ranked:
        notes.append("quality compares rows within a task only; across tasks it is not one scale")
    if not rows:
        notes.append("no rows to rank")
    return RankReport(
        n_rows=len(rows),
        n_groups=stats["n_groups"],
        n_ranked=n_ranked,
        n_skipped=len(rows) - n_ranked,
        skipped=dict(stats["skipped"]),
        ranker=str(getattr(ranker, "name", type(ranker).__name__)),
        model=getattr(ranker, "model", None),
        version=getattr(ranker, "version", None),
        method=METHOD,
        comparisons=stats["comparisons"],
        failed_comparisons=stats["failed_comparisons"],
        failures=list(stats["failures"]),
        flips=stats["flips"],
        position_bias=stats["position_bias"],
        subsampled_groups=stats["subsampled_groups"],
        max_pairs=max_pairs,
        min_pairs_per_row=min_pairs_per_row,
        seed=seed,
        path=str(target) if target is not None else None,
        rows=rows,
        notes=notes,
    )


def _sidecar_entry(report: RankReport, source: Path | None) -> dict[str, Any]:
    """The ``ranking`` record the sidecar keeps: who ranked the rows, how, and when."""
    entry = {k: v for k, v in report.to_dict().items() if k not in ("rows", "path")}
    entry["source"] = str(source) if source is not None else None
    entry["ranked_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return entry
