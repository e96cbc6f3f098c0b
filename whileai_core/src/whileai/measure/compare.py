"""Is the change real: two arms paired task by task, an interval on the difference.

Each task's score in an arm is the mean over its judged rows; the delta is the mean over tasks
present in both arms of (b - a), and its interval Student's t over those per-task differences
(pairing cancels how hard each task is, Miller 2024, arXiv:2411.00640), over situations when
phrasings of one situation are several tasks; where every task moved alike the arms' own
intervals bound it (:func:`whileai.measure.intervals.difference_interval`). Reward and
every ``markers`` name both arms carry get a line; ``proxy="marker:name"`` makes one the
headline. Given the noise floor (``run_std`` from ``eval_variance``), a headline delta inside the
band two re-runs of one model show on their own reads as noise, not as a gain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import numpy as np

from whileai.measure._tasks import Provenance, RowCounts, TaskTable, task_table
from whileai.measure.intervals import (
    SMALL_SAMPLE,
    clipped,
    difference_interval,
    small_sample_note,
    unit_count,
)
from whileai.measure.stats import DEFAULT_RESAMPLES, Interval, Seed, normal_quantile, t_band
from whileai.measure.variance import ZERO_FLOOR
from whileai.schema.marker_bounds import Bounds, recorded_bounds
from whileai.schema.report import Report, fmt, fmt_ci, table
from whileai.schema.source import RowSource, row_source
from whileai.schema.wording import agreeing, counted, name_some

#: What each verdict of a comparison means, in words.
VERDICT_READINGS: dict[str, str] = {
    "noise": "inside the noise band: what re-running the eval does on its own",
    "gain": "b is higher; the interval excludes 0",
    "loss": "b is lower; the interval excludes 0",
    "unclear": "the interval includes 0: no difference shown",
    "no interval": "no interval (one paired situation, or no spread to measure): a point estimate",
}
#: Fewer runs than this behind a run_std and the std is not worth reading.
MIN_RUNS_FOR_STD = 3


@attrs.define(kw_only=True, repr=False)
class Delta(Report):
    """One metric compared across the arms, over the tasks both arms measured."""

    title = "delta"

    metric: str
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    ci95: Interval | None
    n_paired: int
    #: what the interval rests on: the paired situations, or tasks when each is its own
    n_units: int = 0
    clustered: bool = False

    def _lines(self) -> list[str]:
        return [
            f"  {self.metric}: {fmt(self.mean_a)} -> {fmt(self.mean_b)}, delta "
            f"{_signed(self.delta)} {fmt_ci(self.ci95)} over {counted(self.n_paired, 'task')}"
        ]


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


@attrs.define(kw_only=True, repr=False)
class CompareReport(Report):
    """The headline delta and its reading, every shared metric's delta, and what was skipped."""

    title = "compare (b - a, paired by task)"

    headline: str
    delta: float | None
    ci95: Interval | None
    #: "noise", "gain", "loss", "unclear" (interval straddles 0) or "no interval"
    verdict: str
    metrics: dict[str, Delta]
    n_paired: int
    only_a: int
    only_b: int
    run_std: float | None
    run_std_runs: int | None
    noise_band: float | None
    counts_a: RowCounts
    counts_b: RowCounts
    warnings: list[str] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)

    def _lines(self) -> list[str]:
        rows = []
        for name, d in self.metrics.items():
            mark = "*" if name == self.headline else ""
            rows.append(
                [
                    f"{name}{mark}",
                    fmt(d.mean_a),
                    fmt(d.mean_b),
                    _signed(d.delta),
                    fmt_ci(d.ci95),
                    str(d.n_paired),
                ]
            )
        lines = table(["metric", "a", "b", "delta", "95% interval", "tasks"], rows)
        reading = VERDICT_READINGS[self.verdict]
        head = self.metrics.get(self.headline)
        if self.verdict in ("gain", "loss") and head is not None and head.n_units < SMALL_SAMPLE:
            reading += f", from {head.n_units} {'situations' if head.clustered else 'tasks'} only"
        lines.append(f"  headline ({self.headline}*): {_signed(self.delta)}, {reading}")
        if self.noise_band is not None:
            source = (
                "" if self.run_std_runs is None else f" from {counted(self.run_std_runs, 'run')}"
            )
            lines.append(
                f"  noise band: +/-{self.noise_band:.3f} (run_std {self.run_std:.3f}{source})"
            )
        lines.append(
            f"  tasks: {self.n_paired} paired, {self.only_a} only in a and {self.only_b} only "
            "in b skipped"
        )
        lines.extend(f"warning: {w}" for w in self.warnings)
        return lines


@attrs.define(kw_only=True, repr=False)
class CompareRunsReport(CompareReport):
    """:class:`CompareReport` of two runs, with warnings where they were not produced alike."""

    title = "compare_runs (b - a, paired by task)"


@attrs.define(kw_only=True, repr=False)
class DeltaReport(CompareReport):
    """The same as :class:`CompareRunsReport`, under the name a run's report uses."""

    title = "delta_report (b - a, paired by task)"


def _pair(
    keys_a: list[str], values_a: np.ndarray, keys_b: list[str], values_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    where_b = {k: i for i, k in enumerate(keys_b)}
    ia: list[int] = []
    ib: list[int] = []
    for i, key in enumerate(keys_a):
        j = where_b.get(key)
        if j is not None:
            ia.append(i)
            ib.append(j)
    paired = [keys_a[i] for i in ia]
    return (
        values_a[np.asarray(ia, dtype=np.int64)],
        values_b[np.asarray(ib, dtype=np.int64)],
        paired,
    )


def _situations(t: TaskTable, keys: list[str]) -> np.ndarray | None:
    """Arm a's situation label of each paired task, or None when each task is its own."""
    if t.clusters is None:
        return None
    index = {k: i for i, k in enumerate(t.keys)}
    return t.clusters[np.asarray([index[k] for k in keys], dtype=np.int64)]


def _delta(
    metric: str,
    a: tuple[list[str], np.ndarray],
    b: tuple[list[str], np.ndarray],
    table_a: TaskTable,
    bounded: bool,
) -> Delta:
    va, vb, keys = _pair(a[0], a[1], b[0], b[1])
    if va.size == 0:
        return Delta(metric=metric, mean_a=None, mean_b=None, delta=None, ci95=None, n_paired=0)
    diff = vb - va
    clusters = _situations(table_a, keys)
    units = unit_count(diff.size, clusters)
    ci = difference_interval(va, vb, clusters, bounded=bounded) if units >= 2 else None
    return Delta(
        metric=metric,
        mean_a=float(va.mean()),
        mean_b=float(vb.mean()),
        delta=float(diff.mean()),
        ci95=ci,
        n_paired=int(diff.size),
        n_units=units,
        clustered=clusters is not None,
    )


def _check_run_std(run_std: Any, run_std_runs: Any) -> tuple[float | None, int | None]:
    if run_std is None:
        if run_std_runs is not None:
            raise ValueError("run_std_runs was given without run_std; pass both (eval_variance)")
        return None, None
    if isinstance(run_std, bool) or not isinstance(run_std, int | float | np.floating):
        raise ValueError(
            f"run_std must be a number (eval_variance(...)['run_std']), got {run_std!r}"
        )
    if not np.isfinite(run_std) or run_std < 0:
        raise ValueError(f"run_std must be a finite number >= 0, got {run_std!r}")
    if run_std_runs is not None and (
        isinstance(run_std_runs, bool)
        or not isinstance(run_std_runs, int | np.integer)
        or run_std_runs < 2
    ):
        raise ValueError(
            f"run_std_runs must be the number of runs behind run_std (at least 2), got "
            f"{run_std_runs!r}"
        )
    return float(run_std), None if run_std_runs is None else int(run_std_runs)


def _headline_name(proxy: str | None, shared: list[str], a: TaskTable, b: TaskTable) -> str:
    if proxy is None or proxy == "reward":
        return "reward"
    if not isinstance(proxy, str) or not proxy.startswith("marker:") or proxy == "marker:":
        raise ValueError(f"proxy must be None, 'reward' or 'marker:<name>', got {proxy!r}")
    name = proxy[len("marker:") :]
    if name not in shared:
        sides = [side for side, t in (("a", a), ("b", b)) if name not in t.markers]
        raise ValueError(
            f"proxy {proxy!r}: marker {name!r} is missing from arm {' and '.join(sides)}; "
            f"markers both arms carry: {', '.join(map(repr, shared)) or 'none'}"
        )
    return name


def compare(
    a: Iterable[Any] | Any,
    b: Iterable[Any] | Any,
    proxy: str | None = None,
    run_std: float | None = None,
    run_std_runs: int | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = 0,
) -> CompareReport:
    """b against a, paired by task: a delta and its interval for reward and every marker both
    arms carry (a marker's inside the range its declared bounds allow a difference).
    ``proxy="marker:name"`` makes that marker the headline; with ``run_std`` (and
    ``run_std_runs``) a headline delta inside the noise band reads as noise."""
    std, runs = _check_run_std(run_std, run_std_runs)
    source_a, source_b = row_source(a, "a"), row_source(b, "b")
    bounds = _shared_bounds(source_a, source_b)
    return _compare_rows(source_a.rows, source_b.rows, proxy, std, runs, n_resamples, seed, bounds)


def _shared_bounds(a: RowSource, b: RowSource) -> dict[str, Bounds]:
    """The marker bounds both arms' runs recorded alike: a bound only one run declared says
    nothing of the other arm's values."""
    bounds_a, bounds_b = recorded_bounds(a.metadata), recorded_bounds(b.metadata)
    return {name: found for name, found in bounds_a.items() if bounds_b.get(name) == found}


def _compare_rows(
    rows_a: Any,
    rows_b: Any,
    proxy: str | None,
    run_std: float | None,
    run_std_runs: int | None,
    n_resamples: int,
    seed: Seed,
    bounds: Mapping[str, Bounds],
) -> CompareReport:
    ta = task_table(rows_a, what="arm a")
    tb = task_table(rows_b, what="arm b")
    shared = [m for m in ta.markers if m in tb.markers]
    headline = _headline_name(proxy, shared, ta, tb)
    metrics = {"reward": _delta("reward", ta.reward_means(), tb.reward_means(), ta, True)}
    for name in shared:
        declared = bounds.get(name)
        bounded = ta.marker_bounded(name, declared) and tb.marker_bounded(name, declared)
        delta = _delta(name, ta.marker_means(name), tb.marker_means(name), ta, bounded)
        if declared is not None and delta.ci95 is not None:
            # a difference of two values within [low, high] lies within [low - high, high - low]
            low, high = declared
            apart = None if low is None or high is None else high - low
            delta = attrs.evolve(
                delta, ci95=clipped(delta.ci95, (None if apart is None else -apart, apart))
            )
        metrics[name] = delta
    head = metrics[headline]
    keys_a, keys_b = set(ta.keys), set(tb.keys)
    notes: list[str] = []
    only_a, only_b = len(keys_a - keys_b), len(keys_b - keys_a)
    if only_a or only_b:
        notes.append(
            f"tasks on one side only are skipped: {only_a} only in a "
            f"({name_some(sorted(keys_a - keys_b), 3)}), {only_b} only in b"
            + (f" ({name_some(sorted(keys_b - keys_a), 3)})" if only_b else "")
        )
    for side, t in (("a", ta), ("b", tb)):
        c = t.counts
        if c.unjudged:
            notes.append(f"arm {side}: {c.unjudged} unjudged rows skipped")
    unshared = sorted(set(ta.markers) ^ set(tb.markers))
    if unshared:
        notes.append(f"markers only one arm carries are not compared: {name_some(unshared)}")
    unpaired = len(keys_a & keys_b) - head.n_paired
    if unpaired > 0:
        notes.append(
            f"{counted(unpaired, 'task')} in both arms {agreeing(unpaired, 'has', 'have')} no "
            f"{headline} on one side (unjudged, or the marker not measured) and "
            f"{agreeing(unpaired, 'is', 'are')} skipped"
        )
    if head.n_paired and head.n_units < 2:
        notes.append(
            "one paired situation: an interval over tasks needs two or more, so the delta is "
            "a point estimate"
        )
    elif head.n_paired and head.n_units < SMALL_SAMPLE:
        notes.append(
            small_sample_note(f"the {headline} delta", head.n_units, clustered=head.clustered)
            + "; a gain or loss called at this size is one to re-run at a larger one"
        )
    if head.n_paired == 0:
        notes.append(f"no task has {headline} in both arms: nothing to compare")
    flat = [m for m, d in metrics.items() if d.ci95 is None and d.n_units >= 2]
    if flat:
        notes.append(
            f"no interval for {', '.join(flat)}: every task gave the same value in both arms, "
            "so there is no spread to size one by"
        )

    band = None
    if run_std is not None:
        if run_std == 0:
            notes.append(ZERO_FLOOR)
        if run_std_runs is None:
            band = normal_quantile(0.975) * np.sqrt(2.0) * run_std
            notes.append(
                "run_std_runs not given: the noise band uses the normal quantile, which is too "
                "narrow for a std from few runs; pass run_std_runs=eval_variance(...)['n_runs']"
            )
        else:
            band = t_band(run_std, df=run_std_runs - 1)
            if run_std_runs < MIN_RUNS_FOR_STD:
                notes.append(
                    f"run_std comes from {counted(run_std_runs, 'run')}: fewer than "
                    f"{MIN_RUNS_FOR_STD}, "
                    "the fewest that give a standard deviation worth reading; the band is rough"
                )
    verdict = _verdict(head, band)
    return CompareReport(
        headline=headline,
        delta=head.delta,
        ci95=head.ci95,
        verdict=verdict,
        metrics=metrics,
        n_paired=head.n_paired,
        only_a=only_a,
        only_b=only_b,
        run_std=run_std,
        run_std_runs=run_std_runs,
        noise_band=None if band is None else float(band),
        counts_a=ta.counts,
        counts_b=tb.counts,
        notes=notes,
    )


def _verdict(head: Delta, band: float | None) -> str:
    if head.delta is None:
        return "no interval"
    if band is not None and abs(head.delta) <= band:
        return "noise"
    if head.ci95 is None:
        return "no interval"
    low, high = head.ci95
    if low > 0:
        return "gain"
    if high < 0:
        return "loss"
    return "unclear"


def _provenance_warnings(seen_a: dict[str, set[str]], seen_b: dict[str, set[str]]) -> list[str]:
    warnings = []
    for what, values_a in seen_a.items():
        values_b = seen_b[what]
        if values_a != values_b and (values_a or values_b):
            warnings.append(
                f"the arms differ in {what}: a has {_listed(values_a)}, b has "
                f"{_listed(values_b)}; a delta may come from that, not from the change"
            )
    return warnings


def _listed(values: set[str]) -> str:
    return name_some(sorted(values), 3) if values else "none recorded"


def compare_runs(
    run_a: Any,
    run_b: Any,
    proxy: str | None = None,
    run_std: float | None = None,
    run_std_runs: int | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = 0,
) -> CompareReport:
    """:func:`compare` on two runs' rows (a list of rows, a run with ``.rows``, a rows file, or
    a :class:`~whileai.schema.source.RowSource` already read), warning when the arms were not
    produced alike: a different deploy prompt (``lineage.system_prompt_sha``), judge, writer or
    user model; and when they hold the same rollouts (a run regraded), whose delta is the
    grading's."""
    std, runs = _check_run_std(run_std, run_std_runs)
    source_a, source_b = row_source(run_a, "run_a"), row_source(run_b, "run_b")
    # what produced each arm is read in the walk its task table makes: one walk an arm
    seen_a, seen_b = Provenance(), Provenance()
    report = _compare_rows(
        seen_a.passing(source_a.rows),
        seen_b.passing(source_b.rows),
        proxy,
        std,
        runs,
        n_resamples,
        seed,
        _shared_bounds(source_a, source_b),
    )
    fields = {f.name: getattr(report, f.name) for f in attrs.fields(CompareReport)}
    fields["warnings"] = _provenance_warnings(seen_a.seen, seen_b.seen)
    if report.n_paired == 0 and bool(seen_a.branched) != bool(seen_b.branched):
        which = "b" if seen_b.branched else "a"
        fields["warnings"].append(
            f"{which}'s rows are branches (lineage.branched_from) and the other arm's are not: a "
            "branch's task is the recorded rollout and step it branched at, so the arms share "
            "no task; compare two branches of the same rows at the same step, one under the "
            "policy that recorded them (wai.branch(source, at, agent_model=...); "
            "docs/branching.md)"
        )
    same = seen_a.same_rollouts(seen_b)
    if same:
        fields["warnings"].append(
            f"a and b hold the same {counted(same, 'rollout')} (every run and "
            "lineage.rollout_key of one is in the other): the delta measures how they were "
            "graded, not what the agent did"
        )
    return CompareRunsReport(**fields)


def delta_report(
    run_a: Any,
    run_b: Any,
    proxy: str | None = None,
    run_std: float | None = None,
    run_std_runs: int | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: Seed = 0,
) -> CompareReport:
    """The delta between two runs, every marker included: :func:`compare_runs` under the name
    a run's report uses."""
    report = compare_runs(run_a, run_b, proxy, run_std, run_std_runs, n_resamples, seed)
    return DeltaReport(**{f.name: getattr(report, f.name) for f in attrs.fields(CompareReport)})


__all__ = [
    "CompareReport",
    "CompareRunsReport",
    "Delta",
    "DeltaReport",
    "compare",
    "compare_runs",
    "delta_report",
]
