"""The interval of a count's mean (tool errors, turns, an answer's length) and of a
difference of counts: Student's t with Hall's (1992) correction for skewness.

The reference below solves Hall's transformation by root finding on scipy's skewness, standard
error and t quantile, so it shares nothing with the closed form under test. The coverage
checks draw per-task counts the way agents give them (long-tailed lengths, tool errors that
bunch on a few tasks) from 5 tasks up, through ``wai.marker_summary`` and ``wai.compare`` as a
user reads them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import optimize, stats

import whileai as wai
from whileai.measure.intervals import (
    difference_interval,
    skew_corrected_t_interval,
    t_interval,
)


def kurtosis_df(values: np.ndarray) -> float:
    """The degrees of freedom of the sample variance matched to a scaled chi-square,
    ``2 / (2 / (n - 1) + g / n)`` for excess kurtosis ``g`` (none credited below a
    normal's), from scipy's kurtosis: ``n - 1`` for normal-looking values, fewer for
    heavy-tailed ones."""
    n = values.size
    excess = max(float(stats.kurtosis(values)), 0.0)
    return float(np.clip(2 / (2 / (n - 1) + excess / n), 1, n - 1))


def hall_reference(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Hall's interval: the means whose studentized statistic ``T`` the transformation
    ``T + g T^2 / (3 sqrt n) + g^2 T^3 / (27 n) + g / (6 sqrt n)`` takes to the t quantiles
    (on :func:`kurtosis_df` degrees of freedom), ``g`` the skewness with the sample standard
    deviation (``n - 1``) in its denominator."""
    n = values.size
    mean, se = float(values.mean()), float(stats.sem(values))
    g = float(stats.skew(values, bias=True)) * ((n - 1) / n) ** 1.5
    q = float(stats.t.ppf(0.5 + confidence / 2, kurtosis_df(values)))

    def transformed(t: float) -> float:
        root = math.sqrt(n)
        return t + g * t**2 / (3 * root) + g**2 * t**3 / (27 * n) + g / (6 * root)

    def solve(target: float) -> float:
        return float(optimize.brentq(lambda t: transformed(t) - target, -1e3, 1e3, xtol=1e-12))

    return mean - solve(q) * se, mean - solve(-q) * se


@pytest.mark.parametrize("seed", range(6))
def test_the_interval_is_halls_transformation_solved(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.poisson(rng.lognormal(3, 1, size=8)).astype(float)
    assert skew_corrected_t_interval(values) == pytest.approx(hall_reference(values), rel=1e-9)


def test_heavy_tailed_values_take_fewer_degrees_of_freedom() -> None:
    # one task of 30 far from the rest: the variance rests on it
    values = np.array([1.0] * 29 + [40.0])
    assert kurtosis_df(values) < 5
    assert skew_corrected_t_interval(values) == pytest.approx(hall_reference(values), rel=1e-9)
    spread = np.linspace(0.0, 1.0, 30)  # short tails: Student's t on n - 1, exactly
    theirs = stats.t.interval(0.95, 29, loc=spread.mean(), scale=stats.sem(spread))
    assert t_interval(spread) == pytest.approx(theirs)
    # a difference of rewards where a few tasks moved and most did not: fewer as well
    a = np.zeros(30)
    b = np.where(np.arange(30) < 3, 1.0, 0.0)
    low, high = difference_interval(a, b)  # type: ignore[misc]
    q = stats.t.ppf(0.975, kurtosis_df(b - a))
    assert (low, high) == pytest.approx((0.1 - q * stats.sem(b - a), 0.1 + q * stats.sem(b - a)))
    assert q > stats.t.ppf(0.975, 29)


def test_symmetric_counts_get_students_t_exactly() -> None:
    values = np.array([2.0, 4.0, 6.0, 8.0, 10.0])
    theirs = stats.t.interval(0.95, 4, loc=values.mean(), scale=stats.sem(values))
    assert skew_corrected_t_interval(values) == pytest.approx(theirs)
    assert skew_corrected_t_interval(values) == pytest.approx(t_interval(values))


def test_a_long_right_tail_moves_the_interval_toward_it() -> None:
    # one task with many tool errors: the plain t interval reaches far below zero and not
    # far enough above; the corrected one is shifted toward the tail and wider on its side
    values = np.array([0.0, 0.0, 0.0, 1.0, 10.0])
    plain = t_interval(values)
    corrected = skew_corrected_t_interval(values)
    assert plain is not None and corrected is not None
    assert corrected[0] > plain[0] and corrected[1] > plain[1]
    assert corrected[1] - values.mean() > values.mean() - corrected[0]


def test_situations_are_the_units_when_phrasings_share_one() -> None:
    # two phrasings per situation: the interval is the one over the situations' means
    values = np.array([1.0, 3.0, 0.0, 0.0, 20.0, 24.0, 2.0, 2.0])
    clusters = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    means = np.array([2.0, 0.0, 22.0, 2.0])
    assert skew_corrected_t_interval(values, clusters) == pytest.approx(hall_reference(means))


def test_no_interval_below_two_units_and_a_point_without_spread() -> None:
    assert skew_corrected_t_interval([7.0]) is None
    assert skew_corrected_t_interval([7.0, 7.0, 7.0]) == (7.0, 7.0)


def rows(per_task: np.ndarray, marker: str = "count") -> list[dict[str, Any]]:
    """Rows as a run writes them: a task per row of ``per_task``, a rollout per column."""
    return [
        {
            "task_id": f"t{i}",
            "prompt": f"q{i}",
            "final_text": "a",
            "reward": 1.0,
            "markers": {marker: int(v)},
        }
        for i in range(per_task.shape[0])
        for v in per_task[i]
    ]


#: per-task counts of 4 rollouts each, and the population mean they are drawn around
POPULATIONS = {
    # answer lengths: a task's typical length is lognormal, its rollouts Poisson around it
    "lengths": (lambda rng, n: rng.poisson(rng.lognormal(5, 1, (n, 1)), (n, 4)), np.exp(5.5)),
    # tool errors: a task's error rate is gamma-distributed (a few tasks have many)
    "tool errors": (lambda rng, n: rng.poisson(rng.gamma(2, 0.5, (n, 1)), (n, 4)), 1.0),
    # turns, symmetric: the correction must leave its coverage as it was
    "turns": (lambda rng, n: rng.integers(1, 9, (n, 4)), 4.5),
}


def coverage(population: str, tasks: int, runs: int, seed: int) -> tuple[float, float]:
    """How often ``marker_summary``'s interval covers the truth, and how often the plain t
    interval on the same per-task means does."""
    draw, truth = POPULATIONS[population]
    rng = np.random.default_rng(seed)
    ours = plain = measured = 0
    for _ in range(runs):
        per_task = draw(rng, tasks)
        ci = wai.marker_summary(rows(per_task)).metrics["count"].ci95
        if ci is None:
            # every task gave the same mean: no interval, and a note that says why
            assert np.ptp(per_task.mean(axis=1)) == 0
            continue
        measured += 1
        ours += ci[0] <= truth <= ci[1]
        low, high = t_interval(per_task.mean(axis=1))  # type: ignore[misc]
        plain += low <= truth <= high
    return ours / measured, plain / measured


@pytest.mark.slow
@pytest.mark.parametrize("tasks", [5, 10, 30])
def test_marker_summary_covers_skewed_counts_better_than_plain_t(tasks: int) -> None:
    """No interval can promise 95% for the mean of unbounded values at 5 tasks (Bahadur and
    Savage 1956); what can be asked is that the long tail's side is no longer where it
    misses, and that symmetric counts keep their coverage."""
    runs = 1500
    ours, plain = coverage("lengths", tasks, runs, seed=tasks)
    print(f"lengths, {tasks} tasks: corrected {ours:.3f}, plain t {plain:.3f}")
    assert ours >= plain + 0.03
    ours, plain = coverage("tool errors", tasks, runs, seed=tasks)
    print(f"tool errors, {tasks} tasks: corrected {ours:.3f}, plain t {plain:.3f}")
    assert ours >= plain and ours >= 0.92
    ours, plain = coverage("turns", tasks, runs, seed=tasks)
    print(f"turns, {tasks} tasks: corrected {ours:.3f}, plain t {plain:.3f}")
    assert 0.93 <= ours <= 0.97 and abs(ours - plain) <= 0.01


@pytest.mark.slow
def test_compare_on_a_count_covers_a_skewed_rise() -> None:
    """Faults on: tool errors rise by 3 on average in a third of the tasks (0.9 overall), the
    rise bunched on those tasks. ``wai.compare``'s interval on the marker, at 10 and 30
    tasks, against the plain t interval on the same differences."""
    rng = np.random.default_rng(11)
    runs = 1500
    for tasks in (10, 30):
        ours = plain = 0
        for _ in range(runs):
            rate = rng.gamma(2, 0.5, (tasks, 1))
            off = rng.poisson(rate, (tasks, 4))
            prone = rng.random((tasks, 1)) < 0.3
            on = rng.poisson(rate, (tasks, 4)) + np.where(prone, rng.poisson(3, (tasks, 4)), 0)
            delta = wai.compare(rows(off, "tool_errors"), rows(on, "tool_errors"))
            ci = delta.metrics["tool_errors"].ci95
            assert ci is not None
            ours += ci[0] <= 0.9 <= ci[1]
            low, high = t_interval(on.mean(axis=1) - off.mean(axis=1))  # type: ignore[misc]
            plain += low <= 0.9 <= high
        print(f"{tasks} tasks: compare {ours / runs:.3f}, plain t {plain / runs:.3f}")
        assert ours / runs >= plain / runs and ours / runs >= 0.93


def test_differences_of_rewards_keep_students_t() -> None:
    # values in [0, 1]: their differences are short-tailed, and t already covers them
    a = np.array([0.25, 0.5, 0.0, 0.75, 0.25])
    b = np.array([0.5, 1.0, 0.0, 0.75, 1.0])
    theirs = stats.t.interval(0.95, 4, loc=(b - a).mean(), scale=stats.sem(b - a))
    assert difference_interval(a, b) == pytest.approx(theirs)
