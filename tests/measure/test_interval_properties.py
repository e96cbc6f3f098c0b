"""What every interval over tasks promises, whatever the data: it lies in [0, 1], holds its
own point estimate, is never a point, and is never narrower than the count of every attempt
taken as independent (the discount for few or heavy-tailed units only ever widens it)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from whileai.measure.intervals import (
    bounded_mean_interval,
    count_interval,
    effective_attempts,
    rate_interval,
    variance_df,
)

#: per task: (attempts, passes), and which of a few situations it belongs to
tasks = st.lists(
    st.tuples(st.integers(1, 8), st.floats(0, 1), st.integers(0, 4)), min_size=1, max_size=40
)


def counts(drawn: list[tuple[int, float, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = np.array([a for a, _, _ in drawn], dtype=float)
    c = np.array([round(a * share) for a, share, _ in drawn], dtype=float)
    clusters = np.unique([s for _, _, s in drawn], return_inverse=True)[1].astype(np.int64)
    return n, c, clusters


@given(tasks, st.booleans())
@settings(max_examples=300, deadline=None)
def test_a_pass_rate_interval_holds_its_estimate_and_is_never_narrower_than_all_attempts(
    drawn: list[tuple[int, float, int]], clustered: bool
) -> None:
    n, c, clusters = counts(drawn)
    groups = clusters if clustered else None
    mean, effective = effective_attempts(n, c, groups)
    low, high = rate_interval(n, c, groups)
    assert 0.0 <= low <= mean <= high <= 1.0
    assert high - low > 0
    assert 0 < effective <= n.sum() + 1e-9
    every_attempt = count_interval(mean * n.sum(), n.sum())
    assert low <= every_attempt[0] + 1e-9 and high >= every_attempt[1] - 1e-9


@given(
    st.lists(st.tuples(st.floats(0, 1), st.integers(0, 4)), min_size=1, max_size=40),
    st.booleans(),
    st.integers(1, 4),
)
@settings(max_examples=300, deadline=None)
def test_a_bounded_mean_interval_holds_its_estimate_between_its_floor_and_cap(
    drawn: list[tuple[float, int]], clustered: bool, per_task: int
) -> None:
    values = np.array([v for v, _ in drawn])
    clusters = np.unique([s for _, s in drawn], return_inverse=True)[1].astype(np.int64)
    groups = clusters if clustered else None
    cap = float(values.size * per_task)
    low, high = bounded_mean_interval(values, cap, groups)
    units = np.unique(clusters).size if clustered else values.size
    mean = float(values.mean())  # clusters weigh by their tasks: the mean over tasks
    assert 0.0 <= low <= mean + 1e-9 and mean - 1e-9 <= high <= 1.0
    assert high - low > 0
    # never narrower than the cap's count, never wider than the units' (their floor)
    widest = count_interval(mean * units, float(units)) if units >= 2 else None
    narrowest = count_interval(mean * cap, cap)
    assert low <= narrowest[0] + 1e-9 and high >= narrowest[1] - 1e-9
    if widest is not None:
        assert low >= widest[0] - 1e-9 and high <= widest[1] + 1e-9


@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=60))
@settings(max_examples=300, deadline=None)
def test_the_degrees_of_freedom_lie_between_one_and_the_units_less_one(
    values: list[float],
) -> None:
    df = variance_df(np.array(values))
    assert 1.0 <= df <= len(values) - 1


def test_a_few_units_carrying_everything_take_fewer_degrees_of_freedom() -> None:
    spread = np.linspace(0, 1, 30)
    assert variance_df(spread) == 29  # short tails: every unit's worth
    one_carries = np.r_[np.ones(1), np.zeros(29)]
    assert variance_df(one_carries) < 3
    assert variance_df(np.zeros(30)) == 29  # no spread at all: nothing to discount for
