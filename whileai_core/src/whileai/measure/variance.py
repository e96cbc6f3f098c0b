"""The noise floor and the size of the set.

``eval_variance(run_1, run_2, run_3)``: evaluate the same model several times and see how far the
number moves on its own (``run_std``, the standard deviation of the per-run means), for reward
and every marker. ``noise_band(run_std, df=)``: the band that std implies for a delta between two
single runs. ``holdout_size(effect, ...)``: how many paired tasks can show an effect that size.

How ``holdout_size`` counts (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, the
paired-difference and resampling sections). Each task is scored by the mean of ``k`` samples in
each arm, and the arms are compared by the mean over tasks of the per-task difference ``d``.
With a uniform effect, how hard each task is cancels in ``d``; what remains is the sampling
noise of a k-sample pass rate in each arm, ``p_i (1 - p_i) / k`` for a task with true rate
``p_i``. So

    var(d) = (E[p(1 - p)] + E[(p + effect)(1 - p - effect)]) / k
           = (2 E[p(1 - p)] + effect (1 - 2 base) - effect^2) / k

and ``compare`` calls a gain when its interval, Student's t over the paired tasks, excludes
0: a two-sided paired t-test at ``alpha`` (on ``n - 1`` degrees of freedom where the
differences are not heavy-tailed, as under the uniform effect assumed here; compare takes
fewer where a few tasks carry the difference, and such a set needs more tasks than this).
So ``n_tasks`` is the smallest ``n`` at which that test has the power,
``P(|T| > t_{1 - alpha/2, n - 1}) >= power`` with ``T`` noncentral t on ``n - 1`` degrees of
freedom and noncentrality ``effect / sqrt(var(d) / n)`` (the textbook paired t-test size).
The normal approximation

    n_normal = ceil((z_{1 - alpha/2} + z_{power})^2 var(d) / effect^2)

is where the search starts; it falls short at a few dozen tasks (sized by it, compare found
an effect of 0.3 over 10 tasks at k=4 in 69% of runs, not 80%).

With ``base=`` alone every task is assumed to sit at ``base``, so ``E[p(1 - p)] = base (1 - base)``,
the largest it can be for that mean (conservative). With ``before=rows`` the base rate is the
mean of the per-task pass rates and ``E[p(1 - p)]`` is estimated without bias from each task's
``c (n - c) / (n (n - 1))``, so a set whose tasks are mostly all-pass or all-fail needs fewer.
``task_std`` is ``sqrt(E[p(1 - p)] / k)``: how far one task's k-sample pass rate moves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np

from whileai.measure._tasks import task_table
from whileai.measure.stats import (
    DEFAULT_CONFIDENCE,
    normal_quantile,
    t_band,
)
from whileai.schema.report import Report, fmt, table
from whileai.schema.source import rows_of
from whileai.schema.wording import counted

#: Fewer runs than this and a standard deviation across them is not worth reading.
MIN_RUNS = 3


@attrs.define(kw_only=True, repr=False)
class RunSpread(Report):
    """How one metric moved across the runs."""

    title = "run spread"

    metric: str
    run_means: list[float]
    n_runs: int
    run_std: float | None
    band: float | None
    n_tasks: int
    #: run_std as the tasks' own spread implies it: sqrt(sum of each task's across-run
    #: variance) / n_tasks, tasks taken as independent. Many more degrees of freedom than the
    #: std of a few run means, so it stays readable when those agree by chance.
    task_run_std: float | None = None
    #: tasks whose value differed between runs
    n_tasks_moved: int = 0

    def _lines(self) -> list[str]:
        return [f"  {self.metric}: {_std_text(self.run_std, self.n_runs)}"]


def _std_text(run_std: float | None, n_runs: int) -> str:
    if run_std is None:
        worth = ": not worth reading, run it again" if 1 < n_runs < MIN_RUNS else ""
        return f"no std from {counted(n_runs, 'run')}{worth}"
    if n_runs < MIN_RUNS:
        return f"{run_std:.4f} (only {n_runs} runs: not worth reading)"
    return f"{run_std:.4f}"


@attrs.define(kw_only=True, repr=False)
class EvalVarianceReport(Report):
    """``run_std`` of reward across the runs, ``n_runs``, the band it implies; every marker's
    in ``metrics``."""

    title = "eval_variance (the same eval, re-run)"

    run_std: float | None
    n_runs: int
    band: float | None
    run_means: list[float]
    n_tasks: int
    metrics: dict[str, RunSpread]
    floor_met: bool
    #: reward's run_std from the tasks' own across-run spread (see RunSpread.task_run_std)
    task_run_std: float | None = None
    notes: list[str] = attrs.field(factory=list)

    def _lines(self) -> list[str]:
        rows = []
        for name, s in self.metrics.items():
            rows.append(
                [
                    name,
                    " ".join(fmt(m) for m in s.run_means),
                    _std_text(s.run_std, s.n_runs),
                    "-" if s.band is None else f"+/-{s.band:.3f}",
                    str(s.n_tasks),
                ]
            )
        return [
            *table(["metric", "run means", "run_std", "noise band (95%)", "tasks"], rows),
            "  noise band: how far two single runs of this eval differ on their own",
        ]


def eval_variance(*runs: Any, confidence: float = DEFAULT_CONFIDENCE) -> EvalVarianceReport:
    """Run-to-run spread of the same eval: for reward and every marker, the std of the per-run
    means (each run's mean over the tasks every run measured), ``n_runs`` and the noise band.

    Each run is a list of rows or a run carrying ``.rows``."""
    if (
        len(runs) == 1
        and isinstance(runs[0], list | tuple)
        and runs[0]
        and _looks_like_runs(runs[0])
    ):
        runs = tuple(runs[0])
    if not runs:
        raise ValueError("eval_variance needs the runs: eval_variance(run_1, run_2, run_3)")
    tables = [task_table(rows_of(r, f"run {i}"), what=f"run {i}") for i, r in enumerate(runs, 1)]
    notes: list[str] = []
    metrics: dict[str, RunSpread] = {}
    names = ["reward", *sorted({m for t in tables for m in t.markers})]
    for name in names:
        per_run = []
        for t in tables:
            if name == "reward":
                per_run.append(t.reward_means())
            elif name in t.markers:
                per_run.append(t.marker_means(name))
        if len(per_run) < len(tables):
            notes.append(f"{name}: measured in {len(per_run)} of {counted(len(tables), 'run')}")
        metrics[name] = _spread(name, per_run, confidence, notes)
    reward = metrics["reward"]
    n_runs = reward.n_runs
    if n_runs < MIN_RUNS:
        notes.append(
            f"{counted(n_runs, 'run')}: three re-runs are the fewest that give a standard "
            "deviation "
            "worth reading; run the eval again before trusting the floor"
        )
    if reward.n_runs >= 2 and reward.n_tasks_moved == 0 and _means_agree(reward.run_means):
        notes.append(
            "reward did not move at all between runs, on any task: the runs scored the same "
            "completions the same way; re-sample the completions to measure the eval's noise"
        )
    elif _means_agree(reward.run_means) and reward.task_run_std is not None:
        band = t_band(reward.task_run_std, n_runs - 1, confidence)
        notes.append(
            f"the run means agree, but {counted(reward.n_tasks_moved, 'task')} scored differently "
            "between "
            "runs: the means met by chance, and run_std 0 understates the noise. The tasks' own "
            f"spread gives run_std {reward.task_run_std:.4f} (band +/-{band:.3f}); hand that "
            "to compare(run_std=) instead"
        )
    return EvalVarianceReport(
        run_std=reward.run_std,
        n_runs=n_runs,
        band=reward.band,
        run_means=reward.run_means,
        n_tasks=reward.n_tasks,
        metrics=metrics,
        floor_met=n_runs >= MIN_RUNS,
        task_run_std=reward.task_run_std,
        notes=notes,
    )


#: What a noise floor of 0 means, wherever one is printed or used.
ZERO_FLOOR = (
    "run_std is 0, so the band is +/-0: the runs scored identical completions (the same seeds, "
    "a cache, or a deterministic agent), which measures no noise at all; re-sample the "
    "completions (fresh seeds, runs=N) and take eval_variance's task_run_std, or the floor "
    "hides every real difference"
)


def _means_agree(means: list[float]) -> bool:
    return len(means) >= 2 and max(means) - min(means) == 0.0


def _looks_like_runs(items: Any) -> bool:
    first = items[0]
    return (isinstance(first, list | tuple)) or (
        hasattr(first, "rows") and not isinstance(first, dict)
    )


def _spread(
    name: str, per_run: list[tuple[list[str], np.ndarray]], confidence: float, notes: list[str]
) -> RunSpread:
    # Compare the runs on the tasks they all measured, so a different task mix is not noise.
    common = set(per_run[0][0]) if per_run else set()
    for keys, _ in per_run[1:]:
        common &= set(keys)
    dropped = sum(len(keys) - len(common) for keys, _ in per_run)
    if per_run and dropped:
        notes.append(
            f"{name}: {counted(len(common), 'task')} measured in every run; tasks missing from "
            f"some run are left out ({counted(dropped, 'task-run')})"
        )
    means: list[float] = []
    order = sorted(common)
    columns: list[np.ndarray] = []
    for keys, values in per_run:
        mask = np.fromiter((k in common for k in keys), dtype=bool, count=len(keys))
        if mask.any():
            means.append(float(values[mask].mean()))
            by_key = dict(zip(keys, values.tolist(), strict=True))
            columns.append(np.array([by_key[k] for k in order], dtype=float))
    n_runs = len(means)
    # below MIN_RUNS a standard deviation of run means is not worth reading: None in code,
    # not only in the printout, so nothing downstream uses it as a noise floor
    run_std = float(np.std(means, ddof=1)) if n_runs >= MIN_RUNS else None
    band = None if run_std is None else t_band(run_std, n_runs - 1, confidence)
    task_run_std = None
    moved = 0
    if n_runs >= 2 and order:
        # tasks x runs; each task's across-run variance is its share of a run mean's variance
        grid = np.column_stack(columns)
        task_var = grid.var(axis=1, ddof=1)
        moved = int(np.count_nonzero(task_var > 0))
        task_run_std = float(math.sqrt(task_var.sum()) / len(order))
    return RunSpread(
        metric=name,
        run_means=means,
        n_runs=n_runs,
        run_std=run_std,
        band=band,
        n_tasks=len(common),
        task_run_std=task_run_std,
        n_tasks_moved=moved,
    )


@attrs.define(kw_only=True, repr=False)
class NoiseBandReport(Report):
    """The band a run_std implies: a delta between two single runs inside it is noise."""

    title = "noise_band"

    run_std: float
    df: int | None
    confidence: float
    band: float
    low: float
    high: float
    notes: list[str] = attrs.field(factory=list)

    def _lines(self) -> list[str]:
        basis = "normal quantile" if self.df is None else f"t quantile, df={self.df}"
        return [
            f"  +/-{self.band:.4f} at {self.confidence:.0%} ({basis}; run_std {self.run_std:.4f})",
            f"  a delta between two runs inside [{self.low:+.4f}, {self.high:+.4f}] is what "
            "re-running the eval does on its own",
        ]


def noise_band(
    run_std: float, df: int | None = None, confidence: float = DEFAULT_CONFIDENCE
) -> NoiseBandReport:
    """The noise band from ``run_std`` alone: ``t(df) * sqrt(2) * run_std`` either side of 0,
    ``df`` = runs - 1 (the normal quantile when ``df`` is not given)."""
    if run_std is None:
        raise ValueError(
            "run_std is None: a standard deviation needs at least two runs (eval_variance with "
            "three or more)"
        )
    if isinstance(df, bool) or (
        df is not None and (not isinstance(df, int | np.integer) or df < 1)
    ):
        raise ValueError(f"df must be a positive integer (runs - 1), got {df!r}")
    if (
        isinstance(run_std, bool)
        or not isinstance(run_std, int | float | np.floating)
        or not math.isfinite(run_std)
        or run_std < 0
    ):
        raise ValueError(f"run_std must be a finite number >= 0, got {run_std!r}")
    notes: list[str] = []
    if run_std == 0:
        notes.append(ZERO_FLOOR)
    if df is None:
        band = normal_quantile(1 - (1 - confidence) / 2) * math.sqrt(2) * float(run_std)
        notes.append("df not given: the normal quantile understates a std from few runs")
    else:
        band = t_band(run_std, int(df), confidence)
        if df + 1 < MIN_RUNS:
            notes.append(
                f"df={df} means {df + 1} runs: fewer than {MIN_RUNS}, the band is too wide to "
                "read as a floor"
            )
    return NoiseBandReport(
        run_std=float(run_std),
        df=None if df is None else int(df),
        confidence=confidence,
        band=band,
        low=-band,
        high=band,
        notes=notes,
    )


@attrs.define(kw_only=True, repr=False)
class HoldoutSizeReport(Report):
    """Paired tasks needed to detect ``effect``, and what that number assumes."""

    title = "holdout_size"

    n_tasks: int
    effect: float
    base: float
    k: int
    alpha: float
    power: float
    task_std: float
    diff_std: float
    source: str
    assumptions: list[str]
    notes: list[str] = attrs.field(factory=list)

    def _lines(self) -> list[str]:
        rows = [
            ["paired tasks needed", str(self.n_tasks)],
            ["effect", f"{self.effect:+.3f}"],
            [f"base rate ({self.source})", fmt(self.base)],
            ["samples per task (k)", str(self.k)],
            ["task_std (one task's k-sample pass rate)", fmt(self.task_std, 4)],
            ["std of a paired difference", fmt(self.diff_std, 4)],
            ["alpha (two-sided) / power", f"{self.alpha:g} / {self.power:g}"],
        ]
        return [*table(["", ""], rows)[1:], *(f"  assumes: {a}" for a in self.assumptions)]


def _unit(value: Any, name: str, *, open_low: bool = True, open_high: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        raise ValueError(f"{name} must be a number, got {value!r}")
    low_ok = value > 0 if open_low else value >= 0
    high_ok = value < 1 if open_high else value <= 1
    if not (math.isfinite(value) and low_ok and high_ok):
        bounds = f"{'(' if open_low else '['}0, 1{')' if open_high else ']'}"
        raise ValueError(f"{name} must lie in {bounds}, got {value!r}")
    return float(value)


def _paired_t_size(effect: float, var_d: float, alpha: float, power: float) -> int:
    """The fewest paired tasks (two at least: an interval over tasks needs two) at which a
    two-sided paired t-test at ``alpha`` finds a mean difference ``effect`` with per-task
    variance ``var_d`` with probability ``power``; see the module docstring."""
    z = normal_quantile(1 - alpha / 2) + normal_quantile(power)
    n = max(2, math.ceil(z**2 * var_d / effect**2))
    if var_d == 0:
        return n
    from scipy import stats  # here: scipy.stats is slow to import, and only this call needs it

    sd = math.sqrt(var_d)
    while True:
        q = float(stats.t.ppf(1 - alpha / 2, n - 1))
        shift = abs(effect) / (sd / math.sqrt(n))
        found = float(stats.nct.sf(q, n - 1, shift) + stats.nct.cdf(-q, n - 1, shift))
        if found >= power:
            return n
        n += 1


def holdout_size(
    effect: float,
    base: float | None = None,
    k: int | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    before: Iterable[Any] | Any = None,
) -> HoldoutSizeReport:
    """Paired tasks needed to detect a change of ``effect`` in pass rate, each task scored by
    ``k`` samples per arm, two-sided at ``alpha`` with ``power``. Give the base rate (``base=``)
    or an earlier run's rows (``before=``) to estimate it and the per-task spread from. The
    formula and its assumptions are in this module's docstring and printed with the number."""
    if isinstance(effect, bool) or not isinstance(effect, int | float | np.floating):
        raise ValueError(f"effect must be a number (a change in pass rate), got {effect!r}")
    if not math.isfinite(effect) or effect == 0 or abs(effect) >= 1:
        raise ValueError(f"effect must be non-zero and between -1 and 1, got {effect!r}")
    alpha = _unit(alpha, "alpha")
    power = _unit(power, "power")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1):
        raise ValueError(f"k must be a positive integer (samples per task per arm), got {k!r}")
    if (base is None) == (before is None):
        raise ValueError(
            "give the base rate (base=0.45) or an earlier run's rows (before=rows), one of them"
        )
    notes: list[str] = []
    assumptions = [
        "the effect is the same on every task, so how hard a task is cancels in the pair",
        "tasks are independent; a paired t-test on the per-task differences, as compare's "
        "interval is",
    ]
    if before is not None:
        t = task_table(rows_of(before, "before"), what="before", with_markers=False)
        n, c = t.n_binary, t.n_pass
        has = n > 0
        if not has.any():
            raise ValueError("before: no row has a binary reward (0 or 1) to estimate a rate from")
        rates = c[has] / n[has]
        base_rate = float(rates.mean())
        spread_from = n >= 2
        if spread_from.any():
            nn, cc = n[spread_from].astype(float), c[spread_from].astype(float)
            pq = float((cc * (nn - cc) / (nn * (nn - 1))).mean())
        else:
            pq = base_rate * (1 - base_rate)
            notes.append("before: no task has two samples, so the spread assumes base (1 - base)")
        k_used = int(k) if k is not None else int(np.median(n[has]))
        source = f"from {counted(int(has.sum()), 'task')} before"
        assumptions.append(
            "E[p(1 - p)] estimated from each earlier task's c(n - c)/(n(n - 1)); base = mean "
            "per-task pass rate"
        )
        if k is None:
            assumptions.append(f"k = {k_used}, the median group size in the earlier rows")
        skipped = t.counts.partial + t.counts.unjudged
        if skipped:
            notes.append(f"before: {skipped} partial or unjudged rows skipped")
    else:
        base_rate = _unit(base, "base", open_low=False, open_high=False)
        pq = base_rate * (1 - base_rate)
        k_used = int(k) if k is not None else 1
        source = "given"
        assumptions.append(
            "every task sits at the base rate: the largest per-task variance for that mean, so "
            "n_tasks errs high; before=rows measures the real spread"
        )
        if k is None:
            assumptions.append("k = 1 sample per task per arm (pass k= for repeats)")
    if not 0 <= base_rate + effect <= 1:
        raise ValueError(f"effect {effect:+g} takes the base rate {base_rate:.3f} outside [0, 1]")
    pq_after = max(pq + effect * (1 - 2 * base_rate) - effect**2, 0.0)
    var_d = (pq + pq_after) / k_used
    n_tasks = _paired_t_size(effect, var_d, alpha, power)
    if var_d == 0:
        notes.append(
            "no within-task spread at all: every task unanimous in both arms; the count is a "
            "floor, not an estimate"
        )
    return HoldoutSizeReport(
        n_tasks=n_tasks,
        effect=float(effect),
        base=base_rate,
        k=k_used,
        alpha=alpha,
        power=power,
        task_std=math.sqrt(pq / k_used),
        diff_std=math.sqrt(var_d),
        source=source,
        assumptions=assumptions,
        notes=notes,
    )
