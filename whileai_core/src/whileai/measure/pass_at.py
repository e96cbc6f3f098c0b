"""pass@1, pass^k and pass@k off the same groups, each with an interval over tasks.

pass@1 is the headline (the agent runs once in production): the mean over tasks of each task's
pass rate. pass^k is the reliability line (all k attempts pass) and pass@k the reach (at least one
of k passes); both come from the unbiased per-group estimators over a group of n attempts with c
passes (Chen et al. 2021, arXiv:2107.03374, the HumanEval estimator):

    pass@k = 1 - C(n - c, k) / C(n, k)        pass^k = C(c, k) / C(n, k)

``headroom`` = pass@k - pass@1 is what a grouped RL update has to learn from. Only binary rows
(reward exactly 0 or 1) count; partial and unjudged rows are skipped and counted.

The intervals are :mod:`whileai.measure.intervals`' (pass@1: ``rate_interval``; pass^k and
pass@k: ``bounded_mean_interval``), over situations when phrasings of one situation are
several tasks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import attrs
import numpy as np
import numpy.typing as npt
from scipy import special

from whileai.measure._tasks import RowCounts, TaskTable, hack_suspected, task_table
from whileai.measure.intervals import (
    SMALL_SAMPLE,
    bounded_mean_interval,
    rate_interval,
    small_sample_note,
    unit_count,
)
from whileai.measure.stats import DEFAULT_RESAMPLES, Interval, Seed
from whileai.schema.report import Report, fmt, fmt_ci, table
from whileai.schema.source import rows_of
from whileai.schema.wording import agreeing, counted, name_some

#: Fewer attempts per group than this and the k-way numbers are too noisy to print.
MIN_REPEATS = 4
REPEAT_POLICIES = ("rl", "fixed")

FloatArray = npt.NDArray[np.float64]


def _log_comb(n: FloatArray, k: int) -> FloatArray:
    out: FloatArray = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    return out


def comb_ratio(top: npt.ArrayLike, n: npt.ArrayLike, k: int) -> FloatArray:
    """C(top, k) / C(n, k) elementwise (0 where top < k), in log space so large n cannot
    overflow."""
    top_a = np.asarray(top, dtype=np.float64)
    n_a = np.asarray(n, dtype=np.float64)
    if np.any(n_a < k):
        raise ValueError(f"every group needs at least k={k} attempts for C(n, k)")
    out = np.zeros(np.broadcast(top_a, n_a).shape, dtype=np.float64)
    ok = top_a >= k
    if np.any(ok):
        top_ok = np.broadcast_to(top_a, out.shape)[ok]
        n_ok = np.broadcast_to(n_a, out.shape)[ok]
        out[ok] = np.exp(_log_comb(top_ok, k) - _log_comb(n_ok, k))
    return out


def pass_at_k_estimate(n: npt.ArrayLike, c: npt.ArrayLike, k: int) -> FloatArray:
    """The unbiased pass@k of each group of ``n`` attempts with ``c`` passes."""
    n_a = np.asarray(n, dtype=np.float64)
    return 1.0 - comb_ratio(n_a - np.asarray(c, dtype=np.float64), n_a, k)


def pass_pow_k_estimate(n: npt.ArrayLike, c: npt.ArrayLike, k: int) -> FloatArray:
    """The unbiased pass^k (all k pass) of each group of ``n`` attempts with ``c`` passes."""
    return comb_ratio(c, n, k)


@attrs.define(kw_only=True, repr=False)
class PassAtReport(Report):
    """pass@1 with its interval, pass^k and pass@k with theirs, and what was left out."""

    title = "pass_at"

    pass_at_1: float | None
    ci95: Interval | None
    k: int | None
    pass_pow_k: float | None
    pass_pow_k_ci95: Interval | None
    pass_at_k: float | None
    pass_at_k_ci95: Interval | None
    headroom: float | None
    #: {task key: pass rate over that task's binary rows}; a dict, so per_task[0] is a KeyError
    per_task: dict[str, float]
    n_tasks: int
    n_k_groups: int
    #: tasks left out of the k-way numbers (too few attempts), by key
    left_out: list[str]
    #: tasks with no binary row at all, so in no number
    no_binary: list[str]
    counts: RowCounts
    #: with hacks="drop": rows left out because their grader flagged a suspected reward hack
    n_hack_suspected: int = 0
    notes: list[str] = attrs.field(factory=list)

    def _lines(self) -> list[str]:
        k = "k" if self.k is None else str(self.k)
        rows = [
            ["pass@1", fmt(self.pass_at_1), fmt_ci(self.ci95), str(self.n_tasks)],
            [f"pass^{k}", fmt(self.pass_pow_k), fmt_ci(self.pass_pow_k_ci95), str(self.n_k_groups)],
            [f"pass@{k}", fmt(self.pass_at_k), fmt_ci(self.pass_at_k_ci95), str(self.n_k_groups)],
            [f"headroom (pass@{k} - pass@1)", fmt(self.headroom), "point estimate", ""],
        ]
        c = self.counts
        return [
            *table(["", "value", "95% interval", "tasks"], rows),
            f"  rows: {c.rows} read, {c.binary} binary, {c.partial} partial and "
            f"{c.unjudged} unjudged skipped",
        ]


def _check_k(k: Any) -> int | None:
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer (attempts per task), got {k!r}")
    return int(k)


def _check_policy(repeat_policy: Any) -> str:
    if repeat_policy is None:
        return "rl"
    if repeat_policy not in REPEAT_POLICIES:
        raise ValueError(
            f"repeat_policy must be one of {', '.join(map(repr, REPEAT_POLICIES))} or None, "
            f"got {repeat_policy!r}"
        )
    return str(repeat_policy)


def _default_k(sizes: npt.NDArray[np.int64], policy: str) -> int | None:
    """The k a run's groups support: the one that leaves the fewest groups out, which is the
    smallest group of at least MIN_REPEATS (a group smaller than k is left out, so any larger
    k leaves out at least as many; ties go to the smaller k). Under "rl" groups grow where
    they split; under "fixed" they should share a size, and a report says when they do not."""
    big = sizes[sizes >= MIN_REPEATS]
    if big.size == 0:
        return None
    return int(big.min())


def pass_at(
    rows: Iterable[Any] | Any,
    k: int | None = None,
    repeat_policy: Literal["rl", "fixed"] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = 0,
    hacks: Literal["keep", "drop"] = "keep",
) -> PassAtReport:
    """pass@1 (headline) with ``ci95``; pass^k and pass@k with ``pass_pow_k_ci95`` and
    ``pass_at_k_ci95``; ``headroom``; ``per_task``.

    ``k`` defaults to the smallest group of attempts (``repeat_policy="rl"``, groups of unequal
    size) or to the size the groups share (``"fixed"``); groups smaller than k, or than 4
    attempts, are left out of the k-way numbers and named. Intervals are over tasks, or over
    situations when phrasings of one situation are several tasks
    (:mod:`whileai.measure.intervals`); one task (or situation) gives None with a note, and
    fewer than ten a note that the interval is wide for that reason. ``n_resamples`` and
    ``seed`` are kept for calls written when the intervals were bootstraps; they no longer
    change the result. Rows a grader flagged ``hack_suspected`` are failures (reward 0) and count
    as such; ``hacks="drop"`` leaves them out instead and says how many.
    """
    k = _check_k(k)
    policy = _check_policy(repeat_policy)
    if hacks not in ("keep", "drop"):
        raise ValueError(f"hacks must be one of 'keep', 'drop', got {hacks!r}")
    source = rows_of(rows)
    dropped = 0
    if hacks == "drop":
        flags = hack_suspected(source)
        dropped = sum(flags)
        source = [row for row, flagged in zip(source, flags, strict=True) if not flagged]
    table_ = task_table(source, with_markers=False)
    report = _pass_at_from_table(table_, k, policy, n_resamples, seed)
    if dropped:
        report.n_hack_suspected = dropped
        report.notes.append(
            f"{counted(dropped, 'row')} flagged hack_suspected left out (hacks='drop'); by "
            "default "
            + agreeing(
                dropped, "it counts as the failure it is", "they count as the failures they are"
            )
        )
    return report


def pass_at_from_table(
    table: TaskTable,
    k: int | None = None,
    repeat_policy: Literal["rl", "fixed"] | None = None,
) -> PassAtReport:
    """:func:`pass_at` (``hacks="keep"``) from the table of the rows, built once: a report
    that plots pass@k at many k reads the run once."""
    return _pass_at_from_table(
        table, _check_k(k), _check_policy(repeat_policy), DEFAULT_RESAMPLES, 0
    )


def _pick(keys: list[str], mask: npt.NDArray[np.bool_]) -> list[str]:
    """The keys where ``mask`` holds (most calls keep all or none: no per-key loop then)."""
    if mask.all():
        return keys
    if not mask.any():
        return []
    return [keys[i] for i in np.flatnonzero(mask).tolist()]


def _pass_at_from_table(
    t: TaskTable, k: int | None, policy: str, n_resamples: int, seed: Seed
) -> PassAtReport:
    notes: list[str] = []
    counts = t.counts
    if counts.partial or counts.unjudged:
        notes.append(
            f"{counts.partial} partial and {counts.unjudged} unjudged rows skipped: pass_at "
            "counts binary rewards (0 or 1) only"
        )
    has = t.n_binary > 0
    no_binary = _pick(t.keys, ~has)
    if no_binary:
        notes.append(
            f"{counted(len(no_binary), 'task')} {agreeing(len(no_binary), 'has', 'have')} no "
            f"binary row and {agreeing(len(no_binary), 'is', 'are')} in no number: "
            f"{name_some(no_binary)}"
        )
    n = t.n_binary[has]
    c = t.n_pass[has]
    keys = _pick(t.keys, has)
    rates = c / n if n.size else np.zeros(0)
    per_task = dict(zip(keys, rates.tolist(), strict=True))
    pass1 = float(rates.mean()) if rates.size else None
    ci = None
    clusters = t.clusters_of(has)
    units = unit_count(rates.size, clusters)
    if units >= 2:
        ci = rate_interval(n, c, clusters)
        if units < SMALL_SAMPLE:
            notes.append(small_sample_note("pass@1", units, clustered=clusters is not None))
    elif rates.size:
        notes.append(
            "one situation: an interval over tasks needs two or more, so the numbers are "
            "point estimates"
        )
    else:
        notes.append("no binary rows: pass@1 needs rewards of exactly 0 or 1")

    chosen = k if k is not None else _default_k(n, policy)
    if policy == "fixed" and n.size and np.unique(n).size > 1:
        sizes = ", ".join(str(s) for s in np.unique(n).tolist())
        notes.append(f"repeat_policy='fixed' but groups differ in size ({sizes})")
        if k is None and chosen is not None:
            out = int(np.count_nonzero(n < chosen))
            notes.append(
                f"k={chosen}: the group size that leaves the fewest groups out ({out} of {n.size})"
            )
    floor = max(chosen or 0, MIN_REPEATS)
    eligible = n >= floor
    left_out = _pick(keys, ~eligible)
    report = PassAtReport(
        pass_at_1=pass1,
        ci95=ci,
        k=chosen,
        pass_pow_k=None,
        pass_pow_k_ci95=None,
        pass_at_k=None,
        pass_at_k_ci95=None,
        headroom=None,
        per_task=per_task,
        n_tasks=len(keys),
        n_k_groups=int(eligible.sum()),
        left_out=left_out,
        no_binary=no_binary,
        counts=counts,
        notes=notes,
    )
    if chosen is None or not eligible.any():
        largest = int(n.max()) if n.size else 0
        notes.append(
            f"pass^k and pass@k need groups of at least {floor} attempts"
            + (f" (k={chosen}; never fewer than {MIN_REPEATS})" if floor > MIN_REPEATS else "")
            + f"; the largest group has {largest}, so the k-way numbers are None rather "
            "than a noisy figure"
        )
        report.n_k_groups = 0
        return report
    if left_out:
        why = f"fewer than {floor} attempts" + (f" (k={chosen})" if chosen >= MIN_REPEATS else "")
        notes.append(
            f"k={chosen}: {len(left_out)} of {counted(len(keys), 'group')} left out of pass^k / "
            f"pass@k, {why}: {name_some(left_out)}"
        )
    n_k, c_k = n[eligible], c[eligible]
    pow_k = pass_pow_k_estimate(n_k, c_k, chosen)
    at_k = pass_at_k_estimate(n_k, c_k, chosen)
    report.pass_pow_k = float(pow_k.mean())
    report.pass_at_k = float(at_k.mean())
    # Headroom compares the two numbers over the same groups.
    report.headroom = report.pass_at_k - float(rates[eligible].mean())
    if left_out:
        notes.append("headroom compares pass@k with pass@1 over the k-eligible groups")
    k_clusters = None if clusters is None else clusters[eligible]
    k_units = unit_count(n_k.size, k_clusters)
    if k_units >= 2:
        # disjoint groups of k attempts: the most independent samples the groups could hold
        cap = float(n_k.sum()) / chosen
        report.pass_pow_k_ci95 = bounded_mean_interval(pow_k, cap, k_clusters)
        report.pass_at_k_ci95 = bounded_mean_interval(at_k, cap, k_clusters)
        if k_units < SMALL_SAMPLE and k_units != units:
            notes.append(
                small_sample_note(
                    f"pass^{chosen} and pass@{chosen}", k_units, clustered=clusters is not None
                )
            )
    else:
        notes.append(
            "one k-eligible situation: pass^k and pass@k carry no interval (an interval over "
            "tasks needs two or more)"
        )
    return report


@attrs.define(kw_only=True, repr=False)
class GroupSignalReport(Report):
    """How many groups carry a learning signal: mixed groups split, unanimous ones do not."""

    title = "group_signal"

    all_pass: int
    all_fail: int
    mixed: int
    n_groups: int
    #: groups of one binary row: unanimous by construction
    singletons: int
    mixed_share: float | None
    counts: RowCounts
    notes: list[str] = attrs.field(factory=list)

    def _lines(self) -> list[str]:
        share = "-" if self.mixed_share is None else f"{self.mixed_share:.1%}"
        return [
            *table(
                ["groups", "count"],
                [
                    ["all pass", self.all_pass],
                    ["all fail", self.all_fail],
                    ["mixed (carry signal)", self.mixed],
                    ["total", self.n_groups],
                ],
            ),
            f"  mixed share: {share}",
        ]


def group_signal(rows: Iterable[Any] | Any) -> GroupSignalReport:
    """Counts of all-pass, all-fail and mixed groups over binary rows, grouped by task."""
    t = task_table(rows_of(rows), with_markers=False)
    n, c = t.n_binary, t.n_pass
    has = n > 0
    all_pass = int((has & (c == n)).sum())
    all_fail = int((has & (c == 0)).sum())
    groups = int(has.sum())
    mixed = groups - all_pass - all_fail
    singletons = int((n == 1).sum())
    notes: list[str] = []
    counts = t.counts
    if counts.partial or counts.unjudged:
        notes.append(f"{counts.partial} partial and {counts.unjudged} unjudged rows skipped")
    if singletons:
        notes.append(
            f"{counted(singletons, 'group')} {agreeing(singletons, 'has', 'have')} one binary row: "
            "unanimous by construction"
        )
    if (~has).any():
        without = int((~has).sum())
        notes.append(f"{counted(without, 'task')} {agreeing(without, 'has', 'have')} no binary row")
    return GroupSignalReport(
        all_pass=all_pass,
        all_fail=all_fail,
        mixed=mixed,
        n_groups=groups,
        singletons=singletons,
        mixed_share=mixed / groups if groups else None,
        counts=counts,
        notes=notes,
    )
