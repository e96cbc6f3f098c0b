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

import datetime as dt
import os
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from whileai.progress import RunProgress, asking_again
from whileai.ranking.groups import Groups, Outcomes, judge_groups, rankable_groups
from whileai.ranking.pairs import DEFAULT_MAX_PAIRS, DEFAULT_MIN_PAIRS_PER_ROW
from whileai.registry import Registry, get_registry
from whileai.response_cache import cache_line, caching
from whileai.schema.export import export_line
from whileai.schema.files import (
    RowWriter,
    read_sidecar,
    replacing,
    sidecar_path,
    user_path,
    write_sidecar,
)
from whileai.schema.records import RowError, check_row, task_key
from whileai.schema.report import Report, fmt
from whileai.schema.source import RowSource, row_source
from whileai.schema.stored import StoredRows
from whileai.schema.wording import agreeing, counted
from whileai.sync import run_sync

METHOD = (
    "Bradley-Terry with one virtual tie per row against a reference (penalised maximum "
    "likelihood, Newton's method in log strength); "
    "quality = expected win rate against the other ranked rows of the group"
)
#: pairs compared at once when the caller does not say
DEFAULT_CONCURRENCY = 8

#: The judge ``rank`` compares with when given none: a documented default, resolved by name
#: like any judge, so without whileai-judges installed it is the usual install hint.
DEFAULT_RANK_JUDGE = "pairwise"
#: a position-bias rate from which on the report warns that the qualities are mostly ties
HIGH_POSITION_BIAS = 0.5


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
    #: the ranked rows: copies of the input with quality and quality_meta added (read back
    #: from the file written, when one was: a run of any length ranks in bounded memory)
    rows: Sequence[dict[str, Any]]
    notes: list[str] = attrs.field(factory=list)
    #: the response cache (cache=): its directory, hits, misses, uncacheable calls, tokens
    #: saved; None with no cache
    cache: dict[str, Any] | None = None

    def _lines(self) -> list[str]:
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items())) or "none"
        bias = (
            f"{fmt(self.position_bias)} ({self.flips} of "
            f"{counted(self.comparisons - self.failed_comparisons, 'pair')} flipped)"
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
        if self.cache:
            rows.append(["response cache", cache_line(self.cache)])
        return [f"  {name:<22}{value}" for name, value in rows]


def rank(
    source: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | Any,
    judge: Any = DEFAULT_RANK_JUDGE,
    *,
    output: str | os.PathLike[str] | None = None,
    concurrency: int | None = None,
    registry: Registry | None = None,
    cache: Any = None,
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
    fixes which pairs a large group is compared on. ``cache`` is a directory where the judge
    model's answers are cached, so ranking the same rows again costs no tokens (``False``:
    none; None: ``WHILEAI_CACHE``'s directory, else none); ``report.cache`` counts what it did.

    Returns a :class:`RankReport`; ``report.rows`` are the ranked rows. The file written, and
    its ``.meta.json`` sidecar (which gains a ``ranking`` entry), go through ``export_row``.
    """
    _check_knobs(concurrency, max_pairs, min_pairs_per_row, seed)
    loaded = row_source(source, "rank(source=)", privileged=True)
    # one walk: every row checked (before any judge call) and put in its group
    groups = Groups()
    for index, row in enumerate(loaded.rows):
        _check(row, index, loaded)
        groups.add(row, index)
    target = user_path(output) if output is not None else loaded.path
    # read before any judge call, so a broken sidecar fails fast instead of after the work
    base_sidecar = _base_sidecar(loaded) if target is not None else None
    wrapper = caching(cache)
    if wrapper is not None:
        registry = get_registry(registry).with_backend_wrapper(wrapper)
    ranker, backend_opened = _build_ranker(judge, registry)
    outcomes = Outcomes(
        groups,
        {
            "ranker": str(getattr(ranker, "name", type(ranker).__name__)),
            "model": getattr(ranker, "model", None),
            "version": getattr(ranker, "version", None),
        },
    )
    notes = run_sync(
        _judge(
            loaded.rows,
            outcomes,
            ranker,
            concurrency=concurrency or DEFAULT_CONCURRENCY,
            seed=seed,
            max_pairs=max_pairs,
            min_pairs_per_row=min_pairs_per_row,
            close_backend=backend_opened,
            kept=(
                f"{str(target)!r} is left as it was"
                if target is not None
                else "the ranking was held in memory and is gone"
            ),
        )
    )
    if target is None:
        ranked: Sequence[dict[str, Any]] = list(_ranked_rows(loaded.rows, outcomes))
    else:
        ranked = _write_ranked(target, _ranked_rows(loaded.rows, outcomes))
    report = _report(outcomes, ranked, ranker, notes, target, seed, max_pairs, min_pairs_per_row)
    if wrapper is not None:
        report = attrs.evolve(report, cache=wrapper.report())
    if target is not None:
        sidecar = dict(base_sidecar or {})
        sidecar["ranking"] = _sidecar_entry(report, loaded.path)
        write_sidecar(sidecar_path(target), sidecar)
    return report


async def _judge(
    rows: Sequence[Mapping[str, Any]],
    outcomes: Outcomes,
    ranker: Any,
    *,
    close_backend: bool,
    kept: str,
    **knobs: Any,
) -> list[str]:
    """Judge every group, counting them on stderr, then close the judge's model when it was
    opened here; what closing it said. Stopped part way (Ctrl-C), it says what was ``kept``."""
    notes: list[str] = []
    tasks = sum(1 for _ in rankable_groups(outcomes))
    progress = RunProgress(tasks, label="tasks ranked", usage=False)
    try:
        with progress.shown(f"{kept}; {asking_again('ranking', 'judge')}"):
            await judge_groups(rows, outcomes, ranker, progress=progress, **knobs)
    finally:
        if close_backend and getattr(ranker, "backend", None) is not None:
            notes = await _close(ranker)
    return notes


def _ranked_rows(rows: Sequence[Mapping[str, Any]], outcomes: Outcomes) -> Iterator[dict[str, Any]]:
    """Each row, in order, with quality and quality_meta added."""
    for index, row in enumerate(rows):
        yield outcomes.ranked(row, index, task_key(row, index))


def _write_ranked(target: Path, ranked: Iterable[dict[str, Any]]) -> StoredRows:
    """``ranked`` written to ``target`` a row at a time, in its place once all are (a failure
    part way, or ``target`` being the rows' own file, leaves ``target`` as it was until then);
    the rows read back from it."""
    offsets = array("q")
    with replacing(target) as temporary, RowWriter(temporary) as writer:
        for row in ranked:
            offsets.append(writer.write_line(export_line(row)[1]))
        writer.sync()
    return StoredRows(target, offsets)


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


async def _close(ranker: Any) -> list[str]:
    from whileai.backend_use import RunBackend, close_backends

    name = str(getattr(ranker, "model", None) or getattr(ranker, "name", "judge"))
    return await close_backends([RunBackend(name, ranker.backend, ["judge"], opened=True)])


def _report(
    outcomes: Outcomes,
    rows: Sequence[dict[str, Any]],
    ranker: Any,
    notes: list[str],
    target: Path | None,
    seed: int,
    max_pairs: int,
    min_pairs_per_row: int,
) -> RankReport:
    o = outcomes
    n_rows, n_ranked = len(o.state), o.n_ranked
    notes = list(notes)
    if o.subsampled_groups:
        notes.append(
            f"{counted(o.subsampled_groups, 'group')} had more than max_pairs={max_pairs} "
            f"pairs and {agreeing(o.subsampled_groups, 'was', 'were')} compared on a seeded "
            f"subset (seed={seed}, each row in at least {counted(min_pairs_per_row, 'pair')} "
            "where the group allows)"
        )
    if o.failed_comparisons:
        notes.append(
            f"{o.failed_comparisons} of {counted(o.comparisons, 'comparison')} failed; the rows "
            f"in {agreeing(o.failed_comparisons, 'it', 'them')} are ranked on their other "
            "comparisons (quality_meta.failed counts them)"
        )
    bias = o.position_bias
    if bias is not None and bias >= HIGH_POSITION_BIAS:
        notes.append(
            f"the judge changed its verdict when A and B were swapped in {bias:.0%} of pairs; "
            "those pairs count as ties, so these qualities carry little signal (a stronger "
            "judge model would separate the rows)"
        )
    if o.bias_unreported:
        notes.append(
            f"{counted(o.bias_unreported, 'comparison')} did not say whether the order changed "
            f"the verdict; position_bias leaves {agreeing(o.bias_unreported, 'it', 'them')} out"
        )
    if n_ranked:
        notes.append("quality compares rows within a task only; across tasks it is not one scale")
    if not n_rows:
        notes.append("no rows to rank")
    return RankReport(
        n_rows=n_rows,
        n_groups=len(o.groups.members),
        n_ranked=n_ranked,
        n_skipped=n_rows - n_ranked,
        skipped=o.skipped(),
        ranker=str(getattr(ranker, "name", type(ranker).__name__)),
        model=getattr(ranker, "model", None),
        version=getattr(ranker, "version", None),
        method=METHOD,
        comparisons=o.comparisons,
        failed_comparisons=o.failed_comparisons,
        failures=o.failures(),
        flips=o.flips,
        position_bias=bias,
        subsampled_groups=o.subsampled_groups,
        max_pairs=max_pairs,
        min_pairs_per_row=min_pairs_per_row,
        seed=seed,
        path=str(target) if target is not None else None,
        rows=rows,
        notes=notes,
    )


def _sidecar_entry(report: RankReport, source: Path | None) -> dict[str, Any]:
    """The ``ranking`` record the sidecar keeps: who ranked the rows, how, and when."""
    entry = report.to_dict(without=("rows", "path"))
    entry["source"] = str(source) if source is not None else None
    entry["ranked_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return entry
