"""The row-contract page runs as written, and prints what its comments promise."""

from __future__ import annotations

import pytest

import whileai as wai

pytestmark = pytest.mark.plugins

questions = ["What is 2 + 3?", "What is 7 * 6?", "What is 10 - 4?", "What is 9 / 3?"]
gold = ["5", "42", "6", "3"]
answers = [["5", "4", "5", "5"], ["41", "41", "42", "40"], ["6"] * 4, ["3", "2", "3", "3"]]


def test_build_them(capsys: pytest.CaptureFixture[str]) -> None:
    rows = wai.rows(questions, answers, wai.verify.MathEqual(), references=gold)
    print(rows[0]["task_id"], rows[0]["reward"], rows[0]["judge_name"])
    assert capsys.readouterr().out == f"{wai.Task(prompt=questions[0]).task_id} 1.0 MathEqual\n"
    assert [r["reward"] for r in rows[:4]] == [1.0, 0.0, 1.0, 1.0]
    assert all(r["schema_version"] == "1" for r in rows)
    assert rows[0]["privileged"]["reference"] == "5"
    assert "privileged" not in wai.export_row(rows[0])

    scores = [[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1], [1, 0, 1, 1]]
    lengths = [[{"chars": len(a)} for a in group] for group in answers]
    given = wai.rows(questions, answers, scores, markers=lengths)
    print(given[1]["reward"], given[1]["markers"])
    assert capsys.readouterr().out == "0.0 {'chars': 1}\n"
    assert given[1]["markers"] == {"chars": 1}


def test_then_measure() -> None:
    rows = wai.rows(questions, answers, wai.verify.MathEqual(), references=gold)
    tuned = wai.rows(
        questions,
        [["5"] * 4, ["42", "42", "42", "41"], ["6"] * 4, ["3"] * 4],
        wai.verify.MathEqual(),
        references=gold,
    )
    report = wai.pass_at(rows)
    # per-task pass rates 3/4, 1/4, 4/4, 3/4
    assert report.pass_at_1 == pytest.approx(0.6875)
    assert report.k == 4
    assert report.pass_at_k == pytest.approx(1.0)
    assert report.pass_pow_k == pytest.approx(0.25)
    assert report.headroom == pytest.approx(0.3125)
    text = str(report)
    assert "pass@1" in text and "pass^4" in text and "pass@4" in text

    selected = wai.select(rows, mode="rl", band=(0.2, 0.8))
    assert len(selected.rows) == 12  # the all-pass "10 - 4" group carries no gradient
    assert "unanimous group" in str(selected)

    diff = wai.compare(rows, tuned)
    assert diff["delta"] == pytest.approx(0.25)
    assert diff["n_paired"] == 4
    assert "+0.250" in str(diff)


def test_noise_floor_and_set_size() -> None:
    rows = wai.rows(questions, answers, wai.verify.MathEqual(), references=gold)
    tuned = wai.rows(
        questions,
        [["5"] * 4, ["42", "42", "42", "41"], ["6"] * 4, ["3"] * 4],
        wai.verify.MathEqual(),
        references=gold,
    )
    size = wai.holdout_size(0.10, base=0.45, k=4)
    assert size["n_tasks"] > 0 and size["task_std"] > 0
    assert "paired tasks needed" in str(size)

    passes = [
        wai.rows(questions, answers, wai.verify.MathEqual(), references=gold),
        wai.rows(questions, answers, wai.verify.MathEqual(), references=gold),
        wai.rows(questions, answers, wai.verify.MathEqual(), references=gold),
    ]
    floor = wai.eval_variance(*passes)
    assert floor["n_runs"] == 3
    assert floor["run_std"] == pytest.approx(0.0)  # a deterministic verifier re-run moves nothing
    band = wai.noise_band(floor["run_std"], df=floor["n_runs"] - 1)
    assert "95%" in str(band)
    judged = wai.compare(rows, tuned, run_std=floor["run_std"], run_std_runs=floor["n_runs"])
    assert "noise band" in str(judged)
