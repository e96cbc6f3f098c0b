"""The one grading path every scorer goes through, and the provenance it writes."""

from __future__ import annotations

import pytest

import whileai as wai
from whileai.scoring import Verdict, as_scorer, grade_row

from .conftest import EchoVerifier

ROW = {"prompt": "What is 7 * 6?", "final_text": "42", "privileged": {"reference": "42"}}


def test_a_verifier_reads_the_privileged_reference() -> None:
    graded = grade_row(ROW, as_scorer(EchoVerifier()))
    assert graded["reward"] == 1.0
    assert (graded["judge_name"], graded["judge_status"], graded["label_source"]) == (
        "Echo",
        "ok",
        "verifier",
    )
    assert graded["judge_meta"] == {"name": "Echo", "version": "1.0"}
    assert "reward" not in ROW  # the input row is not modified


def test_two_and_three_argument_callables() -> None:
    def starts_right(prompt: str, completion: str) -> float:
        return float(completion.startswith("4"))

    def matches(prompt: str, completion: str, reference: str) -> bool:
        return completion == reference

    assert grade_row(ROW, as_scorer(starts_right))["reward"] == 1.0
    graded = grade_row(ROW, as_scorer(matches))
    assert graded["reward"] == 1.0
    assert graded["judge_name"].endswith("matches")
    assert graded["label_source"] == "callable"


def test_judge_contract_callable_gets_the_row() -> None:
    def judge(row: dict) -> dict:
        return {"reward": 0.5, "reason": f"{len(row['final_text'])} chars"}

    graded = grade_row(ROW, as_scorer(judge))
    assert (graded["reward"], graded["reason"], graded["label_source"]) == (0.5, "2 chars", "judge")


def test_a_raising_scorer_gives_an_error_row_not_a_zero() -> None:
    def broken(prompt: str, completion: str) -> float:
        raise ZeroDivisionError("division by zero")

    graded = grade_row(ROW, as_scorer(broken), index=7)
    assert graded["reward"] is None
    assert graded["judge_status"] == "error"
    assert graded["reason"] == "ZeroDivisionError: division by zero"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1.5, r"returned reward 1.5, outside \[0, 1\]"),
        (-1, r"returned reward -1.0, outside \[0, 1\]"),
        ("yes", "returned 'yes'; a scorer returns a number in"),
        (float("nan"), "returned reward nan"),
    ],
)
def test_an_out_of_range_score_is_a_loud_error_naming_the_row(value: object, message: str) -> None:
    scorer = as_scorer(lambda prompt, completion: value)
    with pytest.raises(wai.RowError, match=f"on row 3 {message}"):
        grade_row(ROW, scorer, index=3)


def test_verdict_objects_pass_through() -> None:
    graded = grade_row(ROW, as_scorer(lambda row: Verdict(0.0, "wrong unit", meta={"unit": "m"})))
    assert graded["reason"] == "wrong unit"
    assert graded["judge_meta"]["unit"] == "m"


def test_not_a_scorer() -> None:
    with pytest.raises(TypeError, match="reward must be a verifier"):
        as_scorer(42)


class BatchVerifier:
    """A verifier that decides a batch at once, as one with worker processes does."""

    name = "batch"
    version = "1"

    def __init__(self, *, broken: bool = False, short: bool = False) -> None:
        self.batches: list[list[tuple[str, object, object]]] = []
        self.single = 0
        self.broken = broken
        self.short = short

    def verify(self, completion: str, reference: object, prompt: str | None = None) -> Verdict:
        self.single += 1
        return Verdict(1.0 if completion == reference else 0.0, "one by one")

    def verify_many(self, pairs: list[tuple[str, object, object]]) -> list[Verdict]:
        self.batches.append(list(pairs))
        if self.broken:
            raise RuntimeError("the pool is gone")
        verdicts = [Verdict(1.0 if c == r else 0.0, "in a batch") for c, r, _ in pairs]
        return verdicts[:-1] if self.short else verdicts


def test_a_verifier_with_verify_many_grades_all_rows_in_one_batch() -> None:
    verifier = BatchVerifier()
    rows = wai.rows(["a?", "b?"], [["x", "y"], ["z"]], verifier, references=["x", "z"])
    assert [r["reward"] for r in rows] == [1.0, 0.0, 1.0]
    assert {r["reason"] for r in rows} == {"in a batch"}
    assert verifier.batches == [[("x", "x", "a?"), ("y", "x", "a?"), ("z", "z", "b?")]]
    assert verifier.single == 0


@pytest.mark.parametrize("fault", ["broken", "short"])
def test_a_batch_that_fails_or_loses_a_verdict_is_graded_row_by_row(fault: str) -> None:
    verifier = BatchVerifier(**{fault: True})
    rows = wai.rows(["a?"], [["x", "y", "x"]], verifier, references=["x"])
    assert [r["reward"] for r in rows] == [1.0, 0.0, 1.0]
    assert {r["reason"] for r in rows} == {"one by one"}
    assert verifier.single == 3
