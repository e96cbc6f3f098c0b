"""Coverage: on synthetic rows with a known true rate, 95% intervals cover the truth 93-97% of
the time. Each simulation draws a few hundred runs; the tolerance is what that many runs allow."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import whileai as wai

RUNS = 600


def simulated_rows(rng: np.random.Generator, rates: np.ndarray, k: int) -> list[dict[str, Any]]:
    passes = rng.random((rates.size, k)) < rates[:, None]
    return [
        {"task_id": f"t{i}", "prompt": f"q{i}", "final_text": "a", "reward": int(p)}
        for i in range(rates.size)
        for p in passes[i]
    ]


@pytest.mark.slow
def test_pass_at_1_interval_covers_the_true_rate() -> None:
    # A fresh draw of 150 tasks from a population of difficulties each run; the truth is the
    # population's mean rate, which the interval over tasks is about.
    rng = np.random.default_rng(2024)
    a, b = 2.0, 3.0
    truth = a / (a + b)
    covered = 0
    for _ in range(RUNS):
        rates = rng.beta(a, b, size=150)
        ci = wai.pass_at(simulated_rows(rng, rates, 4), n_resamples=2000, seed=rng).ci95
        assert ci is not None
        covered += ci[0] <= truth <= ci[1]
    print(f"coverage {covered / RUNS:.3f}")
    assert 0.93 <= covered / RUNS <= 0.97, covered / RUNS


@pytest.mark.slow
def test_paired_compare_interval_covers_the_true_delta() -> None:
    rng = np.random.default_rng(7)
    shift = 0.08
    covered = 0
    for _ in range(RUNS):
        rates = rng.uniform(0.1, 0.8, size=150)
        a = simulated_rows(rng, rates, 4)
        b = simulated_rows(rng, rates + shift, 4)
        ci = wai.compare(a, b, n_resamples=2000, seed=rng).ci95
        assert ci is not None
        covered += ci[0] <= shift <= ci[1]
    print(f"coverage {covered / RUNS:.3f}")
    assert 0.93 <= covered / RUNS <= 0.97, covered / RUNS
