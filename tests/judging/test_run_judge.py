"""wai.run_judge: your own judge graded through the same path, its version on every row."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import whileai as wai

QUESTIONS = ["What is 2 + 3?", "What is 7 * 6?"]
ANSWERS = [["5", "4"], ["42", "41"]]


def rows() -> list[dict[str, Any]]:
    return wai.rows(QUESTIONS, ANSWERS, None, references=["5", "42"])


def exact(row: dict[str, Any]) -> bool:
    return bool(row["final_text"] == row["privileged"]["reference"])


def test_the_version_is_recorded_on_every_row() -> None:
    scored = wai.run_judge(rows(), exact, version="exact@2026-11-01")

    assert [r["reward"] for r in scored.rows] == [1.0, 0.0, 1.0, 0.0]
    for row in scored.rows:
        assert row["judge_name"] == "exact"
        assert row["judge_status"] == "ok"
        assert row["judge_meta"]["version"] == "exact@2026-11-01"
        assert row["judge_meta"]["name"] == "exact"
        # the same keys a model judge records; this judge names no model
        assert {"model", "prompt_sha", "temperature"} <= set(row["judge_meta"])
    report = scored.report()
    assert report.judge == "exact"
    assert report.judge_version == "exact@2026-11-01"
    assert report.versions == {"exact@2026-11-01": 4}


def test_a_name_and_the_judges_own_model_are_recorded() -> None:
    class HouseJudge:
        model = "house-judge-3b"
        prompt_sha = "abc123"
        temperature = 0.0

        def __call__(self, row: dict[str, Any]) -> wai.Verdict:
            return wai.Verdict(1.0, "fine", meta={"served_model": "house-judge-3b-q4"})

    scored = wai.run_judge(rows(), HouseJudge(), version="v7", name="house")
    meta = scored.rows[0]["judge_meta"]
    assert scored.rows[0]["judge_name"] == "house"
    assert (meta["model"], meta["prompt_sha"], meta["temperature"]) == (
        "house-judge-3b",
        "abc123",
        0.0,
    )
    assert (meta["version"], meta["served_model"]) == ("v7", "house-judge-3b-q4")
    assert scored.report().judge_model == "house-judge-3b"


def test_version_wins_over_what_the_verdict_says() -> None:
    def judge(row: dict[str, Any]) -> dict[str, Any]:
        return {"reward": 1.0, "meta": {"version": "something-else"}}

    scored = wai.run_judge(rows(), judge, version="mine")
    assert {r["judge_meta"]["version"] for r in scored.rows} == {"mine"}


@pytest.mark.parametrize("version", [None, "", "   ", 3])
def test_a_missing_or_empty_version_is_refused(version: Any) -> None:
    with pytest.raises(ValueError, match="version="):
        wai.run_judge(rows(), exact, version=version)


def test_version_is_required() -> None:
    with pytest.raises(TypeError, match="version"):
        wai.run_judge(rows(), exact)  # type: ignore[call-arg]


def test_an_async_judge_works() -> None:
    async def slow_exact(row: dict[str, Any]) -> float:
        await asyncio.sleep(0)
        return float(row["final_text"] == row["privileged"]["reference"])

    scored = wai.run_judge(rows(), slow_exact, version="1")
    assert [r["reward"] for r in scored.rows] == [1.0, 0.0, 1.0, 0.0]
    assert scored.rows[0]["judge_name"].endswith("slow_exact")


def test_a_prompt_completion_reference_callable_works() -> None:
    scored = wai.run_judge(rows(), lambda p, c, ref: c == ref, version="1", name="eq")
    assert [r["reward"] for r in scored.rows] == [1.0, 0.0, 1.0, 0.0]
    assert scored.rows[0]["label_source"] == "callable"


def test_a_new_version_is_a_new_judge_and_the_rows_say_so() -> None:
    first = wai.run_judge(rows(), exact, version="1")
    second = wai.run_judge(first, exact, version="2")
    assert {r["judge_meta"]["version"] for r in second.rows} == {"2"}
    notes = second.report().notes
    assert any("4 rows were graded before by exact (1)" in n and "(2)" in n for n in notes)


def test_a_raising_judge_gives_error_rows() -> None:
    def judge(row: dict[str, Any]) -> float:
        if row["final_text"] == "41":
            raise RuntimeError("judge API quota exceeded")
        return 1.0

    scored = wai.run_judge(rows(), judge, version="1")
    assert scored.rows[3]["judge_status"] == "error"
    assert scored.rows[3]["reason"] == "RuntimeError: judge API quota exceeded"
    assert scored.rows[3]["judge_meta"]["version"] == "1"
    assert [r["judge_status"] for r in scored.rows[:3]] == ["ok", "ok", "ok"]


def test_a_judge_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match=r"wai\.grade"):
        wai.run_judge(rows(), "MathEqual", version="1")  # type: ignore[arg-type]


def test_a_scored_run_indexes_and_iterates_as_its_rows() -> None:
    def exact(prompt: str, completion: str, reference: str | None) -> float:
        return float(completion == reference)

    scored = wai.run_judge(rows(), exact, version="exact@1")
    assert scored[0] == scored.rows[0] and scored[-1] == scored.rows[-1]
    assert scored[:2] == scored.rows[:2] and list(scored) == list(scored.rows)
