"""logprob_report, mean_kl, calibrate and staleness_report on rows with known values."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import whileai as wai
from whileai.measure.logprobs import task_correlation_ci


def turn(logprob: float | None, n_tokens: int | None, **extra: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"role": "assistant", "content": "..."}
    if logprob is not None:
        step["logprob"] = logprob
    if n_tokens is not None:
        step["n_tokens"] = n_tokens
    return {**step, **extra}


def row(task: str, reward: float | None = 1.0, **extra: Any) -> dict[str, Any]:
    return {
        "task_id": task,
        "prompt": f"prompt {task}",
        "final_text": "answer",
        "reward": reward,
        **extra,
    }


def test_capture_share_counts_agent_turns() -> None:
    rows = [
        row("a", steps=[{"role": "user", "content": "hi"}, turn(-3.0, 6), turn(-1.0, 2)]),
        row("b", steps=[turn(None, None), turn(-2.0, 4, truncated=True)]),
        row("c", logprob=-5.0, n_tokens=10),  # no steps: the row is one turn
        row("d"),
    ]
    report = wai.logprob_report(rows)
    assert (report.n_turns, report.n_turns_captured) == (6, 4)
    assert report.captured_share == pytest.approx(4 / 6)
    # a sums its steps (-4 over 8 tokens); b lacks a step so has no row figure; c has totals
    assert report.n_rows_with_logprob == 2
    assert report.mean_logprob_per_token == pytest.approx((-0.5 + -0.5) / 2)
    assert report.n_truncated_turns == 1
    assert any("2 agent turns lack logprobs" in n for n in report.notes)


def correlated_rows(strength: float, n_tasks: int = 60, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        for _ in range(3):
            confidence = rng.normal()
            passed = rng.random() < 1 / (1 + math.exp(-strength * confidence))
            n = int(rng.integers(5, 40))
            rows.append(
                row(
                    f"t{t}",
                    float(passed),
                    logprob=min(0.0, -1.0 + 0.3 * confidence) * n,
                    n_tokens=n,
                )
            )
    return rows


def test_reward_tracking_confidence_is_found_and_reported() -> None:
    rows = correlated_rows(strength=4.0)
    report = wai.logprob_report(rows)
    x = np.array([r["logprob"] / r["n_tokens"] for r in rows])
    y = np.array([r["reward"] for r in rows])
    assert report.reward_correlation == pytest.approx(np.corrcoef(x, y)[0, 1])
    low, high = report.reward_correlation_ci95
    assert 0 < low < report.reward_correlation < high
    assert report.tracks_confidence is True
    assert any("should not" in n for n in report.notes)


def test_independent_reward_does_not_track_confidence() -> None:
    report = wai.logprob_report(correlated_rows(strength=0.0, seed=2))
    low, high = report.reward_correlation_ci95
    assert low < 0 < high and report.tracks_confidence is False


def test_correlation_interval_matches_a_plain_jackknife() -> None:
    from scipy import stats

    rows = correlated_rows(strength=2.0, n_tasks=40, seed=5)
    x = np.array([r["logprob"] / r["n_tokens"] for r in rows])
    y = np.array([r["reward"] for r in rows])
    task = np.repeat(np.arange(40), 3)
    # The same interval, the slow way: drop each task's rows, recompute r, take Fisher's z.
    z = np.array([np.arctanh(np.corrcoef(x[task != t], y[task != t])[0, 1]) for t in range(40)])
    se = np.sqrt(39 / 40 * ((z - z.mean()) ** 2).sum())
    centre = np.arctanh(np.corrcoef(x, y)[0, 1])
    half = stats.t.ppf(0.975, 39) * se
    assert task_correlation_ci(x, y, task, 40) == pytest.approx(
        (np.tanh(centre - half), np.tanh(centre + half))
    )


def test_correlation_interval_covers_the_truth() -> None:
    # Rows of a task share a random effect, so rows are not independent; the interval over
    # tasks must still cover the true correlation about 95% of the time.
    rng = np.random.default_rng(1)
    c, d, f = 0.5, 0.2, 1.0
    truth = (c + d) / np.sqrt(2 * (c * c + d * d + f * f))
    n_tasks, repeats, runs = 30, 3, 1000
    task = np.repeat(np.arange(n_tasks), repeats)
    covered = 0
    for _ in range(runs):
        shared = np.repeat(rng.normal(size=n_tasks), repeats)
        noise_x, noise_y = rng.normal(size=(2, n_tasks * repeats))
        x = shared + noise_x
        y = c * shared + d * noise_x + f * noise_y
        interval = task_correlation_ci(x, y, task, n_tasks)
        assert interval is not None
        covered += interval[0] <= truth <= interval[1]
    assert 0.93 <= covered / runs <= 0.97


def test_mean_kl_known_values() -> None:
    rows = [
        # task a: KL per token 0.1 and 0.3 -> 0.2
        row("a", logprob=-10.0, ref_logprob=-11.0, n_tokens=10),
        row("a", logprob=-4.0, ref_logprob=-10.0, n_tokens=20),
        # task b: 0.05
        row("b", logprob=-2.0, ref_logprob=-3.0, n_tokens=20),
        # task c: -0.1 (a single sample can be negative)
        row("c", logprob=-5.0, ref_logprob=-4.0, n_tokens=10),
        row("d", logprob=-5.0),  # no reference
    ]
    report = wai.mean_kl(rows, n_resamples=2000)
    assert report.per_task == pytest.approx({"a": 0.2, "b": 0.05, "c": -0.1})
    assert report.mean_kl == pytest.approx((0.2 + 0.05 - 0.1) / 3)
    assert report.token_weighted == pytest.approx((1 + 6 + 1 - 1) / 60)
    assert report.ci95 is not None and report.ci95[0] <= report.mean_kl <= report.ci95[1]
    assert report.skipped == {"no ref_logprob": 1}
    assert (report.n_rows, report.n_tasks) == (4, 3)
    text = str(report)
    assert "mean KL per token" in text and "1 row skipped: no ref_logprob" in text


def test_mean_kl_sums_steps_and_takes_another_reference_field() -> None:
    rows = [
        row("a", steps=[turn(-2.0, 5, ref_logprob=-3.0), turn(-1.0, 5, ref_logprob=-2.0)]),
        row("b", logprob=-1.0, base_lp=-2.0, n_tokens=4),
    ]
    report = wai.mean_kl(rows[:1])
    assert report.mean_kl == pytest.approx(0.2)
    assert report.ci95 is None and any("point estimate" in n for n in report.notes)
    assert wai.mean_kl(rows[1:], ref="base_lp").mean_kl == pytest.approx(0.25)


def test_mean_kl_interval_is_over_tasks_and_over_situations_when_phrasings_share_one() -> None:
    from whileai.measure.intervals import skew_corrected_t_interval

    def kl_row(task: str, kl: float, situation: str | None = None) -> dict[str, Any]:
        lineage = None if situation is None else {"situation": situation, "phrasing": 0}
        extra = {} if lineage is None else {"lineage": lineage}
        return row(task, logprob=-10.0 + 10 * kl, ref_logprob=-10.0, n_tokens=10, **extra)

    per_task = {"a": 0.02, "b": 0.05, "c": 0.01, "d": 0.30, "e": 0.04}
    report = wai.mean_kl([kl_row(t, v) for t, v in per_task.items()])
    assert report.ci95 == pytest.approx(skew_corrected_t_interval(list(per_task.values())))
    assert any("5 tasks, fewer than 10" in note for note in report.notes)
    # two phrasings of each of three situations: three units, each the mean of its phrasings
    phrased = [
        kl_row(f"{s}-p{p}", v, situation=s)
        for s, values in {"s1": (0.02, 0.04), "s2": (0.10, 0.30), "s3": (0.01, 0.01)}.items()
        for p, v in enumerate(values)
    ]
    report = wai.mean_kl(phrased)
    assert report.ci95 == pytest.approx(skew_corrected_t_interval([0.03, 0.2, 0.01]))
    assert any("3 situations, fewer than 10" in note for note in report.notes)


@pytest.mark.slow
def test_mean_kl_covers_the_true_kl_from_three_tasks() -> None:
    """Task KLs drawn skewed (gamma, mean 0.05 nats a token), four rollouts a task each
    giving a noisy single-sample estimate (some negative). The percentile bootstrap this
    replaced covered 70% at 3 tasks, 79% at 5 and 85% at 10 on this population."""
    rng = np.random.default_rng(9)
    runs = 1500
    for tasks in (3, 5, 10, 30):
        covered = 0
        for _ in range(runs):
            truth = rng.gamma(0.8, 0.05 / 0.8, size=tasks)
            estimates = truth[:, None] + rng.normal(0, 0.03, size=(tasks, 4))
            rows = [
                row(f"t{t}", logprob=-20.0 + 20 * k, ref_logprob=-20.0, n_tokens=20)
                for t in range(tasks)
                for k in estimates[t]
            ]
            low, high = wai.mean_kl(rows).ci95  # type: ignore[misc]
            covered += low <= 0.05 <= high
        print(f"{tasks} tasks: mean_kl covers {covered / runs:.3f}")
        assert covered / runs >= (0.89 if tasks < 30 else 0.93)


def test_mean_kl_with_nothing_to_read_says_what_is_missing() -> None:
    with pytest.raises(ValueError, match="no row carries logprob, ref_logprob and n_tokens"):
        wai.mean_kl([row("a", logprob=-1.0, n_tokens=2)])


def test_calibrate_writes_each_rows_kl_and_leaves_the_input_alone() -> None:
    rows = [
        row("a", logprob=-10.0, ref_logprob=-11.0, n_tokens=10, calibration={"ece": 0.1}),
        row("b", logprob=-2.0, ref_logprob=-3.0, n_tokens=20),
    ]
    out = wai.calibrate(rows, ref="ref_logprob")
    assert out[0]["calibration"] == {"ece": 0.1, "mean_kl": pytest.approx(0.1)}
    assert out[1]["calibration"] == {"mean_kl": pytest.approx(0.05)}
    assert rows[0]["calibration"] == {"ece": 0.1} and "calibration" not in rows[1]
    assert out[1]["task_id"] == "b"


def test_calibrate_names_the_row_and_field_it_cannot_score() -> None:
    rows = [
        row("a", logprob=-1.0, ref_logprob=-2.0, n_tokens=1),
        row("b", logprob=-1.0, n_tokens=3),
    ]
    with pytest.raises(wai.RowError, match=r"row 1: no ref_logprob"):
        wai.calibrate(rows)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"logprob": 2.0, "n_tokens": 3},
            r"row 0: logprob is 2.0; a summed log-probability is <= 0",
        ),
        ({"logprob": -2.0, "n_tokens": 0}, r"row 0: n_tokens must be a whole number >= 1"),
        ({"logprob": "low", "n_tokens": 3}, r"row 0: logprob must be a finite number"),
        ({"steps": "none"}, r"row 0: steps must be a list"),
    ],
)
def test_bad_logprob_fields_name_row_and_field(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(wai.RowError, match=message):
        wai.logprob_report([row("a", **extra)])


def test_staleness_report_sorts_rows_by_policy() -> None:
    rows = [
        row("a", model_version="qwen-7b@v3", logprob=-1.0, n_tokens=2),
        row("b", model_version="qwen-7b@v2", logprob=-1.0, n_tokens=2),  # stale, usable
        row("c", model_version="qwen-7b@v2", steps=[turn(-1.0, 2), turn(-2.0, 3)]),  # usable
        row("d", model_version="qwen-7b@v1"),  # stale, no logprobs
        row("e"),  # unversioned
    ]
    report = wai.staleness_report(rows, base_model="qwen-7b@v3")
    assert (report.n_current, report.n_stale, report.n_usable, report.n_unusable) == (1, 3, 2, 1)
    assert report.stale == [1, 2, 3] and report.usable == [1, 2] and report.unusable == [3]
    assert report.unversioned == [4]
    assert report.by_version["qwen-7b@v2"] == {"rows": 2, "usable": 2}
    assert report.stale_share == pytest.approx(4 / 5)
    text = str(report)
    assert "qwen-7b@v3 (base)" in text and "1 stale rows carry no logprob" in text
    with pytest.raises(ValueError, match="base_model"):
        wai.staleness_report(rows, base_model="")


def test_logprob_report_prints_readably() -> None:
    text = str(wai.logprob_report(correlated_rows(strength=1.0, n_tasks=10)))
    assert text.splitlines()[0] == "logprob_report"
    assert "agent turns with logprobs" in text and "corr(reward, logprob/token)" in text


def test_logprobs_kept_as_row_totals_count_as_captured_and_agree_with_staleness() -> None:
    rows = [
        {
            "task_id": f"t{i}",
            "prompt": "p",
            "final_text": "a",
            "reward": float(i % 2),
            "model_version": "old",
            "logprob": -3.0 - i,
            "n_tokens": 6,
            "truncated": i == 0,
            "steps": [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}],
        }
        for i in range(4)
    ]
    report = wai.logprob_report(rows)
    # every turn's logprob is in the total
    assert report.n_turns_captured == 8 and report.n_turns == 8
    assert report.captured_share == 1.0 and report.n_truncated_turns == 1
    stale = wai.staleness_report(rows, base_model="new")
    assert stale.n_usable == 4 == report.n_rows_with_logprob
