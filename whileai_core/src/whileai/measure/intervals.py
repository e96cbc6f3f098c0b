"""Intervals over tasks that hold their coverage from a handful of tasks up.

The percentile bootstrap undercovers below a few hundred tasks (Bowyer, Aitchison and Ivanova,
ICML 2025, arXiv:2503.01747, who recommend exact or Bayesian beta-binomial intervals there),
and gives a point when every task scored alike. These intervals are analytic instead, and as
fast at a million tasks as at five; ``tests/measure/test_interval_coverage.py`` measures their
coverage from 5 tasks to 300.

Each is a Beta-tail interval on a count (:func:`count_interval`), the count *effective*:

- **A pass rate** (pass@1, the mean over tasks of each task's share of passing attempts):
  attempts of one task are correlated (a task is hard or easy), so the ``N`` attempts count as
  ``N / deff``, the design effect of a clustered proportion (Kish 1965) with the between-task
  share of the variance estimated by one-way ANOVA. With one attempt per task the attempts
  are independent draws of the population's rate and the count is exact: ``x`` passes in
  ``T`` tasks.
- **Any other mean of per-task values in [0, 1]** (pass^k, pass@k, a partial reward, a 0/1
  marker): the count the observed variance claims, ``mean (1 - mean) / variance``, up to the
  independent samples the data could hold; never below ``T``, since a mean of ``T`` values
  in [0, 1] has at most the variance of ``T`` coin flips.

  Either count rests on a variance estimated from ``T`` units, so it is discounted by
  ``(t_{N-1} / t_df)^2`` (Korn and Graubard 1998, as the US National Center for Health
  Statistics applies it to proportions), also where every unit scored alike and no variance
  was seen; ``df`` is ``T - 1``, fewer where the units' values are heavy-tailed
  (:func:`variance_df`).
- **A mean of unbounded per-task values** (a count marker) and **a paired difference**
  (compare): Student's t over tasks, df ``T - 1`` (fewer where the values are heavy-tailed:
  :func:`variance_df`), for counts and their differences with Hall's (1992) correction for
  skewness (counts have long tails, and the plain t interval misses on the tail's side;
  :func:`skew_corrected_t_interval`). A difference whose per-task
  values are all equal (every task moved alike, often by 0) takes the MOVER interval
  (Newcombe 1998; Donner and Zou 2012) of the two arms' own intervals, so it is never a
  point while the arms' rates are uncertain.

All-fail or all-pass data give ``[0, u]`` or ``[l, 1]`` with ``u > 0`` and ``l < 1``: an
interval is never a point where the data cannot rule values out.

Phrasings of one situation are one cluster (Miller 2024, arXiv:2411.00640): given a cluster
label per task, every interval here treats the clusters as the units, so ``T`` counts
situations.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy import optimize, special

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Interval = tuple[float, float]

DEFAULT_CONFIDENCE = 0.95
#: Fewer units (tasks, or situations) than this and a report says its interval is wide for that
#: reason: below ten, the t quantile alone is more than 15% above the normal one.
SMALL_SAMPLE = 10
#: How much the observed count weighs in its own tail (1/2: mid-p; 1: Clopper-Pearson); see
#: :func:`count_interval`.
TIE_WEIGHT = 0.7


def _t(df: float, confidence: float) -> float:
    return float(special.stdtrit(df, 1 - (1 - confidence) / 2))


def _cdf(x: float, n: float, p: float) -> tuple[float, float]:
    """P(X <= x - 1) and P(X <= x) for X ~ Binomial(n, p), through the incomplete beta
    function, so a fractional (effective) count reads smoothly."""
    q = 1.0 - p
    before = 0.0 if x <= 0 else float(special.betainc(n - x + 1, x, q))
    at_most = 1.0 if x >= n else float(special.betainc(n - x, x + 1, q))
    return before, at_most


def _root(tail: Callable[[float], float], target: float) -> float:
    """The p in [0, 1] where the falling function ``tail`` meets ``target``."""
    return float(optimize.brentq(lambda p: tail(p) - target, 0.0, 1.0, xtol=1e-13))


def count_interval(x: float, n: float, confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """The interval of a rate from ``x`` successes in ``n`` trials (both may be fractional,
    as effective counts are): the rates whose tail beyond ``x``, counting the observed count
    with weight :data:`TIE_WEIGHT`, is at least ``alpha / 2`` on each side.

    Weight 1/2 is the mid-p interval (Lancaster 1961; Agresti and Gottard 2007), 1 is
    Clopper-Pearson's exact one. Mid-p's coverage dips to 92.7% at 10 trials; at 0.7 the exact
    coverage stays at or above 93.7% at every rate from 5 trials to 300 (measured in
    ``tests/measure/test_interval_coverage.py``), where Clopper-Pearson's runs at 97-99%. The
    lower end is 0 at ``x = 0`` and the upper 1 at ``x = n``: never a point."""
    alpha = 1 - confidence
    n = max(float(n), 1e-9)
    # a mean of equal values can land a rounding error away from 0 or 1
    slack = 1e-9 * max(n, 1.0)
    x = 0.0 if x <= slack else n if x >= n - slack else float(x)
    w = TIE_WEIGHT

    def upper_tail(p: float) -> float:  # P(X < x) + w P(X = x)
        before, at_most = _cdf(x, n, p)
        return (1 - w) * before + w * at_most

    def lower_tail(p: float) -> float:  # 1 - [P(X > x) + w P(X = x)]
        before, at_most = _cdf(x, n, p)
        return w * before + (1 - w) * at_most

    low = 0.0 if x <= 0 else _root(lower_tail, 1 - alpha / 2)
    high = 1.0 if x >= n else _root(upper_tail, alpha / 2)
    return low, high


def unit_count(tasks: int, clusters: IntArray | None) -> int:
    """How many units an interval rests on: the situations, or the tasks when each is one."""
    return tasks if clusters is None else int(np.unique(clusters).size)


def small_sample_note(what: str, units: int, *, clustered: bool) -> str:
    """The caveat a report prints under :data:`SMALL_SAMPLE` units (situations when
    ``clustered``, else tasks)."""
    noun = "situations" if clustered else "tasks"
    return (
        f"{what}: {units} {noun}, fewer than {SMALL_SAMPLE}: the interval is wide because it "
        f"rests on few {noun}, and more attempts per task will not narrow it much"
    )


def _units(
    values: FloatArray, weights: FloatArray, clusters: IntArray | None
) -> tuple[FloatArray, FloatArray]:
    """Per unit (a task, or a cluster of them): its weighted mean value and its weight."""
    if clusters is None:
        return values, weights
    total = np.bincount(clusters, weights=weights).astype(np.float64)
    sums = np.bincount(clusters, weights=weights * values).astype(np.float64)
    keep = total > 0
    return sums[keep] / total[keep], total[keep]


def _mean_variance(unit_values: FloatArray, unit_weights: FloatArray) -> tuple[float, float]:
    """The weighted mean of the units and its variance over units (the ratio estimator's)."""
    w = unit_weights / unit_weights.sum()
    mean = float(w @ unit_values)
    k = unit_values.size
    if k < 2:
        return mean, math.nan
    return mean, float(k / (k - 1) * np.sum(w**2 * (unit_values - mean) ** 2))


def rate_interval(
    n: npt.ArrayLike,
    c: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval:
    """The interval of ``mean(c / n)`` over tasks: task ``i`` passed ``c[i]`` of ``n[i]``
    attempts (every ``n[i] >= 1``); ``clusters`` labels each task's situation (any labels
    >= 0: tasks sharing one are one unit)."""
    mean, effective = effective_attempts(n, c, clusters, confidence)
    return count_interval(mean * effective, effective, confidence)


def effective_attempts(
    n: npt.ArrayLike,
    c: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, float]:
    """``mean(c / n)`` over tasks and the independent attempts it is worth: the attempts
    divided by the design effect of attempts clustered in tasks (situations), as
    :func:`rate_interval` counts them; all the attempts where they are independent draws."""
    attempts = np.asarray(n, dtype=np.float64)
    passes = np.asarray(c, dtype=np.float64)
    rates = passes / attempts
    groups = None if clusters is None else np.asarray(clusters, dtype=np.int64)
    ones = np.ones_like(rates)
    unit_rates, unit_weights = _units(rates, ones, groups)
    mean, total_var = _mean_variance(unit_rates, unit_weights)
    units = unit_rates.size
    all_attempts = float(attempts.sum())
    # a unit's attempts: phrasings of one situation, of one attempt each, are not independent
    unit_attempts = attempts if groups is None else np.bincount(groups, weights=attempts)
    if units < 2 or unit_attempts.max() < 2:
        # one unit, or one attempt per unit (each an independent draw of the population's
        # rate): the attempts are all there is to count
        return mean, all_attempts
    discount = _few_units_discount(all_attempts, variance_df(unit_rates), confidence)
    if not 0 < mean < 1:
        # every attempt alike: how much the units differ is not seen, so the attempts count
        # as they would if the units were alike, discounted for their number as any count is
        return mean, all_attempts * discount
    # the binomial part of each task rate's variance, unbiased where a task has two attempts
    # or more; a task of one attempt takes the pooled share p(1-p) of those that have them
    many = attempts >= 2
    if many.any():
        spread = rates * (1 - rates) * attempts / np.where(many, attempts - 1, 1)
        pooled = float(spread[many].mean())
        within_task = np.where(many, spread, pooled) / attempts
    else:
        within_task = mean * (1 - mean) / attempts
    # tasks' binomial noises are independent, clustered or not: the mean's variance holds at
    # least their share of it
    within = float(within_task.sum()) / rates.size**2
    variance = max(within, total_var)
    if variance <= 0:
        return mean, all_attempts * discount
    return mean, min(all_attempts, mean * (1 - mean) / variance) * discount


def bounded_mean_interval(
    values: npt.ArrayLike,
    cap: float,
    clusters: npt.ArrayLike | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval:
    """The interval of the mean over tasks of per-task values in [0, 1]; ``cap`` is the most
    independent samples the data could hold (attempts, or disjoint groups of k)."""
    array = np.asarray(values, dtype=np.float64)
    groups = None if clusters is None else np.asarray(clusters, dtype=np.int64)
    unit_values, unit_weights = _units(array, np.ones_like(array), groups)
    mean, variance = _mean_variance(unit_values, unit_weights)
    mean = min(1.0, max(0.0, mean))
    units = unit_values.size
    cap = max(float(cap), 1.0)
    if units < 2:
        return count_interval(mean * cap, cap, confidence)
    # where every unit is alike, how much they differ is not seen: the count is all there is
    seen = variance > 0 and 0 < mean < 1
    claimed = min(cap, mean * (1 - mean) / variance) if seen else cap
    # a mean of ``units`` values in [0, 1] has at most the variance of ``units`` coin flips,
    # so ``units`` samples is the least it holds, whatever the data
    discount = _few_units_discount(cap, variance_df(unit_values), confidence)
    effective = max(units, claimed * discount)
    return count_interval(mean * effective, effective, confidence)


def _few_units_discount(samples: float, df: float, confidence: float) -> float:
    """What an effective count of ``samples`` is worth when the variance behind it was
    estimated on ``df`` degrees of freedom: ``(t_{samples-1} / t_df)^2`` (Korn and Graubard
    1998, as the US National Center for Health Statistics applies it to proportions, Parker
    et al. 2017); 1 where the samples are no more than the degrees of freedom."""
    if samples - 1 <= df:
        return 1.0
    return (_t(samples - 1, confidence) / _t(df, confidence)) ** 2


def variance_df(unit_values: FloatArray) -> float:
    """The degrees of freedom of the variance of ``unit_values``: ``k - 1`` for ``k`` units
    that look normal, fewer the heavier their tails.

    The sample variance of ``k`` values of excess kurtosis ``g`` has variance ``sigma^4 (2 /
    (k - 1) + g / k)`` (Cramer 1946, chapter 27); matched to a scaled chi-square, as Satterthwaite
    (1946) matches a sum of variances, that is ``2 / (2 / (k - 1) + g / k)`` degrees of
    freedom. Per-unit rates are heavy-tailed when a few units carry every pass (a hard
    benchmark's two solvable tasks): their variance then rests on those few, and counting
    it on ``k - 1`` degrees of freedom took the data for as good as ``k`` clusters' worth.
    Over four phrasings of 30 situations from Beta(0.2, 1), pass^4 covered 86.5% on ``k - 1``
    and 94.0% on these (``tests/measure/test_interval_coverage.py``). Light tails earn no
    more than ``k - 1``; at least 1. The moments are unweighted: a cluster of many tasks
    counts as one value here, as it does in the degrees of freedom."""
    k = unit_values.size
    spread = unit_values - unit_values.mean()
    largest = float(np.max(np.abs(spread)))
    if not largest > 0:
        return float(k - 1)
    # in units of the largest deviation, so tiny spreads' fourth powers do not underflow
    scaled = spread / largest
    second = float(np.mean(scaled**2))
    excess = float(np.mean(scaled**4)) / second**2 - 3
    return max(1.0, min(k - 1.0, 2 / (2 / (k - 1) + max(excess, 0.0) / k)))


def t_interval(
    values: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval | None:
    """Student's t interval of the mean over tasks (or clusters), on the units' degrees of
    freedom (:func:`variance_df`); None below two units."""
    array = np.asarray(values, dtype=np.float64)
    groups = None if clusters is None else np.asarray(clusters, dtype=np.int64)
    unit_values, unit_weights = _units(array, np.ones_like(array), groups)
    mean, variance = _mean_variance(unit_values, unit_weights)
    if unit_values.size < 2:
        return None
    half = _t(variance_df(unit_values), confidence) * math.sqrt(variance)
    return mean - half, mean + half


def skew_corrected_t_interval(
    values: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval | None:
    """Student's t interval of the mean over tasks (or clusters), corrected for skewness by
    Hall's transformation (Hall 1992, "On the removal of skewness by transformation", JRSS B
    54:221-228): None below two units; exactly :func:`t_interval` when the units are
    symmetric.

    Counts are skewed (a few tasks with many tool errors, a few very long answers), and the
    studentized mean of skewed values is skewed the other way, so the symmetric t interval
    misses mostly on the side of the long tail: over per-task lengths drawn lognormal it
    covered 83% at 5 tasks and 88% at 30, where this one covers 87% and 93%
    (``tests/measure/test_count_intervals.py``). With ``T = (mean - mu) / se`` and ``g``
    the sample skewness of the units' contributions to the mean, ``T + a T^2 + a^2 T^3 / 3 +
    g / (6 sqrt(k))`` with ``a = g / (3 sqrt(k))`` is nearer Student's t on ``k - 1``
    degrees of freedom than ``T`` is, and increasing in ``T``, so the interval is where it
    lies between the t quantiles; fewer degrees of freedom where the units' values are
    heavy-tailed (:func:`variance_df`: lengths at 30 tasks covered 92.8% on ``k - 1``, 94.3%
    on these)."""
    array = np.asarray(values, dtype=np.float64)
    groups = None if clusters is None else np.asarray(clusters, dtype=np.int64)
    unit_values, unit_weights = _units(array, np.ones_like(array), groups)
    k = unit_values.size
    if k < 2:
        return None
    if float(unit_values.min()) == float(unit_values.max()):
        # every unit alike: no spread (a weighted mean of equal values can miss them by a bit)
        return float(unit_values[0]), float(unit_values[0])
    mean, variance = _mean_variance(unit_values, unit_weights)
    se = math.sqrt(variance)
    # each unit's part in the (weighted) mean's error, in the units of one unit's value:
    # equal weights make it the value's deviation from the mean
    parts = k * unit_weights / unit_weights.sum() * (unit_values - mean)
    spread = math.sqrt(float(np.sum(parts**2)) / (k - 1))
    skew = float(np.mean(parts**3)) / spread**3
    a = skew / (3 * math.sqrt(k))
    shift = skew / (6 * math.sqrt(k))

    def untransformed(q: float) -> float:
        """The ``T`` the transformation takes to ``q``."""
        if abs(a) < 1e-12:
            return q - shift
        return (math.cbrt(1 + 3 * a * (q - shift)) - 1) / a

    q = _t(variance_df(unit_values), confidence)
    return mean - untransformed(q) * se, mean - untransformed(-q) * se


def clipped(
    interval: Interval | None, bounds: tuple[float | None, float | None] | None
) -> Interval | None:
    """``interval`` cut to ``bounds`` (either end None when open): a mean of values that lie
    within them lies within them too, so the cut keeps every value the interval could cover
    (a count's interval never reaches below 0)."""
    if interval is None or bounds is None:
        return interval
    low, high = interval
    if bounds[0] is not None:
        low, high = max(low, bounds[0]), max(high, bounds[0])
    if bounds[1] is not None:
        low, high = min(low, bounds[1]), min(high, bounds[1])
    return low, high


def mover_difference(
    mean_a: float, interval_a: Interval, mean_b: float, interval_b: Interval
) -> Interval:
    """The MOVER interval of ``b - a`` from each arm's interval, with no credit for their
    correlation (wider than the paired one would be: used where the pairs show no spread)."""
    low_a, high_a = interval_a
    low_b, high_b = interval_b
    d = mean_b - mean_a
    return (
        d - math.hypot(mean_b - low_b, high_a - mean_a),
        d + math.hypot(high_b - mean_b, mean_a - low_a),
    )


def difference_interval(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    *,
    bounded: bool | None = None,
) -> Interval | None:
    """The interval of ``mean(b - a)`` over paired tasks (or situations): Student's t on the
    differences (corrected for skewness when they are differences of counts, not of values
    in [0, 1]); where every unit moved alike, the MOVER interval of the arms' own intervals
    (bounded ones when both arms' values lie in [0, 1]); None below two units, and for a count
    every task gave alike in both arms (nothing to size an interval by). ``bounded``: whether
    the values behind the per-task means lie in [0, 1], when the caller knows from the rows
    (None: when every per-task value does)."""
    va = np.asarray(a, dtype=np.float64)
    vb = np.asarray(b, dtype=np.float64)
    groups = None if clusters is None else np.asarray(clusters, dtype=np.int64)
    diff = vb - va
    unit_diffs, weights = _units(diff, np.ones_like(diff), groups)
    if unit_diffs.size < 2:
        return None
    _, variance = _mean_variance(unit_diffs, weights)
    if bounded is None:
        bounded = bool(((va >= 0) & (va <= 1) & (vb >= 0) & (vb <= 1)).all())
    if variance > 1e-24:
        if not bounded:
            # a difference of counts keeps their long tail (one task's extra tool errors)
            return skew_corrected_t_interval(diff, groups, confidence)
        found = t_interval(diff, groups, confidence)
        if found is None:
            return None
        # a difference of two values in [0, 1] lies in [-1, 1]
        return max(-1.0, found[0]), min(1.0, found[1])
    if bounded:
        units = float(unit_diffs.size)
        arm_a = bounded_mean_interval(va, units, groups, confidence)
        arm_b = bounded_mean_interval(vb, units, groups, confidence)
    else:
        found_a = skew_corrected_t_interval(va, groups, confidence)
        found_b = skew_corrected_t_interval(vb, groups, confidence)
        if found_a is None or found_b is None:
            return None
        if found_a[0] == found_a[1] and found_b[0] == found_b[1]:
            # a count every task gave alike in both arms: no spread to size an interval by,
            # and a point would claim the difference is known exactly
            return None
        arm_a, arm_b = found_a, found_b
    # clusters weigh by their tasks, so each arm's mean is its mean over tasks
    return mover_difference(float(va.mean()), arm_a, float(vb.mean()), arm_b)


def mean_interval(
    values: npt.ArrayLike,
    n_rows: int,
    clusters: npt.ArrayLike | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    *,
    bounded: bool | None = None,
) -> Interval | None:
    """The interval of a mean over tasks of per-task means: the bounded form for values in
    [0, 1] (a reward, a 0/1 marker; ``n_rows`` rows behind them), Student's t corrected for
    skewness otherwise (a count). ``bounded``: whether every row's value lies in [0, 1], when
    the caller knows from the rows (None: when every per-task mean does)."""
    array = np.asarray(values, dtype=np.float64)
    if bounded is None:
        bounded = bool(array.size) and float(array.min()) >= 0 and float(array.max()) <= 1
    if bounded:
        return bounded_mean_interval(array, float(n_rows), clusters, confidence)
    return skew_corrected_t_interval(array, clusters, confidence)
