"""``cache=`` on wai.evaluate and wai.grade: the same call again costs no model call and
gives the same rows, and the report counts it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from judging_doubles import ModelDoubles

import whileai as wai
from whileai.registry import Registry

QUESTIONS = ["What is 2 + 3?", "What is 7 * 6?"]
GOLD = ["5", "42"]
SCRIPT = {"What is 2 + 3?": ["5", "6", "5", "5"], "What is 7 * 6?": ["41", "42", "42", "40"]}
PER_CALL = ("run_id", "lineage")


def contains_reference(prompt: str, completion: str, reference: str) -> bool:
    return reference in completion


def plain(rows: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in PER_CALL} for r in rows]


def test_evaluate_twice_asks_the_agent_once(tmp_path: Path) -> None:
    doubles = ModelDoubles({q: list(a) for q, a in SCRIPT.items()})
    registry = Registry.from_plugins(doubles)

    def evaluate() -> Any:
        return wai.evaluate(
            "agentfake:qwen",
            QUESTIONS,
            references=GOLD,
            judge=contains_reference,
            repeats=4,
            sampling={"temperature": 0.7},
            concurrency=1,
            registry=registry,
            cache=str(tmp_path),
        )

    first = evaluate()
    second = evaluate()
    calls = [len(agent.calls) for agent in doubles.agents]
    assert calls == [8, 0]  # seeded answers: the second call was answered from disk
    assert plain(first.rows) == plain(second.rows)
    assert first.report()["cache"]["misses"] == 8
    cached = second.report()["cache"]
    assert (cached["hits"], cached["misses"]) == (8, 0)
    assert cached["input_tokens_saved"] == 8 * 5  # what the agent double reports per call
    assert "response cache" in str(second.report())


@pytest.mark.plugins
def test_grading_the_same_rows_again_asks_the_judge_model_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = pytest.importorskip("whileai_judges.plugin")
    monkeypatch.setenv("WHILEAI_JUDGE", "judgefake:phi-4")
    doubles = ModelDoubles()
    registry = Registry.from_plugins(doubles, plugin)
    rows = wai.rows(QUESTIONS, [["5", "6"], ["42", "41"]], None, references=GOLD)
    first = wai.grade(rows, registry=registry, cache=tmp_path)
    second = wai.grade(rows, registry=registry, cache=tmp_path)
    asked = [len(judge.prompts) for judge in doubles.judges]
    assert asked == [4, 0]
    assert (
        [r["reward"] for r in second.rows]
        == [r["reward"] for r in first.rows]
        == [
            1.0,
            0.0,
            1.0,
            0.0,
        ]
    )
    assert second.report()["cache"]["hits"] == 4
