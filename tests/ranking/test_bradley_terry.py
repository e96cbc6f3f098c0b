"""Bradley-Terry by MM, checked against closed forms, the likelihood optimised by scipy, and
the plain win rate on a round robin."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import optimize

from whileai.ranking.bradley_terry import expected_win_rate, fit, win_rate


def test_without_a_prior_two_items_have_the_closed_form_odds() -> None:
    # A beat B twice and lost once: the likelihood p^2 q / (p + q)^3 peaks at p / q = 2
    p = fit(2, [(0, 1, 1.0), (0, 1, 1.0), (0, 1, 0.0)], prior_ties=0)
    assert p[0] / p[1] == pytest.approx(2.0, rel=1e-8)
    assert math.prod(p) == pytest.approx(1.0)  # scaled to geometric mean 1


def _bisect(f, lo: float, hi: float) -> float:  # type: ignore[no-untyped-def]
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def test_the_prior_keeps_a_clean_sweep_finite_hand_computed() -> None:
    """A beats B once; each also ties the reference (strength 1) once.

    The likelihood equations (wins = expected wins) are, with a = p_A and b = p_B,
        1.5 = a / (a + b) + a / (a + 1)     and     0.5 = b / (a + b) + b / (b + 1).
    By symmetry b = 1 / a solves the second when a solves the first, which becomes
        a^2 / (a^2 + 1) + a / (a + 1) = 1.5   (a = 2.1304...).
    """
    a = _bisect(lambda x: x * x / (x * x + 1) + x / (x + 1) - 1.5, 1.0, 10.0)
    assert a == pytest.approx(2.1304, abs=1e-4)
    p = fit(2, [(0, 1, 1.0)])
    assert p == pytest.approx([a, 1 / a], rel=1e-8)
    # quality is the chance to beat the other row: a / (a + 1/a) = a^2 / (a^2 + 1)
    assert expected_win_rate(p) == pytest.approx([a * a / (a * a + 1), 1 / (a * a + 1)])


def _negative_log_likelihood(
    theta: np.ndarray, outcomes: list[tuple[int, int, float]], prior: float
) -> tuple[float, np.ndarray]:
    """Minus the penalised log-likelihood in log p, and its gradient, written out directly."""
    total, grad = 0.0, np.zeros(len(theta))
    for i, j, s in outcomes:
        log_norm = np.logaddexp(theta[i], theta[j])
        total += s * (theta[i] - log_norm) + (1 - s) * (theta[j] - log_norm)
        p_i = np.exp(theta[i] - log_norm)
        grad[i] += s - p_i
        grad[j] -= s - p_i
    for i in range(len(theta)):  # each row's virtual tie with the reference (theta = 0)
        log_norm = np.logaddexp(theta[i], 0.0)
        total += prior * (0.5 * (theta[i] - log_norm) + 0.5 * (0.0 - log_norm))
        grad[i] += prior * (0.5 - np.exp(theta[i] - log_norm))
    return -total, -grad


def _penalised_mle(
    n: int, outcomes: list[tuple[int, int, float]], prior: float, gtol: float = 1e-8
) -> np.ndarray:
    """The same estimate by direct numerical optimisation of the log-likelihood in log p."""
    result = optimize.minimize(
        _negative_log_likelihood,
        np.zeros(n),
        args=(outcomes, prior),
        jac=True,
        method="BFGS",
        options={"gtol": 1e-10},
    )
    assert np.max(np.abs(result.jac)) < gtol, result.message
    return np.exp(result.x)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mm_reaches_the_maximum_likelihood_scipy_finds(seed: int) -> None:
    rng = random.Random(seed)
    n = 6
    truth = [rng.uniform(0.2, 5) for _ in range(n)]
    outcomes = []
    for _ in range(40):
        i, j = rng.sample(range(n), 2)
        u = rng.random()
        p_i = truth[i] / (truth[i] + truth[j])
        outcomes.append((i, j, 1.0 if u < p_i * 0.9 else 0.5 if u < p_i * 0.9 + 0.1 else 0.0))
    mm = fit(n, outcomes, prior_ties=1.0)
    reference = _penalised_mle(n, outcomes, 1.0)
    assert mm == pytest.approx(reference, rel=1e-4)


@pytest.mark.parametrize(
    ("seed", "n", "games", "sweep"),
    [(3, 2, 1, True), (4, 4, 6, True), (5, 10, 45, False), (6, 16, 40, False), (7, 30, 400, True)],
)
def test_the_fit_is_the_penalised_maximum_scipy_finds_for_any_group(
    seed: int, n: int, games: int, sweep: bool
) -> None:
    # clean sweeps (row 0 wins every game it plays), subsampled groups, lopsided strengths:
    # the fit is the one maximum, to within scipy's own tolerance
    rng = random.Random(seed)
    truth = [rng.uniform(0.05, 20) for _ in range(n)]
    outcomes = []
    for _ in range(games):
        i, j = rng.sample(range(n), 2)
        u, p_i = rng.random(), truth[i] / (truth[i] + truth[j])
        outcomes.append((i, j, 1.0 if u < p_i * 0.8 else 0.5 if u < p_i * 0.8 + 0.2 else 0.0))
    if sweep:
        outcomes = [(i, j, 1.0 if i == 0 else 0.0 if j == 0 else s) for i, j, s in outcomes]
    for prior in (1.0, 0.25):
        fitted = fit(n, outcomes, prior_ties=prior)
        # the maximum of a strictly concave function: where its gradient vanishes
        gradient = _negative_log_likelihood(np.log(fitted), outcomes, prior)[1]
        assert np.max(np.abs(gradient)) < 1e-9
        # and where scipy's own search ends (to the precision it reaches at this size)
        assert fitted == pytest.approx(_penalised_mle(n, outcomes, prior, gtol=1e-6), rel=1e-5)


def test_on_a_round_robin_quality_orders_rows_like_their_win_rate() -> None:
    # four rows, every pair once: row 0 wins all, row 3 loses all, 1 and 2 tie each other
    outcomes = [(0, 1, 1.0), (0, 2, 1.0), (0, 3, 1.0), (1, 2, 0.5), (1, 3, 1.0), (2, 3, 1.0)]
    rates = win_rate(4, outcomes)
    assert rates == pytest.approx([1.0, 0.5, 0.5, 0.0])
    quality = expected_win_rate(fit(4, outcomes))
    assert np.argsort(-quality)[0] == 0 and np.argsort(quality)[0] == 3
    assert quality[1] == pytest.approx(quality[2])
    assert quality.min() > 0 and quality.max() < 1  # the sweep stays finite


def test_nothing_to_separate_means_everyone_is_average() -> None:
    outcomes = [(0, 1, 0.5), (1, 2, 0.5), (0, 2, 0.5)]
    assert fit(3, outcomes) == pytest.approx([1.0, 1.0, 1.0])
    assert expected_win_rate(fit(3, outcomes)) == pytest.approx([0.5, 0.5, 0.5])


def test_qualities_of_a_group_average_one_half() -> None:
    # sum_i mean_j p_i/(p_i+p_j) pairs each i,j once, so the mean is exactly 0.5
    rng = random.Random(7)
    outcomes = [(i, j, rng.choice([0.0, 0.5, 1.0])) for i in range(5) for j in range(i + 1, 5)]
    assert expected_win_rate(fit(5, outcomes)).mean() == pytest.approx(0.5)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"outcome \(1, 1\) does not name two different items"):
        fit(2, [(1, 1, 1.0)])
    with pytest.raises(ValueError, match="scores 2, outside"):
        fit(2, [(0, 1, 2)])
    with pytest.raises(ValueError, match="needs every item to have a win and a loss"):
        fit(2, [(0, 1, 1.0)], prior_ties=0)
    assert np.isnan(expected_win_rate(np.array([1.0]))).all()
