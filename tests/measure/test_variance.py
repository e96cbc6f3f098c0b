"""eval_variance, noise_band and holdout_size: the floor, its band, and the size of the set."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

import whileai as wai


def run_rows(rewards: dict[str, list[float]], marker: float | None = None) -> list[dict[str, Any]]:
    rows = []
    for task, values in rewards.items():
        for r in values:
            row: dict[str, Any] = {"task_id": task, "prompt": task, "final_text": "a", "reward": r}
            if marker is not None:
                row["markers"] = {"chars": marker}
            rows.append(row)
    return rows


def test_run_std_is_the_std_of_the_per_run_means() -> None:
    passes = [
        run_rows({"a": [1, 0], "b": [1, 1], "c": [0, 0]}, marker=10),
        run_rows({"a": [1, 1], "b": [1, 1], "c": [0, 0]}, marker=12),
        run_rows({"a": [0, 0], "b": [1, 0], "c": [0, 0]}, marker=11),
    ]
    floor = wai.eval_variance(*passes)
    means = [(0.5 + 1 + 0) / 3, (1 + 1 + 0) / 3, (0 + 0.5 + 0) / 3]
    assert floor.run_means == pytest.approx(means)
    assert floor["run_std"] == pytest.approx(np.std(means, ddof=1))
    assert floor["n_runs"] == 3 and floor.floor_met
    assert floor.band == pytest.approx(stats.t.ppf(0.975, 2) * math.sqrt(2) * floor.run_std)
    assert floor.metrics["chars"].run_std == pytest.approx(1.0)
    text = str(floor)
    assert "reward" in text and "chars" in text and "noise band" in text


def test_below_three_runs_the_report_says_so_instead_of_a_bare_number() -> None:
    two = wai.eval_variance(run_rows({"a": [1, 0]}), run_rows({"a": [1, 1]}))
    assert two.n_runs == 2 and not two.floor_met
    assert two.run_std is None and two.band is None  # in code too, not only in the printout
    assert "not worth reading" in str(two)
    assert any("three re-runs are the fewest" in n for n in two.notes)
    one = wai.eval_variance(run_rows({"a": [1, 0]}))
    assert one.run_std is None and one.band is None
    assert "no std from 1 run" in str(one)
    with pytest.raises(ValueError, match="needs the runs"):
        wai.eval_variance()


def test_runs_are_compared_on_the_tasks_they_all_measured() -> None:
    floor = wai.eval_variance(
        run_rows({"a": [1], "b": [0], "extra": [1]}),
        run_rows({"a": [1], "b": [1]}),
        run_rows({"a": [0], "b": [1]}),
    )
    assert floor.n_tasks == 2
    assert floor.run_means == pytest.approx([0.5, 1.0, 0.5])
    assert any("left out" in n for n in floor.notes)


def test_task_run_std_is_the_tasks_own_spread_and_estimates_the_run_variance() -> None:
    passes = [
        run_rows({"a": [1], "b": [1], "c": [0], "d": [0]}),
        run_rows({"a": [0], "b": [1], "c": [1], "d": [0]}),
        run_rows({"a": [1], "b": [1], "c": [0], "d": [0]}),
    ]
    floor = wai.eval_variance(*passes)
    grid = np.array([[1, 0, 1], [1, 1, 1], [0, 1, 0], [0, 0, 0]], dtype=float)
    expected = math.sqrt(grid.var(axis=1, ddof=1).sum()) / 4
    assert floor.task_run_std == pytest.approx(expected)
    assert floor.metrics["reward"].n_tasks_moved == 2

    # On average its square is the variance of a run mean (unbiased), which the std of three
    # run means estimates with two degrees of freedom only.
    rng = np.random.default_rng(7)
    p = rng.uniform(0, 1, 60)
    squares, means = [], []
    for _ in range(400):
        runs = rng.random((3, 60)) < p
        rows = [run_rows({f"t{i}": [float(r[i])] for i in range(60)}) for r in runs]
        report = wai.eval_variance(*rows)
        squares.append(report.task_run_std**2)
        means.append(runs.mean(axis=1))
    true_var = float((p * (1 - p)).sum() / 60**2)
    assert np.mean(squares) == pytest.approx(true_var, rel=0.05)
    # and it moves far less from one set of runs to the next than the three-run std does
    run_stds = [np.std(m, ddof=1) for m in means]
    assert np.std(np.sqrt(squares)) < np.std(run_stds) / 3


def test_run_means_that_agree_by_chance_are_not_called_identical_completions() -> None:
    passes = [
        run_rows({"a": [1], "b": [0], "c": [0], "d": [0]}),
        run_rows({"a": [0], "b": [1], "c": [0], "d": [0]}),
        run_rows({"a": [0], "b": [0], "c": [1], "d": [0]}),
    ]
    floor = wai.eval_variance(*passes)
    assert floor.run_std == 0.0
    text = str(floor)
    assert "met by chance" in text and "3 tasks scored differently" in text
    assert "the same completions" not in text
    assert floor.task_run_std == pytest.approx(math.sqrt(3 * (1 / 3)) / 4)

    same = wai.eval_variance(*[run_rows({"a": [1], "b": [0]})] * 3)
    assert same.task_run_std == 0.0
    assert "scored the same completions the same way" in str(same)


def test_noise_band_from_the_number_alone() -> None:
    band = wai.noise_band(0.02, df=2)
    assert band.band == pytest.approx(stats.t.ppf(0.975, 2) * math.sqrt(2) * 0.02)
    assert (band.low, band.high) == (-band.band, band.band)
    assert "re-running the eval" in str(band)
    assert any("2 runs" in n for n in wai.noise_band(0.02, df=1).notes)
    assert wai.noise_band(0.02).band == pytest.approx(1.959964 * math.sqrt(2) * 0.02)
    with pytest.raises(ValueError, match="df must be a positive integer"):
        wai.noise_band(0.02, df=0)
    with pytest.raises(ValueError, match="at least two runs"):
        wai.noise_band(None, df=2)  # type: ignore[arg-type]


def test_holdout_size_is_the_paired_t_test_size() -> None:
    from whileai.measure.variance import _paired_t_size

    # the textbook sizes of a two-sided paired t-test at alpha 0.05 (Cohen 1988; G*Power):
    # a standardized effect of 0.5 at power 0.8 needs 34 pairs, 0.8 needs 15, 0.2 needs 199,
    # and 0.5 at power 0.9, 44
    assert [_paired_t_size(d, 1.0, 0.05, 0.8) for d in (0.5, 0.8, 0.2)] == [34, 15, 199]
    assert _paired_t_size(0.5, 1.0, 0.05, 0.9) == 44
    report = wai.holdout_size(0.10, base=0.45, k=4)
    pq, pq_after = 0.45 * 0.55, 0.55 * 0.45
    var_d = (pq + pq_after) / 4
    assert report.n_tasks == _paired_t_size(0.10, var_d, 0.05, 0.8)
    # a few above the normal approximation, which undersizes a t-test
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert 0 < report.n_tasks - math.ceil(z**2 * var_d / 0.10**2) <= 3
    assert report.task_std == pytest.approx(math.sqrt(pq / 4))
    assert report["n_tasks"] == report.n_tasks
    text = str(report)
    assert "paired tasks needed" in text and "assumes:" in text and "task_std" in text
    # More samples per task, fewer tasks; a smaller effect, many more.
    assert wai.holdout_size(0.10, base=0.45, k=8).n_tasks < report.n_tasks
    assert wai.holdout_size(0.05, base=0.45, k=4).n_tasks > 3 * report.n_tasks


def test_holdout_size_has_the_power_it_promises() -> None:
    # Simulate the paired experiment it sizes: n tasks, k samples per arm, a two-sided paired
    # t-test at alpha (what compare's interval is). The share of runs that detect the effect
    # is the power.
    report = wai.holdout_size(0.10, base=0.45, k=4)
    rng = np.random.default_rng(0)
    reps, n, k = 4000, report.n_tasks, 4
    a = rng.binomial(k, 0.45, size=(reps, n)) / k
    b = rng.binomial(k, 0.55, size=(reps, n)) / k
    d = b - a
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    power = float((np.abs(t) > stats.t.ppf(0.975, n - 1)).mean())
    assert 0.77 <= power <= 0.84


def rows_of_passes(passes: np.ndarray) -> list[dict[str, object]]:
    return [
        {"task_id": f"t{i}", "prompt": f"q{i}", "final_text": "a", "reward": float(v)}
        for i in range(passes.shape[0])
        for v in passes[i]
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("effect", "base", "k"), [(0.3, 0.4, 4), (0.4, 0.3, 1), (0.2, 0.5, 8)])
def test_compare_finds_the_effect_as_often_as_holdout_size_promises(
    effect: float, base: float, k: int
) -> None:
    """Sized for a few dozen tasks, where the normal approximation fell short: compare found
    these effects in 69%, 75% and 74% of runs at its sizes (10, 21 and 12 tasks)."""
    n = wai.holdout_size(effect, base=base, k=k).n_tasks
    rng = np.random.default_rng(int(effect * 100) + k)
    runs = 1200
    gains = 0
    for _ in range(runs):
        a = rng.random((n, k)) < base
        b = rng.random((n, k)) < base + effect
        gains += wai.compare(rows_of_passes(a), rows_of_passes(b)).verdict == "gain"
    print(f"effect {effect} at base {base}, k={k}: {n} tasks, a gain in {gains / runs:.3f}")
    assert 0.76 <= gains / runs <= 0.86


def test_holdout_size_before_rows_measures_the_spread() -> None:
    rng = np.random.default_rng(1)
    # Mostly easy or hopeless tasks: the real per-task spread is far below base (1 - base).
    true_rates = rng.beta(0.3, 0.3, size=400)
    passes = rng.binomial(8, true_rates)
    before = run_rows({f"t{i}": [1] * c + [0] * (8 - c) for i, c in enumerate(passes)})
    measured = wai.holdout_size(0.05, before=before)
    assert measured.k == 8
    assert measured.base == pytest.approx(passes.mean() / 8)
    expected_pq = float(np.mean(true_rates * (1 - true_rates)))
    assert measured.task_std == pytest.approx(math.sqrt(expected_pq / 8), rel=0.1)
    assumed = wai.holdout_size(0.05, base=measured.base, k=8)
    assert measured.n_tasks < assumed.n_tasks
    assert "from 400 tasks before" in str(measured)


def test_holdout_size_rejects_what_it_cannot_size() -> None:
    with pytest.raises(ValueError, match=r"base rate \(base=0\.45\) or an earlier run's rows"):
        wai.holdout_size(0.1)
    with pytest.raises(ValueError, match="one of them"):
        wai.holdout_size(0.1, base=0.4, before=run_rows({"a": [1, 0]}))
    with pytest.raises(ValueError, match="effect must be non-zero"):
        wai.holdout_size(0.0, base=0.4)
    with pytest.raises(ValueError, match="outside"):
        wai.holdout_size(0.2, base=0.9)
    with pytest.raises(ValueError, match=r"power must lie in \(0, 1\)"):
        wai.holdout_size(0.1, base=0.4, power=80)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        wai.holdout_size(0.1, base=0.4, k=0)
    with pytest.raises(ValueError, match="no row has a binary reward"):
        wai.holdout_size(0.1, before=run_rows({"a": [0.5]}))


def test_a_bad_row_names_its_run() -> None:
    bad = [{"task_id": "a", "prompt": "a", "final_text": 3, "reward": 1}]
    with pytest.raises(wai.RowError, match="run 2: row 0: final_text must be a string"):
        wai.eval_variance(run_rows({"a": [1]}), bad, run_rows({"a": [0]}))
    with pytest.raises(wai.RowError, match="before: row 0: final_text must be a string"):
        wai.holdout_size(0.1, before=bad)


def test_a_noise_floor_of_zero_is_flagged_wherever_it_is_used() -> None:
    band = wai.noise_band(0.0, df=2)
    assert band.band == 0.0
    assert any("run_std is 0, so the band is +/-0" in n for n in band.notes)
    assert "identical completions" in str(band)
    rows = [
        {"task_id": f"t{i}", "prompt": "p", "final_text": "a", "reward": i % 2} for i in range(8)
    ]
    delta = wai.compare(rows, rows, run_std=0.0, run_std_runs=3)
    assert any("run_std is 0" in n for n in delta.notes)
    assert not any("run_std is 0" in n for n in wai.compare(rows, rows, run_std=0.01).notes)
