"""Wilson's interval against its formula, and Cohen's kappa against a textbook example."""

from __future__ import annotations

import math

import numpy as np
import pytest

import whileai as wai

Z95 = 1.959963984540054  # the normal 0.975 quantile, written out so the test needs no scipy


def wilson_by_hand(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


@pytest.mark.parametrize(("successes", "n"), [(0, 10), (3, 10), (10, 10), (47, 120), (1, 1)])
def test_wilson_matches_the_formula(successes: int, n: int) -> None:
    low, high = wai.wilson_interval(successes, n)
    expected = wilson_by_hand(successes, n)
    assert low == pytest.approx(max(0.0, expected[0]), abs=1e-12)
    assert high == pytest.approx(min(1.0, expected[1]), abs=1e-12)


def test_wilson_known_values() -> None:
    # 0 of n: the lower bound is 0 and the upper is z^2 / (n + z^2); Wald would give [0, 0].
    low, high = wai.wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(Z95**2 / (10 + Z95**2), abs=1e-12)  # 0.2775
    # 81 of 263 (Newcombe 1998, table I example 1: 0.2553 to 0.3662)
    low, high = wai.wilson_interval(81, 263)
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)


def test_wilson_is_vectorised_and_takes_a_confidence() -> None:
    successes = np.array([0, 3, 47])
    n = np.array([10, 10, 120])
    low, high = wai.wilson_interval(successes, n)
    for i in range(3):
        assert (low[i], high[i]) == pytest.approx(wai.wilson_interval(int(successes[i]), int(n[i])))
    narrow = wai.wilson_interval(30, 100, confidence=0.5)
    wide = wai.wilson_interval(30, 100, confidence=0.99)
    assert wide[0] < narrow[0] < 0.3 < narrow[1] < wide[1]


def test_wilson_with_no_trials_says_nothing() -> None:
    low, high = wai.wilson_interval(0, 0)
    assert math.isnan(low) and math.isnan(high)


@pytest.mark.parametrize(
    ("successes", "n", "message"),
    [(5, 3, "between 0 and n"), (-1, 3, "between 0 and n"), (1, 2.5, "whole number")],
)
def test_wilson_rejects_impossible_counts(successes: float, n: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wai.wilson_interval(successes, n)


def test_wilson_rejects_a_bad_confidence() -> None:
    with pytest.raises(ValueError, match="confidence"):
        wai.wilson_interval(1, 2, confidence=95)


def test_wilson_covers_the_truth_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(7)
    n, p = 60, 0.3
    successes = rng.binomial(n, p, size=4000)
    low, high = wai.wilson_interval(successes, np.full_like(successes, n))
    coverage = float(((low <= p) & (p <= high)).mean())
    assert 0.93 <= coverage <= 0.97


def test_kappa_textbook_example() -> None:
    # 50 proposals, two readers: yes/yes 20, yes/no 5, no/yes 10, no/no 15.
    # p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5, kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
    assert wai.cohen_kappa([[20, 5], [10, 15]]) == pytest.approx(0.4)
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert wai.cohen_kappa(a, b) == pytest.approx(0.4)


def test_kappa_three_categories_worked_by_hand() -> None:
    # 100 subjects. Row totals 50, 30, 20; column totals 60, 30, 10.
    # p_o = (44 + 20 + 6) / 100 = 0.70; p_e = (50*60 + 30*30 + 20*10) / 100^2 = 0.41;
    # kappa = (0.70 - 0.41) / (1 - 0.41) = 0.29 / 0.59.
    table = [[44, 5, 1], [7, 20, 3], [9, 5, 6]]
    assert wai.cohen_kappa(table) == pytest.approx(0.29 / 0.59)


def test_kappa_perfect_chance_and_undefined() -> None:
    assert wai.cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert wai.cohen_kappa([[10, 10], [10, 10]]) == pytest.approx(0.0)
    assert math.isnan(wai.cohen_kappa([1, 1, 1], [1, 1, 1]))


def test_kappa_bad_input() -> None:
    with pytest.raises(ValueError, match="same items"):
        wai.cohen_kappa([1, 0], [1])
    with pytest.raises(ValueError, match="square"):
        wai.cohen_kappa([[1, 2, 3], [4, 5, 6]])
