"""The shared bootstrap against scipy's, and the noise band against the t distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from whileai.measure.stats import (
    bootstrap_ci,
    bootstrap_cis,
    bootstrap_means,
    paired_bootstrap_ci,
    t_band,
)


def scipy_percentile_ci(values: np.ndarray, n_resamples: int, seed: int) -> tuple[float, float]:
    res = stats.bootstrap(
        (values,),
        np.mean,
        method="percentile",
        n_resamples=n_resamples,
        random_state=seed,
        vectorized=True,
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def monte_carlo_tolerance(values: np.ndarray, n_resamples: int) -> float:
    # Standard error of a 2.5% quantile of the bootstrap distribution: sqrt(q(1-q)/B) / f(x_q),
    # with the bootstrap distribution close to normal with sd = sd(values)/sqrt(n). Four of them
    # between two independent estimates keeps a false alarm rare.
    sd = values.std(ddof=0) / math.sqrt(values.size)
    q = 0.025
    density = stats.norm.pdf(stats.norm.ppf(q)) / sd
    return 4 * math.sqrt(2) * math.sqrt(q * (1 - q) / n_resamples) / density


@pytest.mark.parametrize("kind", ["pass rates of 8 samples", "continuous scores"])
def test_bootstrap_ci_matches_scipy_percentile(kind: str) -> None:
    rng = np.random.default_rng(7)
    if kind == "pass rates of 8 samples":
        values = rng.binomial(8, rng.beta(2, 3, size=800)) / 8  # the count path
    else:
        values = rng.gamma(2.0, 1.0, size=400)  # the index path
    ours = bootstrap_ci(values, n_resamples=20_000, seed=1)
    theirs = scipy_percentile_ci(values, 20_000, 2)
    tol = monte_carlo_tolerance(values, 20_000)
    assert ours[0] == pytest.approx(theirs[0], abs=tol)
    assert ours[1] == pytest.approx(theirs[1], abs=tol)
    assert ours[0] < values.mean() < ours[1]


def test_count_and_index_resampling_give_the_same_distribution() -> None:
    # Few distinct values take the multinomial-count path; adding a tiny jitter to every value
    # forces the index path. Both are exact bootstraps, so their resampled means must agree.
    rng = np.random.default_rng(3)
    values = rng.binomial(4, 0.3, size=500) / 4
    jittered = values + rng.normal(scale=1e-9, size=values.size)
    counts = bootstrap_means(values, 20_000, seed=0)[:, 0]
    # Back onto the lattice of possible means (multiples of 1 / (4 * 500)) before comparing.
    indices = np.round(bootstrap_means(jittered, 20_000, seed=1)[:, 0] * 2000) / 2000
    assert stats.ks_2samp(counts, indices).pvalue > 0.001
    assert counts.std() == pytest.approx(values.std() / math.sqrt(values.size), rel=0.03)


def test_columns_resampled_together_share_tasks() -> None:
    values = np.arange(10.0)
    both = bootstrap_means(np.column_stack([values, 2 * values]), 1000, seed=0)
    # The same tasks were drawn for both columns, so the second mean is exactly twice the first.
    np.testing.assert_allclose(both[:, 1], 2 * both[:, 0])
    low_high = bootstrap_cis(np.column_stack([values, 2 * values]), 1000, seed=0)
    assert low_high[1][0] == pytest.approx(2 * low_high[0][0])


def test_same_seed_same_interval() -> None:
    values = np.linspace(0, 1, 50)
    assert bootstrap_ci(values, 2000, seed=5) == bootstrap_ci(values, 2000, seed=5)


def test_paired_bootstrap_is_the_bootstrap_of_differences() -> None:
    rng = np.random.default_rng(0)
    a = rng.random(300)
    b = a + 0.05 + rng.normal(scale=0.01, size=300)
    delta, ci = paired_bootstrap_ci(a, b, 5000, seed=0)
    assert delta == pytest.approx(float((b - a).mean()))
    assert ci == bootstrap_ci(b - a, 5000, seed=0)
    # Pairing removes the spread of the tasks: the interval is far narrower than an unpaired one.
    assert ci[1] - ci[0] < 0.01


def test_bad_inputs_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([0.1, float("nan")])
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_ci([0.1, 0.2], n_resamples=0)
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([0.1, 0.2], confidence=95)
    with pytest.raises(ValueError, match="paired task by task"):
        paired_bootstrap_ci([0.1, 0.2], [0.3])


def test_t_band_is_t_quantile_times_the_std_of_a_two_run_difference() -> None:
    assert t_band(0.02, df=2) == pytest.approx(stats.t.ppf(0.975, 2) * math.sqrt(2) * 0.02)
    assert t_band(0.02, df=10_000) == pytest.approx(1.96 * math.sqrt(2) * 0.02, rel=1e-3)
    with pytest.raises(ValueError, match="df"):
        t_band(0.02, df=0)
    with pytest.raises(ValueError, match="run_std"):
        t_band(-1.0, df=3)


def test_columns_with_few_distinct_rows_are_counted_jointly() -> None:
    # 1,000 tasks whose (pass rate, pass^k) rows take a handful of values: the count path.
    rng = np.random.default_rng(4)
    rates = rng.binomial(4, 0.5, size=1000) / 4
    both = np.column_stack([rates, rates**2])
    means = bootstrap_means(both, 4000, seed=0)
    # Each resample's second column is the mean of the squares of the same tasks drawn for the
    # first, so the two columns stay tied by the same multinomial counts.
    assert np.corrcoef(means[:, 0], means[:, 1])[0, 1] > 0.9
    assert means[:, 0].mean() == pytest.approx(rates.mean(), abs=1e-3)
    assert means[:, 1].mean() == pytest.approx((rates**2).mean(), abs=1e-3)
    assert means[:, 0].std() == pytest.approx(rates.std() / math.sqrt(1000), rel=0.05)
