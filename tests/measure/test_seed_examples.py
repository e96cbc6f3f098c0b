"""The row-contract page's examples, run as written: each prints something a person can read."""

from __future__ import annotations

import pytest

import whileai as wai

questions = ["What is 2 + 3?", "What is 7 * 6?", "What is 10 - 4?", "What is 9 / 3?"]
gold = ["5", "42", "6", "3"]
answers = [["5", "4", "5", "5"], ["41", "41", "42", "40"], ["6"] * 4, ["3", "2", "3", "3"]]


def test_given_scores_and_markers_measure_without_any_plugin(
    capsys: pytest.CaptureFixture[str],
) -> None:
    scores = [[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1], [1, 0, 1, 1]]
    lengths = [[{"chars": len(a)} for a in group] for group in answers]
    given = wai.rows(questions, answers, scores, markers=lengths)
    tuned = wai.rows(
        questions,
        [["5"] * 4, ["42"] * 3 + ["41"], ["6"] * 4, ["3"] * 4],
        [[1] * 4, [1, 1, 1, 0], [1] * 4, [1] * 4],
        markers=lengths,
    )
    print(wai.pass_at(given))
    print(wai.select(given, mode="rl", band=(0.2, 0.8)))
    print(wai.compare(given, tuned))
    out = capsys.readouterr().out
    assert "pass@1" in out and "0.688" in out
    assert "select" in out and "unanimous group" in out
    assert "compare" in out and "+0.250" in out and "chars" in out


@pytest.mark.plugins
def test_the_row_contract_page_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    rows = wai.rows(questions, answers, wai.verify.MathEqual(), references=gold)
    tuned = wai.rows(
        questions,
        [["5"] * 4, ["42", "42", "42", "41"], ["6"] * 4, ["3"] * 4],
        wai.verify.MathEqual(),
        references=gold,
    )
    print(wai.pass_at(rows))  # pass@1 with its interval, pass^k, pass@k
    print(wai.select(rows, mode="rl", band=(0.2, 0.8)))  # the groups that carry gradient
    print(wai.compare(rows, tuned))  # is the change real
    print(wai.holdout_size(0.10, base=0.45, k=4))  # n_tasks, task_std, what it assumes
    passes = [
        wai.rows(questions, answers, wai.verify.MathEqual(), references=gold),
        wai.rows(questions, answers, wai.verify.MathEqual(), references=gold),
        wai.rows(questions, answers, wai.verify.MathEqual(), references=gold),
    ]
    floor = wai.eval_variance(*passes)
    print(floor)
    print(wai.noise_band(floor["run_std"], df=floor["n_runs"] - 1))
    print(wai.compare(rows, tuned, run_std=floor["run_std"], run_std_runs=floor["n_runs"]))
    out = capsys.readouterr().out

    report = wai.pass_at(rows)
    # 3 of 4, 1 of 4, 4 of 4, 3 of 4 correct answers.
    assert report.pass_at_1 == pytest.approx(11 / 16)
    assert report.k == 4 and report.pass_at_k == pytest.approx(1.0)
    kept = wai.select(rows, mode="rl", band=(0.2, 0.8))
    assert {r["prompt"] for r in kept.rows} == {questions[0], questions[1], questions[3]}
    # A deterministic verifier on the same answers: the eval does not move between passes.
    assert floor["run_std"] == 0.0 and floor["n_runs"] == 3
    assert any("did not move" in n for n in floor.notes)
    delta = wai.compare(rows, tuned, run_std=floor["run_std"], run_std_runs=floor["n_runs"])
    assert delta.delta == pytest.approx(1 - 11 / 16 - 1 / 16)
    for title in ("pass_at", "select", "compare", "holdout_size", "eval_variance", "noise_band"):
        assert title in out
    assert "paired tasks needed" in out
