"""pass_at and group_signal: the numbers against their references, and what they leave out."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import whileai as wai
from whileai.measure.pass_at import pass_at_k_estimate, pass_pow_k_estimate


def grouped(scores: list[list[Any]], **extra: Any) -> list[dict[str, Any]]:
    """Rows from per-task lists of rewards, the shape a user's own scores come in."""
    return [
        {
            "task_id": f"task-{i}",
            "prompt": f"question {i}",
            "final_text": "answer",
            "reward": r,
            **extra,
        }
        for i, group in enumerate(scores)
        for r in group
    ]


def humaneval_pass_at_k(n: int, c: int, k: int) -> float:
    """The reference estimator from Chen et al. 2021 (arXiv:2107.03374), figure 3: the
    numerically stable product form."""
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def all_k_pass(n: int, c: int, k: int) -> float:
    """pass^k by counting: the chance k draws without replacement are all passes."""
    return math.comb(c, k) / math.comb(n, k)


@pytest.mark.parametrize("n", [4, 8, 10, 37, 200])
def test_pass_at_k_matches_the_humaneval_estimator(n: int) -> None:
    for k in sorted({1, 2, 4, min(n, 10), n}):
        for c in range(n + 1):
            assert pass_at_k_estimate(n, c, k) == pytest.approx(
                humaneval_pass_at_k(n, c, k), abs=1e-9
            ), (n, c, k)
            assert pass_pow_k_estimate(n, c, k) == pytest.approx(
                all_k_pass(n, c, k), abs=1e-9, rel=1e-9
            ), (n, c, k)


def test_report_figures_are_means_of_per_group_estimates() -> None:
    rng = np.random.default_rng(11)
    passes = rng.binomial(10, rng.random(60))
    rows = grouped([[1] * c + [0] * (10 - c) for c in passes])
    report = wai.pass_at(rows, k=5)
    assert report.k == 5
    assert report.pass_at_1 == pytest.approx(float(np.mean(passes / 10)))
    assert report.pass_at_k == pytest.approx(
        np.mean([humaneval_pass_at_k(10, c, 5) for c in passes])
    )
    assert report.pass_pow_k == pytest.approx(np.mean([all_k_pass(10, c, 5) for c in passes]))
    assert report.headroom == pytest.approx(report.pass_at_k - report.pass_at_1)
    for lo_hi, point in [
        (report.ci95, report.pass_at_1),
        (report.pass_pow_k_ci95, report.pass_pow_k),
        (report.pass_at_k_ci95, report.pass_at_k),
    ]:
        assert lo_hi is not None and lo_hi[0] < point < lo_hi[1]


def test_pass_at_1_interval_agrees_with_scipy_bootstrap() -> None:
    rng = np.random.default_rng(5)
    passes = rng.binomial(8, rng.beta(2, 2, size=300))
    rows = grouped([[1] * c + [0] * (8 - c) for c in passes])
    ours = wai.pass_at(rows, n_resamples=20_000, seed=3).ci95
    rates = passes / 8
    theirs = stats.bootstrap(
        (rates,), np.mean, method="percentile", n_resamples=20_000, random_state=4
    ).confidence_interval
    assert ours is not None
    # Monte Carlo error of a 2.5% quantile with 20,000 resamples is well under 0.005 here.
    assert ours[0] == pytest.approx(theirs.low, abs=0.006)
    assert ours[1] == pytest.approx(theirs.high, abs=0.006)


def test_seed_scores_give_the_numbers_by_hand() -> None:
    scores = [[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1], [1, 0, 1, 1]]
    report = wai.pass_at(grouped(scores))
    assert report.pass_at_1 == pytest.approx((0.75 + 0.25 + 1 + 0.75) / 4)
    assert report.k == 4
    assert report.pass_pow_k == pytest.approx(0.25)  # only the all-pass task
    assert report.pass_at_k == pytest.approx(1.0)  # every task passed at least once
    assert report["ci95"] == report.ci95
    text = str(report)
    assert "pass@1" in text and "pass^4" in text and "pass@4" in text and "headroom" in text


def test_per_task_is_keyed_by_task_so_index_zero_is_a_key_error() -> None:
    report = wai.pass_at(grouped([[1, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]]))
    with pytest.raises(KeyError):
        report.per_task[0]
    assert report.per_task == {"task-0": 0.25, "task-1": 1.0, "task-2": 0.0}
    assert sum(report.per_task.values()) / 3 == pytest.approx(report.pass_at_1)


def test_task_key_prefers_scenario_id_then_task_id_then_prompt() -> None:
    rows = [
        {"scenario_id": "s", "task_id": "t", "prompt": "p", "final_text": "", "reward": 1},
        {"prompt": "bare prompt", "final_text": "", "reward": 0},
    ]
    assert set(wai.pass_at(rows).per_task) == {"s", "bare prompt"}


def test_below_four_repeats_the_k_way_numbers_are_none_with_a_note() -> None:
    report = wai.pass_at(grouped([[1, 0, 1], [0, 0, 1], [1, 1, 1]]))
    assert report.pass_at_1 == pytest.approx((2 / 3 + 1 / 3 + 1) / 3)
    assert report.pass_pow_k is None and report.pass_at_k is None and report.headroom is None
    assert report.pass_pow_k_ci95 is None and report.pass_at_k_ci95 is None
    assert any("groups of at least 4 attempts" in n for n in report.notes)
    assert "note:" in str(report)


def test_one_task_gives_no_interval_and_few_a_wide_one_that_says_why() -> None:
    one = wai.pass_at(grouped([[1, 0, 1, 1]]))
    assert one.pass_at_1 == pytest.approx(0.75)
    assert one.ci95 is None and one.pass_pow_k_ci95 is None and one.pass_at_k_ci95 is None
    assert any("interval over tasks needs two or more" in n for n in one.notes)
    assert "no interval" in str(one)
    two = wai.pass_at(grouped([[1, 0, 1, 1], [0, 0, 1, 0]]))
    assert two.pass_at_1 == pytest.approx(0.5)
    assert two.ci95 is not None and two.pass_at_k_ci95 is not None
    low, high = two.ci95
    assert low < 0.2 and high > 0.8  # two tasks say little about the population
    assert any("2 tasks, fewer than 10: the interval is wide" in n for n in two.notes)


def test_default_k_is_the_smallest_group_and_short_groups_are_named() -> None:
    # rl allocation: groups that split got more attempts; one task lost rows and has two left.
    scores = [[1, 0] * 3, [1, 0, 1, 1, 0, 0, 1, 1], [1, 1, 1, 0, 0], [0, 1]]
    report = wai.pass_at(grouped(scores))
    assert report.k == 5
    assert report.left_out == ["task-3"]
    assert report.n_k_groups == 3
    assert any("left out" in n and "'task-3'" in n for n in report.notes)
    assert report.pass_at_k == pytest.approx(
        np.mean([humaneval_pass_at_k(6, 3, 5), humaneval_pass_at_k(8, 5, 5), 1.0])
    )


def test_explicit_k_leaves_out_smaller_groups() -> None:
    report = wai.pass_at(grouped([[1, 0] * 4, [1, 0] * 2, [1, 1, 0, 0, 0, 0], [0, 1] * 4]), k=6)
    assert report.k == 6
    assert report.left_out == ["task-1"]


def test_fixed_repeat_policy_takes_the_k_that_leaves_the_fewest_groups_out() -> None:
    scores = [[1, 0] * 4, [1, 0] * 4, [1, 1, 1, 0, 0], [0, 1] * 4]
    fixed = wai.pass_at(grouped(scores), repeat_policy="fixed")
    assert fixed.k == 5  # 8, the size most groups share, would leave task-2 out
    assert fixed.left_out == []
    assert any("differ in size" in n for n in fixed.notes)
    assert "k=5: the group size that leaves the fewest groups out (0 of 4)" in fixed.notes
    tiny = wai.pass_at(grouped([[1, 0, 1], [1, 0, 1, 1], [0, 1, 1, 0, 1]]), repeat_policy="fixed")
    assert tiny.k == 4 and tiny.left_out == ["task-0"]  # below MIN_REPEATS, out either way
    assert wai.pass_at(grouped(scores)).k == 5
    with pytest.raises(ValueError, match="repeat_policy"):
        wai.pass_at(grouped(scores), repeat_policy="sometimes")
    with pytest.raises(ValueError, match="k must be a positive integer"):
        wai.pass_at(grouped(scores), k=0)


def test_partial_and_unjudged_rows_are_skipped_and_counted() -> None:
    rows = grouped([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1]])
    rows.append({"task_id": "task-0", "prompt": "q", "final_text": "a", "reward": 0.5})
    rows.append({"task_id": "task-1", "prompt": "q", "final_text": "a", "reward": None})
    rows.append(
        {
            "task_id": "task-2",
            "prompt": "q",
            "final_text": "a",
            "reward": 0.0,
            "judge_status": "error",
        }
    )
    rows.append({"task_id": "only-partial", "prompt": "q", "final_text": "a", "reward": 0.7})
    report = wai.pass_at(rows)
    assert (report.counts.partial, report.counts.unjudged, report.counts.binary) == (2, 2, 12)
    assert report.pass_at_1 == pytest.approx((0.75 + 0.25 + 1.0) / 3)
    assert report.no_binary == ["only-partial"]
    assert "only-partial" not in report.per_task
    text = str(report)
    assert "2 partial and 2 unjudged" in text and "'only-partial'" in text


def test_bad_rows_are_errors_that_name_the_row() -> None:
    good = {"task_id": "t", "prompt": "p", "final_text": "a", "reward": 1}
    with pytest.raises(wai.RowError, match=r"row 1: reward is 1\.5, outside"):
        wai.pass_at([good, {**good, "reward": 1.5}])
    with pytest.raises(wai.RowError, match="row 0: missing required field 'final_text'"):
        wai.pass_at([{"prompt": "p", "reward": 1}])
    with pytest.raises(wai.RowError, match="row 2 is a str"):
        wai.pass_at([good, good, "not a row"])
    with pytest.raises(wai.RowError, match="row 0: reward must be a number"):
        wai.pass_at([{**good, "reward": True}])
    with pytest.raises(TypeError, match="list of rows"):
        wai.pass_at(good)
    with pytest.raises(ValueError, match="empty"):
        wai.pass_at([])


def test_a_run_object_with_rows_is_read_like_a_list() -> None:
    rows = grouped([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1]])

    class Run:
        def rows(self) -> list[dict[str, Any]]:
            return rows

    assert wai.pass_at(Run()).pass_at_1 == wai.pass_at(rows).pass_at_1


def test_group_signal_counts_all_pass_all_fail_and_mixed() -> None:
    rows = grouped([[1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0], [1]])
    signal = wai.group_signal(rows)
    assert (signal.all_pass, signal.all_fail, signal.mixed) == (2, 2, 1)
    assert signal.n_groups == 5 and signal.singletons == 1
    assert signal.mixed_share == pytest.approx(0.2)
    text = str(signal)
    assert "mixed" in text and "one binary row" in text


def test_report_to_dict_is_plain_data() -> None:
    import json

    report = wai.pass_at(grouped([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1]]))
    plain = json.loads(json.dumps(report.to_dict()))
    assert plain["k"] == 4 and plain["counts"]["binary"] == 12


@given(
    st.lists(st.lists(st.sampled_from([0, 1]), min_size=4, max_size=12), min_size=1, max_size=20),
    st.integers(min_value=1, max_value=4),
)
@settings(max_examples=60, deadline=None)
def test_reliability_pass_rate_and_reach_are_ordered(scores: list[list[int]], k: int) -> None:
    report = wai.pass_at(grouped(scores), k=k, n_resamples=200)
    assert report.pass_pow_k is not None and report.pass_at_k is not None
    # All k pass <= one passes <= at least one of k passes, for every group and so on average.
    assert report.pass_pow_k <= report.pass_at_1 + 1e-12
    assert report.pass_at_1 <= report.pass_at_k + 1e-12
    if k == 1:
        assert report.pass_pow_k == pytest.approx(report.pass_at_1)
        assert report.pass_at_k == pytest.approx(report.pass_at_1)


def test_a_k_larger_than_every_group_says_what_it_needs() -> None:
    report = wai.pass_at(grouped([[1, 0] * 4, [1] * 8, [0] * 8]), k=10)
    assert report.k == 10 and report.pass_at_k is None
    assert report.left_out == ["task-0", "task-1", "task-2"]
    assert any(
        "at least 10 attempts (k=10" in n and "largest group has 8" in n for n in report.notes
    )


def test_pass_at_counts_flagged_hacks_as_failures_or_leaves_them_out_on_request() -> None:
    rows = [
        {
            "task_id": f"t{i}",
            "prompt": f"p{i}",
            "final_text": "x",
            "reward": r,
            "judge_meta": {"hack_suspected": "exited during the tests"} if r == 0 and i < 2 else {},
        }
        for i in range(4)
        for r in (1, 0)
    ]
    assert wai.pass_at(rows).pass_at_1 == 0.5
    dropped = wai.pass_at(rows, hacks="drop")
    assert dropped.pass_at_1 == 0.75
    assert dropped.n_hack_suspected == 2
    assert "2 rows flagged hack_suspected left out" in str(dropped)
    with pytest.raises(ValueError, match="hacks must be one of 'keep', 'drop'"):
        wai.pass_at(rows, hacks="skip")  # type: ignore[arg-type]


def test_a_rollout_given_twice_is_counted_once_and_said() -> None:
    from whileai.schema.source import DuplicateRowsWarning

    rows = grouped([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 0, 1]])
    for n, row in enumerate(rows):
        row["lineage"] = {"rollout_key": f"{row['task_id']}/r{n % 4}"}
    once = wai.pass_at(rows)
    with pytest.warns(DuplicateRowsWarning, match=r"12 of 24 rows repeat a rollout already given"):
        twice = wai.pass_at(rows + rows)
    assert (
        (twice.pass_at_1, twice.counts.rows)
        == (once.pass_at_1, once.counts.rows)
        == (once.pass_at_1, 12)
    )
    assert twice.pass_pow_k == once.pass_pow_k
    # rows without a rollout key are samples, however alike: four "5"s are four answers
    same = grouped([[1, 1, 1, 1]])
    assert wai.pass_at(same).counts.rows == 4
