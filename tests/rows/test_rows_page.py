"""The row-contract page's wai.rows() examples, run as written, with the values they imply.

The measurement calls on the page (pass_at, select, compare, eval_variance, ...) are checked
where those calls are tested; here the rows they read are built exactly as the page builds them.
"""

from __future__ import annotations

import pytest

import whileai as wai
from whileai.schema.export import export_row
from whileai.schema.records import prompt_hash

pytestmark = pytest.mark.plugins

questions = ["What is 2 + 3?", "What is 7 * 6?", "What is 10 - 4?", "What is 9 / 3?"]
gold = ["5", "42", "6", "3"]
answers = [["5", "4", "5", "5"], ["41", "41", "42", "40"], ["6"] * 4, ["3", "2", "3", "3"]]
# What MathEqual gives those answers against the gold: the page's precomputed scores too.
scores = [[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1], [1, 0, 1, 1]]


def grouped(rows: list[dict[str, object]]) -> list[list[object]]:
    return [[row["reward"] for row in rows[i : i + 4]] for i in range(0, len(rows), 4)]


def test_build_them(capsys: pytest.CaptureFixture[str]) -> None:
    rows = wai.rows(questions, answers, wai.verify.MathEqual(), references=gold)
    print(rows[0]["task_id"], rows[0]["reward"], rows[0]["judge_name"])

    assert capsys.readouterr().out == f"{prompt_hash('What is 2 + 3?')} 1.0 MathEqual\n"
    assert len(rows) == 16
    assert grouped(rows) == scores
    assert rows[0]["reward"] == 1.0
    assert rows[1]["reward"] == 0.0
    assert all(row["judge_status"] == "ok" for row in rows)
    assert all(row["label_source"] == "verifier" for row in rows)
    assert rows[0]["judge_meta"]["name"] == "MathEqual"
    assert "math_verify" in rows[0]["judge_meta"]
    assert rows[0]["privileged"]["reference"] == "5"
    assert "privileged" not in export_row(rows[0])
    assert len({row["task_id"] for row in rows}) == 4
    assert all(row["schema_version"] == "1" for row in rows)


def test_precomputed_scores_and_your_own_markers(capsys: pytest.CaptureFixture[str]) -> None:
    lengths = [[{"chars": len(a)} for a in group] for group in answers]
    given = wai.rows(questions, answers, scores, markers=lengths)
    print(given[1]["reward"], given[1]["markers"])

    assert capsys.readouterr().out == "0.0 {'chars': 1}\n"
    assert given[1]["label_source"] == "given"
    assert given[4]["markers"] == {"chars": 2}
    assert grouped(given) == scores


def test_the_same_rows_from_a_verifier_and_from_numbers_agree() -> None:
    rows = wai.rows(questions, answers, wai.verify.MathEqual(), references=gold)
    lengths = [[{"chars": len(a)} for a in group] for group in answers]
    given = wai.rows(questions, answers, scores, markers=lengths)
    keys = ("task_id", "prompt", "final_text", "reward")
    assert [tuple(r[k] for k in keys) for r in rows] == [tuple(g[k] for k in keys) for g in given]


def test_tuned() -> None:
    tuned = wai.rows(
        questions,
        [["5"] * 4, ["42", "42", "42", "41"], ["6"] * 4, ["3"] * 4],
        wai.verify.MathEqual(),
        references=gold,
    )
    assert grouped(tuned) == [[1.0] * 4, [1.0, 1.0, 1.0, 0.0], [1.0] * 4, [1.0] * 4]


def test_passes_for_the_noise_floor() -> None:
    passes = [
        wai.rows(questions, answers, wai.verify.MathEqual(), references=gold),
        wai.rows(questions, answers, wai.verify.MathEqual(), references=gold),
        wai.rows(questions, answers, wai.verify.MathEqual(), references=gold),
    ]
    assert [grouped(p) for p in passes] == [scores] * 3


@pytest.mark.parametrize("name", ["MathEqual", "Numeric", "ExactMatch"])
def test_each_built_in_verifier_scores_the_page_example(name: str) -> None:
    rows = wai.rows(questions, answers, wai.verify.get(name), references=gold)
    assert grouped(rows) == scores
    assert rows[0]["judge_name"] == name
