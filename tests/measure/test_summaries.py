"""metric_summary, marker_summary, trace_flag_report, refusal_report and judge_trust."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats

import whileai as wai
from whileai.measure.summaries import detect_refusal


def row(task: str, reward: float | None, **extra: object) -> dict[str, object]:
    return {
        "task_id": task,
        "prompt": f"prompt {task}",
        "final_text": "an answer",
        "reward": reward,
        **extra,
    }


def test_metric_summary_averages_per_task_first() -> None:
    # Task a has three rows, b and c one each: a row mean would weight a three times.
    rows = [
        row("a", 1.0, markers={"chars": 10}),
        row("a", 1.0, markers={"chars": 20}),
        row("a", 1.0, markers={"chars": 30}),
        row("b", 0.0, markers={"chars": 60}),
        row("c", 0.0, markers={"chars": 40}),
    ]
    report = wai.metric_summary(rows)
    assert report.metrics["reward"].mean == pytest.approx(1 / 3)
    assert report.metrics["chars"].mean == pytest.approx((20 + 60 + 40) / 3)
    # a count marker: Student's t over the three tasks' means (symmetric, so Hall's correction
    # for skewness, tests/measure/test_count_intervals.py, leaves it as it is)
    values = [20.0, 60.0, 40.0]
    theirs = stats.t.interval(0.95, 2, loc=np.mean(values), scale=stats.sem(values))
    assert report.metrics["chars"].ci95 == pytest.approx(theirs)
    assert (report.metrics["reward"].n_tasks, report.metrics["reward"].n_rows) == (3, 5)
    assert report.n_tasks == 3 and report.n_rows == 5


def test_metric_summary_interval_matches_scipy_bootstrap() -> None:
    from scipy import stats

    rng = np.random.default_rng(0)
    rows = [
        row(f"t{t}", float(rng.random() < 0.6), markers={"score": float(v)})
        for t in range(80)
        for v in rng.normal(t % 7, 1.0, size=2)
    ]
    report = wai.marker_summary(rows, n_resamples=4000)
    scores = [float(r["markers"]["score"]) for r in rows]  # type: ignore[index]
    per_task = np.array([np.mean(scores[2 * t : 2 * t + 2]) for t in range(80)])
    reference = stats.bootstrap(
        (per_task,), np.mean, n_resamples=4000, method="percentile", random_state=1
    ).confidence_interval
    low, high = report.metrics["score"].ci95
    width = reference.high - reference.low
    assert low == pytest.approx(reference.low, abs=0.05 * width)
    assert high == pytest.approx(reference.high, abs=0.05 * width)


def test_one_task_gives_a_point_estimate_and_few_a_caveat() -> None:
    report = wai.metric_summary([row("a", 1.0), row("a", 0.0)])
    assert report.metrics["reward"].ci95 is None
    assert any("point estimate" in n for n in report.notes)
    assert "no interval" in str(report)
    few = wai.metric_summary([row("a", 1.0), row("b", 0.0)])
    assert few.metrics["reward"].ci95 is not None
    assert any("reward: 2 tasks, fewer than 10" in n for n in few.notes)


def test_a_count_every_task_gave_alike_has_no_interval_rather_than_one_of_width_zero() -> None:
    # eight tool errors in every rollout of both tasks: Student's t has no spread to size an
    # interval by, and [8.000, 8.000] would say the mean is known exactly
    rows = [
        row(task, 0.0, markers={"tool_errors": 8, "turns": turns})
        for task, turns in (("a", 3), ("a", 4), ("b", 9))
    ]
    report = wai.marker_summary(rows)
    assert report.metrics["tool_errors"].mean == 8.0
    assert report.metrics["tool_errors"].ci95 is None
    assert report.metrics["turns"].ci95 is not None
    assert (
        "no interval for tool_errors: every task gave the same value, so there is no spread to "
        "size one by"
    ) in report.notes
    assert re.search(r"tool_errors +8\.000 +no interval +2 +3\n", str(report))


def test_a_count_is_known_by_its_rows_not_by_its_task_means() -> None:
    from whileai.measure.intervals import bounded_mean_interval, skew_corrected_t_interval

    # tool errors averaging at most 1 a task, but one rollout had 2: a count, whose mean takes
    # Student's t (corrected for skewness), not the interval of a share of rows; a flag with
    # the same task means keeps the bounded form
    per_task = {"a": [0, 0, 2, 0], "b": [0, 0, 0, 0], "c": [1, 0, 0, 1], "d": [0, 1, 0, 0]}
    flags = {"a": [0, 1, 1, 0], "b": [0, 0, 0, 0], "c": [1, 0, 0, 1], "d": [0, 1, 0, 0]}
    rows = [
        row(task, 1.0, markers={"tool_errors": errors, "asked_twice": flag})
        for task in per_task
        for errors, flag in zip(per_task[task], flags[task], strict=True)
    ]
    report = wai.marker_summary(rows)
    means = np.array([0.5, 0.0, 0.5, 0.25])
    assert report.metrics["tool_errors"].ci95 == pytest.approx(skew_corrected_t_interval(means))
    assert report.metrics["asked_twice"].ci95 == pytest.approx(bounded_mean_interval(means, 16))
    compared = wai.compare(rows, [{**r, "markers": {"tool_errors": 0}} for r in rows])
    theirs = skew_corrected_t_interval(-means)
    assert compared.metrics["tool_errors"].ci95 == pytest.approx(theirs)


def test_named_metrics_and_unknown_marker() -> None:
    rows = [row(t, 1.0, markers={"chars": 3, "turns": 2}) for t in "abc"]
    report = wai.metric_summary(rows, ["marker:turns"])
    assert list(report.metrics) == ["turns"]
    with pytest.raises(
        ValueError, match="no row carries marker 'tone'; markers present: chars, turns"
    ):
        wai.metric_summary(rows, ["tone"])


def test_marker_summary_leaves_reward_out_and_says_when_empty() -> None:
    rows = [row(t, 1.0, markers={"chars": 3}) for t in "abc"]
    assert list(wai.marker_summary(rows).metrics) == ["chars"]
    empty = wai.marker_summary([row(t, 1.0) for t in "abc"])
    assert empty.metrics == {} and any("no row carries markers" in n for n in empty.notes)


def test_bad_marker_names_the_row() -> None:
    rows = [row("a", 1.0, markers={"chars": 3}), row("b", 1.0, markers={"chars": "long"})]
    with pytest.raises(wai.RowError, match="row 1: marker 'chars' is 'long', not a number"):
        wai.metric_summary(rows)


def test_trace_flag_report_clean_share_with_wilson() -> None:
    rows = [
        row(f"t{i}", 1.0, markers={"tool_error": i < 3, "looped": 0, "chars": 10 + i})
        for i in range(10)
    ]
    report = wai.trace_flag_report(rows)
    assert set(report.flags) == {"tool_error", "looped"}
    tool = report.flags["tool_error"]
    assert (tool.count, tool.n, tool.share) == (7, 10, 0.7)
    assert tool.ci95 == pytest.approx(wai.wilson_interval(7, 10))
    assert report.flags["looped"].share == 1.0
    assert report.not_flags == ["chars"]
    text = str(report)
    assert "tool_error" in text and "7/10" in text and "chars" in text


def test_trace_flag_report_warns_about_repeats() -> None:
    rows = [
        row("a", 1.0, markers={"f": True}),
        row("a", 0.0, markers={"f": False}),
        row("b", 1.0, markers={"f": False}),
    ]
    report = wai.trace_flag_report(rows)
    assert any("1 task has repeats" in n for n in report.notes)


def test_a_flags_interval_counts_a_tasks_repeats_as_the_rows_they_are_worth() -> None:
    from whileai.measure.intervals import effective_attempts
    from whileai.measure.proportions import effective_wilson_interval

    # two tasks that always loop and two that never do: eight rows, but the loops follow the
    # task, so the rows are worth far fewer than eight independent ones
    rows = [row(t, 1.0, markers={"looped": t in "ab"}) for t in "abcd" for _ in range(2)]
    clean = wai.trace_flag_report(rows).flags["looped"]
    _, effective = effective_attempts([2, 2, 2, 2], [0, 0, 2, 2])
    assert effective < 8
    assert clean.ci95 == pytest.approx(effective_wilson_interval(0.5, effective))
    assert clean.ci95[1] - clean.ci95[0] > np.subtract(*wai.wilson_interval(4, 8)[::-1])
    # whole numbers of trials: the Wilson interval itself
    assert effective_wilson_interval(0.7, 10) == pytest.approx(wai.wilson_interval(7, 10))
    refusals = wai.refusal_report(
        [{**r, "markers": {"refusal": r["markers"]["looped"]}} for r in rows]
    )
    assert refusals.refusals.ci95 == pytest.approx(effective_wilson_interval(0.5, effective))


@pytest.mark.slow
def test_trace_flag_and_refusal_intervals_cover_over_tasks_from_five() -> None:
    """Four rollouts a task, each task's chance to fire drawn from a Beta: counted one row
    each, the rows' Wilson interval covered 81-89% at every size from 5 tasks to 100."""
    rng = np.random.default_rng(2)
    runs = 800
    for tasks in (5, 10, 30):
        for a, b in ((0.5, 2.0), (2.0, 2.0)):
            flags = refusals = 0
            for _ in range(runs):
                fired = rng.random((tasks, 4)) < rng.beta(a, b, (tasks, 1))
                rows = [
                    row(f"t{t}", 1.0, markers={"refusal": bool(v)})
                    for t in range(tasks)
                    for v in fired[t]
                ]
                low, high = wai.trace_flag_report(rows).flags["refusal"].ci95  # type: ignore[misc]
                flags += low <= b / (a + b) <= high
                low, high = wai.refusal_report(rows).refusals.ci95  # type: ignore[misc]
                refusals += low <= a / (a + b) <= high
            print(f"{tasks} tasks, Beta({a}, {b}): {flags / runs:.3f}, {refusals / runs:.3f}")
            assert min(flags, refusals) / runs >= 0.91
            # a handful of tasks is held to the floor only, as in the coverage grid
            assert tasks <= 10 or max(flags, refusals) / runs <= 0.985


def test_refusal_report_reads_the_marker_and_detects_elsewhere() -> None:
    rows = [
        row("a", 0.0, markers={"refusal": True}, final_text="Here you go"),
        row("b", 1.0, markers={"refusal": 0}, final_text="I can't help with that"),
        {**row("c", 0.0), "final_text": "I\u2019m sorry, but I cannot do that."},
        {**row("d", 1.0), "final_text": "Sure: 42"},
    ]
    report = wai.refusal_report(rows)
    # a: marker says refusal; b: the marker overrides the text; c: detected; d: not.
    assert (report.refusals.count, report.refusals.n) == (2, 4)
    assert (report.from_marker, report.detected, report.source) == (2, 2, "mixed")
    assert report.refusals.ci95 == pytest.approx(wai.wilson_interval(2, 4))
    assert any("detected by a simple rule" in n for n in report.notes)
    assert "refusal" in str(report)


def test_refusal_rule() -> None:
    for text in (
        "I'm sorry, I can't",
        "  I cannot assist",
        "As an AI, I won't",
        "I won't do that",
        "Unfortunately, I can't",
    ):
        assert detect_refusal(text), text
    for text in ("Sure, here it is", "The answer is 5. Sorry for the delay.", ""):
        assert not detect_refusal(text), text


def test_refusal_marker_must_be_a_flag() -> None:
    with pytest.raises(ValueError, match=r"row 0: markers\['refusal'\] is 0.5"):
        wai.refusal_report([row("a", 1.0, markers={"refusal": 0.5})])


def test_judge_trust_with_gold_flags_and_self_judging() -> None:
    rows = []
    for i in range(60):
        gold = float(i % 2)
        judged = 1.0 if i % 10 == 0 else gold  # passes 6 of 30 gold failures (0, 10, .., 50)
        rows.append(
            row(
                f"t{i}",
                judged,
                gold_reward=gold,
                judge_name="phi-4",
                judge_status="ok",
                judge_meta={"model": "phi-4", "version": "phi-4@abc"},
                model_version="qwen" if i else "phi-4",
                markers={"tool_error": i < 10},
            )
        )
    rows.append(
        row(
            "broken",
            None,
            judge_status="error",
            judge_name="phi-4",
            judge_meta={"model": "phi-4", "version": "phi-4@abc"},
        )
    )
    report = wai.judge_trust(rows)
    assert (report.errors.count, report.errors.n) == (1, 61)
    assert (report.pass_when_gold_fail.count, report.pass_when_gold_fail.n) == (6, 30)
    assert (report.disagreement.count, report.disagreement.n) == (6, 60)
    assert report.floor_met and report.n_gold == 60
    flag = report.passed_while_flagged["tool_error"]
    # rows 0..9 fired; the judge passed the odd ones (gold 1) and row 0
    assert (flag.count, flag.n) == (6, 10)
    assert report.self_judged == 1
    assert report.judges == ["phi-4@abc"]
    assert any("self_judged" in n for n in report.notes)
    text = str(report)
    assert "pass_when_gold_fail" in text and "passed while tool_error fired" in text


def test_judge_trust_counts_a_tasks_repeats_as_the_rows_they_are_worth() -> None:
    from whileai.measure.intervals import effective_attempts
    from whileai.measure.proportions import effective_wilson_interval

    # the judge fails on every repeat of tasks a and b and on none of c and d; the looping
    # flag fires on every repeat of a and c, and the judge passes those of c
    rows = [
        row(
            task,
            None if task in "ab" else 1.0,
            judge_status="error" if task in "ab" else "ok",
            markers={"looped": task in "ac"},
        )
        for task in "abcd"
        for _ in range(3)
    ]
    report = wai.judge_trust(rows)
    _, effective = effective_attempts([3, 3, 3, 3], [3, 3, 0, 0])
    assert (report.errors.count, report.errors.n) == (6, 12) and effective < 12
    assert report.errors.ci95 == pytest.approx(effective_wilson_interval(0.5, effective))
    looped = report.passed_while_flagged["looped"]
    assert (looped.count, looped.n) == (3, 3)  # a's rows were never judged
    assert any("4 tasks have repeats" in n and "over tasks" in n for n in report.notes)


def test_judge_trust_without_gold_says_accuracy_is_unmeasured() -> None:
    report = wai.judge_trust(
        [row(t, 1.0, judge_name="j1") for t in "ab"] + [row("c", 0.0, judge_name="j2")]
    )
    assert report.disagreement is None and report.pass_when_gold_fail is None
    assert any("accuracy is unmeasured" in n for n in report.notes)
    unjudged = wai.judge_trust([row("a", 1.0), row("b", None)])
    assert unjudged.n_unjudged == 1 and unjudged.errors.count == 0
    assert any("1 row carries no reward" in n for n in unjudged.notes)
    assert any("2 judge versions" in n for n in report.notes)
    few = wai.judge_trust([row("a", 1.0, gold_reward=1.0)])
    assert not few.floor_met and any("floor not met" in n for n in few.notes)


def test_judge_trust_sees_self_judging_as_grade_does() -> None:
    """The judge's model and the rows' model named two ways (a provider prefix, an @url, a
    served name) are one model here as in wai.grade and wai.run_judge."""
    from whileai.schema.provenance import self_judged

    rows = [
        {
            "task_id": f"t{i}",
            "prompt": "p",
            "final_text": "a",
            "reward": 1.0,
            "judge_status": "ok",
            "model_version": model,
            "judge_meta": {"model": judge, "version": "rubric@1"},
        }
        for i, (model, judge) in enumerate(
            [
                ("qwen2.5-7b", "vllm:Qwen2.5-7B@http://gpu:8000/v1"),
                ("openai:gpt-4o", "gpt-4o"),
                ("llama-3-8b", "gpt-4o"),
            ]
        )
    ]
    assert [self_judged(r) for r in rows] == [True, True, False]
    assert wai.judge_trust(rows).self_judged == 2
