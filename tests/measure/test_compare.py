"""compare, compare_runs and delta_report: paired deltas, the noise band, provenance warnings."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

import whileai as wai


def arm(
    scores: dict[str, list[float]],
    markers: dict[str, list[dict[str, float]]] | None = None,
    **extra: Any,
) -> list[dict[str, Any]]:
    rows = []
    for task, rewards in scores.items():
        for j, reward in enumerate(rewards):
            row = {
                "task_id": task,
                "prompt": f"prompt {task}",
                "final_text": "a",
                "reward": reward,
                **extra,
            }
            if markers is not None:
                row["markers"] = markers[task][j]
            rows.append(row)
    return rows


BASE = {"t1": [1, 0, 1, 1], "t2": [0, 0, 1, 0], "t3": [1, 1, 1, 1], "t4": [1, 0, 1, 1]}
TUNED = {"t1": [1, 1, 1, 1], "t2": [1, 1, 1, 0], "t3": [1, 1, 1, 1], "t4": [1, 1, 1, 1]}
# the same change over 16 tasks: enough for the interval to exclude 0
BASE_16 = {f"{task}-{copy}": scores for copy in range(4) for task, scores in BASE.items()}
TUNED_16 = {f"{task}-{copy}": scores for copy in range(4) for task, scores in TUNED.items()}


def test_delta_is_the_mean_paired_difference_with_a_t_interval() -> None:
    report = wai.compare(arm(BASE), arm(TUNED))
    per_task = np.array([1 - 0.75, 0.75 - 0.25, 0.0, 1 - 0.75])
    assert report.headline == "reward"
    assert report.delta == pytest.approx(per_task.mean())
    assert report.metrics["reward"].mean_a == pytest.approx(0.6875)
    assert report.metrics["reward"].mean_b == pytest.approx(0.9375)
    theirs = stats.t.interval(0.95, 3, loc=per_task.mean(), scale=stats.sem(per_task))
    assert report.ci95 == pytest.approx(theirs)
    # four tasks: the t quantile is 3.18, the interval reaches below 0, and the report says why
    assert report.verdict == "unclear"
    assert any("4 tasks, fewer than 10: the interval is wide" in n for n in report.notes)


def test_a_change_shown_over_enough_tasks_is_a_gain() -> None:
    report = wai.compare(arm(BASE_16), arm(TUNED_16))
    per_task = np.array([1 - 0.75, 0.75 - 0.25, 0.0, 1 - 0.75] * 4)
    theirs = stats.t.interval(0.95, 15, loc=per_task.mean(), scale=stats.sem(per_task))
    assert report.ci95 == pytest.approx(theirs)
    assert report.verdict == "gain"
    assert "b is higher; the interval excludes 0" in str(report)
    assert not any("fewer than 10" in n for n in report.notes)


def test_a_gain_from_few_tasks_says_so_where_it_is_called() -> None:
    small = {f"t{i}": [0, 0, 0, 0] for i in range(6)}
    better = {f"t{i}": [1, 1, 1, 1] if i % 3 else [1, 1, 1, 0] for i in range(6)}
    report = wai.compare(arm(small), arm(better))
    assert report.verdict == "gain"
    assert "the interval excludes 0, from 6 tasks only" in str(report)
    assert any("6 tasks, fewer than 10" in n for n in report.notes)


def test_tasks_that_all_moved_alike_still_get_an_interval_not_a_point() -> None:
    same = {f"t{i}": [0, 0, 0, 0] for i in range(5)}
    report = wai.compare(arm(same), arm(same))
    assert report.delta == 0.0
    assert report.ci95 is not None
    low, high = report.ci95
    assert low < -0.1 and high > 0.1  # five all-fail tasks cannot rule out a real difference
    assert report.verdict == "unclear"


def test_pairing_uses_shared_tasks_and_counts_the_rest() -> None:
    a = arm({**BASE, "only-a": [1, 1]})
    b = arm({**TUNED, "only-b1": [0], "only-b2": [1]})
    report = wai.compare(a, b)
    assert report.n_paired == 4
    assert (report.only_a, report.only_b) == (1, 2)
    assert report.delta == pytest.approx(wai.compare(arm(BASE), arm(TUNED)).delta)
    text = str(report)
    assert "1 only in a and 2 only in b skipped" in text and "'only-a'" in text


def test_partial_rewards_count_and_unjudged_rows_are_skipped() -> None:
    a = arm({"t1": [0.5, 0.5], "t2": [0.2], "t3": [0.0]})
    b = arm({"t1": [0.7, 0.9], "t2": [0.4], "t3": [0.3]})
    b.append({"task_id": "t1", "prompt": "p", "final_text": "x", "reward": None})
    report = wai.compare(a, b)
    assert report.delta == pytest.approx(np.mean([0.3, 0.2, 0.3]))
    assert any("1 unjudged rows skipped" in n for n in report.notes)


def test_every_shared_marker_gets_a_line_and_a_proxy_takes_the_headline() -> None:
    ma = {t: [{"chars": 10.0, "turns": 2}] * 4 for t in BASE}
    mb = {t: [{"chars": 14.0, "steps": 1}] * 4 for t in TUNED}
    report = wai.compare(arm(BASE, ma), arm(TUNED, mb), proxy="marker:chars")
    assert set(report.metrics) == {"reward", "chars"}
    assert report.headline == "chars"
    assert report.delta == pytest.approx(4.0)
    assert any("only one arm" in n and "'steps'" in n and "'turns'" in n for n in report.notes)
    assert "chars*" in str(report)
    with pytest.raises(ValueError, match="marker 'turns' is missing from arm b"):
        wai.compare(arm(BASE, ma), arm(TUNED, mb), proxy="marker:turns")
    with pytest.raises(ValueError, match="proxy must be"):
        wai.compare(arm(BASE), arm(TUNED), proxy="chars")


def test_a_delta_inside_the_noise_band_reads_as_noise() -> None:
    noisy = wai.compare(arm(BASE_16), arm(TUNED_16), run_std=0.2, run_std_runs=5)
    assert noisy.noise_band == pytest.approx(stats.t.ppf(0.975, 4) * np.sqrt(2) * 0.2)
    assert noisy.verdict == "noise"
    assert "inside the noise band" in str(noisy)
    quiet = wai.compare(arm(BASE_16), arm(TUNED_16), run_std=0.01, run_std_runs=5)
    assert quiet.verdict == "gain"


def test_fewer_than_three_runs_behind_run_std_says_so() -> None:
    report = wai.compare(arm(BASE), arm(TUNED), run_std=0.01, run_std_runs=2)
    assert any("from 2 runs: fewer than 3" in n for n in report.notes)
    unknown = wai.compare(arm(BASE), arm(TUNED), run_std=0.01)
    assert any("run_std_runs not given" in n for n in unknown.notes)
    with pytest.raises(ValueError, match="run_std_runs must be"):
        wai.compare(arm(BASE), arm(TUNED), run_std=0.01, run_std_runs=1)
    with pytest.raises(ValueError, match="run_std must be"):
        wai.compare(arm(BASE), arm(TUNED), run_std="small")


def test_too_few_paired_tasks_give_a_point_estimate() -> None:
    report = wai.compare(arm({"t1": [0, 1]}), arm({"t1": [1, 1], "t2": [1]}))
    assert report.ci95 is None and report.verdict == "no interval"
    assert any("point estimate" in n for n in report.notes)
    nothing = wai.compare(arm({"t1": [0]}), arm({"t2": [1]}))
    assert nothing.delta is None and nothing.n_paired == 0
    assert "nothing to compare" in str(nothing)


def test_compare_runs_warns_when_the_arms_were_produced_differently() -> None:
    a = arm(
        BASE,
        lineage={"system_prompt_sha": "aaa"},
        judge_meta={"model": "phi-4"},
        writer_model="qwen",
        user_model="qwen",
    )
    b = arm(
        TUNED,
        lineage={"system_prompt_sha": "bbb"},
        judge_meta={"model": "gpt-4o"},
        writer_model="qwen",
        user_model="llama",
    )
    report = wai.compare_runs(a, b)
    text = " ".join(report.warnings)
    assert "system prompt" in text and "'aaa'" in text and "'bbb'" in text
    assert "judge" in text and "user model" in text
    assert "writer model" not in text
    assert "warning:" in str(report)
    same = wai.delta_report(
        a,
        arm(
            TUNED,
            lineage={"system_prompt_sha": "aaa"},
            judge_meta={"model": "phi-4"},
            writer_model="qwen",
            user_model="qwen",
        ),
    )
    assert same.warnings == []
    assert str(same).startswith("delta_report")


def test_compare_runs_warns_when_a_verifier_or_world_grades_by_another_version() -> None:
    # the shop's check changed between versions: the same rollout may grade otherwise, so a
    # delta between a baseline graded by one and a run graded by the other is partly the grader
    def graded(rewards: dict[str, list[float]], version: str) -> list[dict[str, Any]]:
        return arm(
            rewards, judge_name="world:shop", judge_meta={"name": "world:shop", "version": version}
        )

    report = wai.compare_runs(graded(BASE, "1"), graded(TUNED, "2"))
    (warning,) = report.warnings
    assert warning.startswith(
        "the arms differ in judge (judge_meta.model, or judge_name and its version)"
    )
    assert "'world:shop version 1'" in warning and "'world:shop version 2'" in warning
    assert wai.compare_runs(graded(BASE, "2"), graded(TUNED, "2")).warnings == []


def keyed(rows: list[dict[str, Any]], run: str = "run-1") -> list[dict[str, Any]]:
    """``rows``, each naming its run and its rollout as a run's rows do."""
    return [
        {**row, "lineage": {"run_id": run, "rollout_key": f"{row['task_id']}/r{i}"}}
        for i, row in enumerate(rows)
    ]


def test_compare_runs_says_when_both_arms_are_the_same_rollouts() -> None:
    # the same rollouts graded twice (a judge against another, or a file against itself by
    # mistake): whatever the delta, it is not the agent's
    rollouts = keyed(arm(BASE))
    regraded = [{**row, "reward": 1.0} for row in reversed(rollouts)]
    report = wai.compare_runs(rollouts, regraded)
    # (11 of BASE's 16 rollouts passed; regraded, all 16 do)
    assert report.delta == pytest.approx(1 - 11 / 16)
    (warning,) = report.warnings
    assert warning == (
        "a and b hold the same 16 rollouts (every run and lineage.rollout_key of one is in the "
        "other): the delta measures how they were graded, not what the agent did"
    )
    assert warning in str(report)
    # another run of the same plan (the same seed, faults on) fills the same keys with
    # rollouts of its own: the paired comparison the demo makes, and no warning
    assert wai.compare_runs(rollouts, keyed(arm(BASE), run="run-2")).warnings == []
    # one rollout played again, one missing, or rows that do not name their rollout: other runs
    replayed = [
        *rollouts[:-1],
        {**rollouts[-1], "lineage": {"run_id": "run-1", "rollout_key": "t4/r99"}},
    ]
    assert wai.compare_runs(rollouts, replayed).warnings == []
    assert wai.compare_runs(rollouts, rollouts[:-1]).warnings == []
    assert wai.compare_runs(arm(BASE), arm(BASE)).warnings == []


def test_compare_runs_says_why_a_branch_shares_no_task_with_its_recording() -> None:
    # a branch's task is the rollout and step it branched at: against the recording it came
    # from, nothing pairs, and the way to measure the decision is two branches at one step
    recorded = keyed(arm(BASE))
    branches = [
        {
            **row,
            "task_id": f"{row['task_id']}-r{i}-at0",
            "lineage": {"rollout_key": f"b{i}", "branched_from": row["lineage"]["rollout_key"]},
        }
        for i, row in enumerate(recorded)
    ]
    report = wai.compare_runs(recorded, branches)
    assert report.n_paired == 0
    (warning,) = report.warnings
    assert warning.startswith(
        "b's rows are branches (lineage.branched_from) and the other arm's are not: a branch's "
        "task is the recorded rollout and step it branched at, so the arms share no task"
    )
    assert "wai.branch(source, at, agent_model=...)" in warning
    # two branches of the same rows at one step pair (a task a branched rollout), and
    # nothing is said of branches
    again = [
        {**row, "lineage": {**row["lineage"], "rollout_key": f"c{i}"}}
        for i, row in enumerate(branches)
    ]
    paired = wai.compare_runs(branches, again)
    assert paired.n_paired == len(branches) and paired.warnings == []


def test_compare_runs_reads_each_arm_once(walked: Any) -> None:
    # counted, not timed: a run's rows from its file are parsed on every walk, and what
    # produced each arm was read in a second walk after the one its task table made
    a = walked(arm(BASE, judge_name="world:shop", judge_meta={"version": "1"}))
    b = walked(arm(TUNED, judge_name="world:shop", judge_meta={"version": "2"}))
    report = wai.compare_runs(a, b)
    # a list in memory is walked once for rollouts given twice (a file's reader does that as
    # it opens the file), and once for the task table and what produced the arm
    assert (a.walks, b.walks) == (2, 2)
    assert report.delta == pytest.approx(wai.compare(list(a), list(b)).delta)
    assert len(report.warnings) == 1 and "'world:shop version 2'" in report.warnings[0]


def test_compare_runs_reads_runs_carrying_rows() -> None:
    class Run:
        def __init__(self, rows: list[dict[str, Any]], callable_rows: bool) -> None:
            self._rows = rows
            self.rows = (lambda: rows) if callable_rows else rows

    report = wai.compare_runs(Run(arm(BASE), True), Run(arm(TUNED), False))
    assert report.delta == pytest.approx(wai.compare(arm(BASE), arm(TUNED)).delta)
    with pytest.raises(TypeError, match="run_a must be a list of rows"):
        wai.compare_runs(42, arm(TUNED))


def test_a_bad_row_names_its_arm_and_index() -> None:
    bad = [*arm(TUNED)[:1], {"task_id": "t1", "prompt": "p", "final_text": "a", "reward": 2}]
    with pytest.raises(wai.RowError, match=r"arm b: row 1: reward is 2, outside \[0, 1\]"):
        wai.compare(arm(BASE), bad)
    with pytest.raises(wai.RowError, match="arm a: row 0: markers must be a mapping"):
        wai.compare([{**arm(BASE)[0], "markers": [1, 2]}], arm(TUNED))


def test_a_task_unjudged_on_one_side_is_skipped_and_said() -> None:
    b = arm(TUNED)
    for r in b:
        if r["task_id"] == "t4":
            r["reward"] = None
    report = wai.compare(arm(BASE), b)
    assert report.n_paired == 3 and (report.only_a, report.only_b) == (0, 0)
    assert any("1 task in both arms has no reward on one side" in n for n in report.notes)


def test_a_count_every_task_gave_alike_in_both_arms_has_no_interval_not_a_point() -> None:
    turns = {t: [{"turns": 2}] * 4 for t in BASE_16}
    report = wai.compare(arm(BASE_16, turns), arm(TUNED_16, turns))
    assert report.metrics["turns"].delta == 0.0
    assert report.metrics["turns"].ci95 is None
    assert any("no interval for turns: every task gave the same value" in n for n in report.notes)
    assert report.metrics["reward"].ci95 is not None
