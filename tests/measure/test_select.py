"""select(mode="rl"): whole groups in the band kept, every gate that dropped rows counted."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import whileai as wai


def row(task: str, reward: Any, text: str = "an answer", **extra: Any) -> dict[str, Any]:
    return {
        "task_id": task,
        "prompt": f"prompt {task}",
        "final_text": text,
        "reward": reward,
        **extra,
    }


def test_keeps_whole_groups_inside_the_band() -> None:
    rows = (
        [row("split", r) for r in (1, 0, 1, 0)]  # 0.5: kept
        + [row("easy", 1) for _ in range(4)]  # unanimous
        + [row("hard", 0) for _ in range(4)]  # unanimous
        + [row("mostly", r) for r in (1, 1, 1, 1, 1, 1, 1, 1, 1, 0)]  # 0.9: outside
        + [row("edge", r) for r in (1, 0, 0, 0, 0)]  # 0.2: the band is inclusive
    )
    report = wai.select(rows, mode="rl", band=(0.2, 0.8))
    assert [r["task_id"] for r in report.rows] == ["split"] * 4 + ["edge"] * 5
    assert report.rows[0] is rows[0]
    assert report.dropped_rows == {
        "hack suspected": 0,
        "non-binary reward": 0,
        "empty or cut-off reply": 0,
        "unanimous group": 8,
        "outside band": 10,
    }
    assert report.dropped_groups["unanimous group"] == 2
    assert (report.n_groups_kept, report.n_groups_in) == (2, 5)
    text = str(report)
    for gate in ("non-binary reward", "empty or cut-off reply", "unanimous group", "outside band"):
        assert gate in text


def test_row_gates_run_before_the_group_rate() -> None:
    rows = [
        row("t", 1),
        row("t", 0),
        row("t", 0.5),  # partial: dropped, not counted in the rate
        row("t", None),  # unjudged: dropped
        row("t", 1, text="   "),  # empty reply
        row("t", 1, truncated=True),  # cut at the token cap
        row("u", 1),
        row("u", 1),
        row("u", 0, text=""),  # without it the group is unanimous
    ]
    report = wai.select(rows)
    assert [r["final_text"] for r in report.rows] == ["an answer", "an answer"]
    assert report.dropped_rows["non-binary reward"] == 2
    assert report.dropped_rows["empty or cut-off reply"] == 3
    assert report.dropped_rows["unanimous group"] == 2


def test_unjudged_rows_are_counted_in_a_note_that_says_what_they_escape() -> None:
    rows = [
        row("t", 1),
        row("t", 0),
        row("t", None, judge_status="error"),  # say a math-verify timeout the answer provoked
        row("t", 0.5),
    ]
    report = wai.select(rows)
    assert report.dropped_rows["non-binary reward"] == 2
    (note,) = [n for n in report.notes if "unjudged" in n]
    assert note.startswith("1 of the non-binary rows are unjudged (their grader failed)")
    assert "escapes the failure" in note and "on_timeout='fail'" in note
    assert not [n for n in wai.select([row("t", 1), row("t", 0)]).notes if "unjudged" in n]


def test_a_set_whose_rows_all_vanish_says_why() -> None:
    rows = [row(f"t{i}", 1) for i in range(5)]  # one completion per prompt: no group can split
    report = wai.select(rows)
    assert report.rows == []
    text = str(report)
    assert "no row survived" in text and "unanimous group" in text
    assert "one usable row" in text
    graded = wai.select([row("t", 0.3), row("t", 0.6)])
    assert "non-binary reward" in graded.notes[0] and "exactly 0 or 1" in graded.notes[0]
    cut = wai.select([row("t", 1, truncated=True), row("t", 0, text="")])
    assert "cut at the token cap" in cut.notes[0]


def test_arguments_are_checked() -> None:
    rows = [row("t", 1), row("t", 0)]
    with pytest.raises(ValueError, match="mode must be one of 'rl'"):
        wai.select(rows, mode="sft")
    with pytest.raises(ValueError, match="low <= high"):
        wai.select(rows, band=(0.8, 0.2))
    with pytest.raises(ValueError, match=r"band high must lie in \[0, 1\]"):
        wai.select(rows, band=(0.2, 80))
    with pytest.raises(ValueError, match="band must be a pair"):
        wai.select(rows, band=0.5)  # type: ignore[arg-type]
    with pytest.raises(wai.RowError, match="row 1: missing required field 'final_text'"):
        wai.select([row("t", 1), {"task_id": "t", "prompt": "p", "reward": 1}])


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]),
            st.sampled_from([0, 1, 1, 0, 0.5, None]),
            st.sampled_from(["ok", "ok", "ok", "", "cut"]),
        ),
        max_size=40,
    ),
    st.sampled_from([(0.2, 0.8), (0.0, 1.0), (0.5, 0.5), (0.3, 0.6)]),
)
@settings(max_examples=150, deadline=None)
def test_every_row_is_kept_or_charged_to_one_gate(
    spec: list[tuple[str, Any, str]], band: tuple[float, float]
) -> None:
    rows = [
        row(task, reward, text="" if reply == "" else "reply", truncated=reply == "cut")
        for task, reward, reply in spec
    ]
    if not rows:
        return
    report = wai.select(rows, band=band)
    assert sum(report.dropped_rows.values()) + report.n_rows_kept == len(rows)
    kept_tasks = {r["task_id"] for r in report.rows}
    for task in kept_tasks:
        group = [r for r in report.rows if r["task_id"] == task]
        rewards = [r["reward"] for r in group]
        assert all(v in (0, 1) for v in rewards)
        assert all(r["final_text"].strip() and not r["truncated"] for r in group)
        rate = sum(rewards) / len(rewards)
        assert 0 < rate < 1 and band[0] <= rate <= band[1]
        # Whole groups: every usable row of a kept task is kept.
        usable = [
            r
            for r in rows
            if r["task_id"] == task
            and r["reward"] in (0, 1)
            and r["final_text"]
            and not r["truncated"]
        ]
        assert len(usable) == len(group)


def flagged(task: str, reward: int, hack: str | None = None) -> dict[str, Any]:
    meta = {"name": "CodeExec", **({"hack_suspected": hack} if hack else {})}
    return {**row(task, reward), "judge_meta": meta}


def test_rows_flagged_as_reward_hacks_stay_as_failures_unless_dropped() -> None:
    # A group where one rollout passed honestly and one tried to exit its way to a pass.
    rows = [
        flagged("t", 1),
        flagged("t", 0, "SystemExit(0) raised by the candidate during the tests"),
        flagged("t", 0),
        flagged("u", 1),
        flagged("u", 0, "the tests compared an object of the candidate's type 'A'"),
    ]
    kept = wai.select(rows, band=(0.2, 0.8))
    assert len(kept.rows) == 5
    assert kept.n_hack_suspected_kept == 2
    assert "2 kept rows failed with hack_suspected" in str(kept)
    dropped = wai.select(rows, band=(0.2, 0.8), hacks="drop")
    assert dropped.dropped_rows["hack suspected"] == 2
    # Without the flagged row, group u is all-pass: it carries no gradient and goes.
    assert [r["task_id"] for r in dropped.rows] == ["t", "t"]
    assert dropped.dropped_groups["unanimous group"] == 1
    assert sum(dropped.dropped_rows.values()) + dropped.n_rows_kept == len(rows)
    with pytest.raises(ValueError, match="hacks must be one of 'keep', 'drop'"):
        wai.select(rows, hacks="ignore")


def test_select_reads_the_hack_flags_in_the_walk_that_groups_the_rows(walked: Any) -> None:
    # counted, not timed: a run file's rows are parsed on every walk, and the flags took a
    # walk of their own
    rows = walked([flagged("t", 1), flagged("t", 0, "SystemExit(0) in the tests"), flagged("t", 0)])
    dropped = wai.select(rows, band=(0.2, 0.8), hacks="drop")
    # (a list in memory is also walked once for rollouts given twice: a file's reader does
    # that as it opens the file)
    assert rows.walks == 2
    assert dropped.dropped_rows["hack suspected"] == 1
    assert [r["reward"] for r in dropped.rows] == [1, 0]


def test_pass_at_reads_the_rows_select_kept() -> None:
    rows = [
        {"task_id": f"t{i // 4}", "prompt": "p", "final_text": "a", "reward": float(i % 4 < 2)}
        for i in range(16)
    ]
    kept = wai.select(rows, mode="rl")
    assert wai.pass_at(kept).pass_at_1 == wai.pass_at(kept.rows).pass_at_1 == 0.5


def test_a_run_file_keeps_its_selected_rows_on_disk(tmp_path: Any) -> None:
    # an RL step's run: the kept groups are handed back as a sequence over the file's lines,
    # equal to the rows a list would give, and nothing of the file is held to pick them
    import json
    import tracemalloc

    def run_file(name: str, padding: int) -> Any:
        path = tmp_path / f"{name}.jsonl"
        with path.open("w") as f:
            for t in range(300):
                for r in range(4):
                    reward = 1 if (t % 3 == 0 and r < 2) or t % 3 == 1 else 0
                    f.write(json.dumps(row(f"t{t}", reward, "an answer " * padding)) + "\n")
        return path

    short, long = run_file("short", 1), run_file("long", 500)
    listed = [json.loads(line) for line in long.read_text().splitlines()]
    expected = wai.select(listed)
    wai.select(str(short))  # (a first call imports what it reads with)
    peaks = []
    for path in (short, long):
        tracemalloc.start()
        try:
            report = wai.select(str(path))
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert type(report.rows) is not list and report.n_rows_kept == 400
    assert report.rows == expected.rows and report.to_dict() == expected.to_dict()
    extra = long.stat().st_size - short.stat().st_size
    assert peaks[1] - peaks[0] < extra / 20, (peaks, extra)
