"""wai.evaluate: a fixed prompt set answered `repeats` times, built into rows the way wai.rows
builds them, graded the way wai.grade grades."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from judging_doubles import ModelDoubles

import whileai as wai
from whileai.registry import Registry
from whileai.schema.records import RowError, prompt_hash

QUESTIONS = ["What is 2 + 3?", "What is 7 * 6?", "What is 10 - 4?"]
GOLD = ["5", "42", "6"]
#: what the agent answers to each question, repeat by repeat
SCRIPT = {
    "What is 2 + 3?": ["5", "The answer is 5.", "6", "5"],
    "What is 7 * 6?": ["41", "42", "40", "41"],
    "What is 10 - 4?": ["6", "6", "6", "6"],
}


class ScriptedAgent:
    """A deterministic callable agent: the next scripted reply for the prompt."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = defaultdict(int)
        self.seeds: list[int] = []

    def __call__(self, prompt: str, seed: int) -> str:
        self.seeds.append(seed)
        reply = SCRIPT[prompt][self.seen[prompt]]
        self.seen[prompt] += 1
        return reply


def contains_reference(prompt: str, completion: str, reference: str) -> bool:
    return reference in completion


def test_a_callable_agent_graded_by_a_callable_judge() -> None:
    agent = ScriptedAgent()
    scored = wai.evaluate(
        agent,
        QUESTIONS,
        references=GOLD,
        judge=contains_reference,
        repeats=4,
        concurrency=1,  # one at a time, so the script is read in order
        registry=Registry.from_plugins(),
    )

    assert len(scored) == 12
    assert [r["final_text"] for r in scored.rows[:4]] == SCRIPT["What is 2 + 3?"]
    assert [r["reward"] for r in scored.rows] == [
        1.0, 1.0, 0.0, 1.0,
        0.0, 1.0, 0.0, 0.0,
        1.0, 1.0, 1.0, 1.0,
    ]  # fmt: skip
    row = scored.rows[0]
    assert row["task_id"] == prompt_hash("What is 2 + 3?")
    assert row["prompt"] == "What is 2 + 3?"
    assert row["schema_version"] == "1"
    assert row["sampling"] is None  # a callable agent: only you know how it samples
    assert row["model_version"].startswith("callable:")
    assert [r["lineage"]["repeat"] for r in scored.rows[:4]] == [0, 1, 2, 3]
    assert scored.trajectories[0]["privileged"] == {"reference": "5"}
    assert "privileged" not in row
    # each answer has its own seed, from seed=, its task and its repeat
    assert len(set(agent.seeds)) == 12
    assert [r["lineage"]["seed"] for r in scored.rows] == sorted(
        (r["lineage"]["seed"] for r in scored.rows), key=agent.seeds.index
    )

    # by hand: per-task pass rates 3/4, 1/4, 4/4; k = 4: pass^4 = (0 + 0 + 1) / 3,
    # pass@4 = (1 + 1 + 1) / 3
    report = scored.pass_at
    assert report.pass_at_1 == pytest.approx((0.75 + 0.25 + 1.0) / 3)
    assert report.k == 4
    assert report.pass_pow_k == pytest.approx(1 / 3)
    assert report.pass_at_k == pytest.approx(1.0)
    assert report.pass_at_1 == wai.pass_at(scored.rows).pass_at_1

    summary = scored.report()
    assert summary.agent is not None and summary.agent.startswith("callable:")
    assert (summary.repeats, summary.n_rows, summary.n_graded) == (4, 12, 12)
    assert "4 answers per prompt" in str(summary)


def test_the_same_seed_gives_the_same_seeds() -> None:
    def run(seed: int) -> list[int]:
        agent = ScriptedAgent()
        wai.evaluate(
            agent,
            QUESTIONS,
            judge=lambda row: 1.0,
            repeats=2,
            seed=seed,
            registry=Registry.from_plugins(),
        )
        return sorted(agent.seeds)

    assert run(7) == run(7)
    assert run(7) != run(8)


@pytest.mark.plugins
def test_math_equal_grades_the_answers() -> None:
    pytest.importorskip("whileai_verifiers")
    scored = wai.evaluate(
        ScriptedAgent(),
        QUESTIONS,
        references=GOLD,
        judge=wai.verify.MathEqual(),
        repeats=4,
        concurrency=1,
    )
    assert scored.rows[0]["judge_name"] == "MathEqual"
    assert scored.rows[0]["label_source"] == "verifier"
    # "The answer is 5." and "5" are both 5 to MathEqual
    assert [r["reward"] for r in scored.rows[:4]] == [1.0, 1.0, 0.0, 1.0]
    assert scored.pass_at.pass_at_1 == pytest.approx((0.75 + 0.25 + 1.0) / 3)


def test_an_agent_backend_registered_through_the_hooks() -> None:
    doubles = ModelDoubles({q: list(a) for q, a in SCRIPT.items()})
    registry = Registry.from_plugins(doubles)
    scored = wai.evaluate(
        "agentfake:qwen",
        QUESTIONS,
        references=GOLD,
        judge=contains_reference,
        repeats=2,
        sampling={"temperature": 0.7, "max_tokens": 64},
        system_prompt="Answer with a number.",
        task_ids=["add", "mul", "sub"],
        concurrency=1,
        registry=registry,
    )
    agent = doubles.agents[0]
    assert agent.closed  # built here from a spec, so closed here
    first = agent.calls[0]
    assert first["messages"] == [
        {"role": "system", "content": "Answer with a number."},
        {"role": "user", "content": "What is 2 + 3?"},
    ]
    assert (first["sampling"].temperature, first["sampling"].max_tokens) == (0.7, 64)
    seeds = [call["sampling"].seed for call in agent.calls]
    assert len(set(seeds)) == 6

    row = scored.rows[0]
    assert row["task_id"] == "add"
    assert row["model_version"] == "agent-double-7b"
    assert row["sampling"] == {"temperature": 0.7, "max_tokens": 64, "seed": seeds[0]}
    assert row["usage"]["input_tokens"] == 5 and row["usage"]["output_tokens"] == 1
    assert row["lineage"]["system_prompt_sha"] == prompt_hash("Answer with a number.")
    assert row["policy_version"] == f"agent-double-7b@{prompt_hash('Answer with a number.')}"
    assert row["messages"][0]["role"] == "system"
    assert scored.system_prompts == {prompt_hash("Answer with a number."): "Answer with a number."}
    assert [r["reward"] for r in scored.rows] == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]


def test_a_backend_object_is_used_and_left_open() -> None:
    doubles = ModelDoubles({q: list(a) for q, a in SCRIPT.items()})
    registry = Registry.from_plugins(doubles)
    backend = registry.resolve("backend", "agentfake:mine")
    scored = wai.evaluate(
        backend,
        QUESTIONS[:1],
        judge=contains_reference,
        references=GOLD[:1],
        repeats=2,
        registry=registry,
    )
    assert len(scored) == 2
    assert not backend.closed


def test_a_failed_completion_is_a_row_with_error_not_a_zero() -> None:
    doubles = ModelDoubles({q: list(a) for q, a in SCRIPT.items()})
    questions = [*QUESTIONS[:2], "This server is unreachable. What is 1 + 1?"]
    scored = wai.evaluate(
        "agentfake:qwen",
        questions,
        references=[*GOLD[:2], "2"],
        judge=contains_reference,
        repeats=2,
        registry=Registry.from_plugins(doubles),
    )
    failed = scored.rows[4:]
    for row in failed:
        assert row["error"].startswith("agentfake:qwen failed (connect): connection refused")
        assert row["reward"] is None
        assert row["judge_status"] == "skipped"
        assert row["final_text"] == "" and row["steps"] == []
    assert all(r.get("error") is None for r in scored.rows[:4])
    report = scored.report()
    assert report.n_failed_rollouts == 2 and report.n_graded == 4
    assert any("2 of 6 completions failed" in n for n in report.notes)
    # the failed task is left out of the pass rates, not counted as a failure
    assert set(scored.pass_at.per_task) == {prompt_hash(q) for q in QUESTIONS[:2]}


def test_an_agent_callable_that_raises_gives_error_rows() -> None:
    def agent(prompt: str) -> str:
        raise TimeoutError("took too long")

    scored = wai.evaluate(
        agent,
        QUESTIONS,
        judge=contains_reference,
        references=GOLD,
        repeats=1,
        registry=Registry.from_plugins(),
    )
    assert all("TimeoutError: took too long" in r["error"] for r in scored.rows)
    assert scored.report().n_graded == 0
    assert scored.report().pass_at is None


def test_an_async_agent_that_takes_messages() -> None:
    seen: list[Any] = []

    async def agent(messages: list[dict[str, str]]) -> str:
        seen.append(messages)
        return "5"

    scored = wai.evaluate(
        agent,
        QUESTIONS[:1],
        references=GOLD[:1],
        judge=contains_reference,
        system_prompt="Be brief.",
        repeats=2,
        registry=Registry.from_plugins(),
    )
    assert seen[0] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 3?"},
    ]
    assert [r["reward"] for r in scored.rows] == [1.0, 1.0]


@pytest.mark.plugins
def test_the_default_judge_is_the_rubric_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = pytest.importorskip("whileai_judges.plugin")
    doubles = ModelDoubles({q: list(a) for q, a in SCRIPT.items()})
    monkeypatch.setenv("WHILEAI_JUDGE", "judgefake:phi-4")
    scored = wai.evaluate(
        "agentfake:qwen",
        QUESTIONS,
        references=GOLD,
        repeats=2,
        concurrency=1,
        registry=Registry.from_plugins(doubles, plugin),
    )
    assert {r["judge_name"] for r in scored.rows} == {"rubric"}
    assert {r["judge_meta"]["model"] for r in scored.rows} == {"judgefake:phi-4"}
    assert [r["reward"] for r in scored.rows] == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert doubles.judges[0].closed and doubles.agents[0].closed
    assert scored.self_judged is False


def test_bad_arguments_are_refused_before_any_call() -> None:
    agent = ScriptedAgent()
    registry = Registry.from_plugins()
    with pytest.raises(ValueError, match="repeats="):
        wai.evaluate(agent, QUESTIONS, judge=contains_reference, repeats=0, registry=registry)
    with pytest.raises(ValueError, match="pass seed="):
        wai.evaluate(
            agent, QUESTIONS, judge=contains_reference, sampling={"seed": 3}, registry=registry
        )
    with pytest.raises(RowError, match="prompts must be a list"):
        wai.evaluate(agent, "What is 2 + 3?", judge=contains_reference, registry=registry)
    with pytest.raises(RowError, match="references has 2 entries for 3 prompts"):
        wai.evaluate(
            agent, QUESTIONS, references=GOLD[:2], judge=contains_reference, registry=registry
        )
    with pytest.raises(TypeError, match="agent="):
        wai.evaluate(42, QUESTIONS, judge=contains_reference, registry=registry)
    assert agent.seeds == []


@pytest.mark.slow
@pytest.mark.plugins
def test_the_embedded_model_answers_reproducibly_at_a_fixed_seed() -> None:
    pytest.importorskip("whileai_local")
    pytest.importorskip("whileai_verifiers")

    def run() -> Any:
        return wai.evaluate(
            "local:smollm2",
            ["What is 2 + 3?", "What is 7 * 6?"],
            references=["5", "42"],
            judge=wai.verify.MathEqual(),
            repeats=2,
            sampling={"temperature": 0.7, "max_tokens": 12},
            seed=3,
        )

    first, second = run(), run()
    assert len(first) == 4
    assert [r["final_text"] for r in first.rows] == [r["final_text"] for r in second.rows]
    for row in first.rows:
        assert row["judge_status"] == "ok" and row["reward"] in (0.0, 1.0)
        assert row["sampling"]["max_tokens"] == 12
        assert row["usage"]["output_tokens"] <= 12
        assert row.get("error") is None
    assert first.report().agent == "local:smollm2"


def test_an_evaluation_counts_its_answers_and_then_its_grading_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    wai.evaluate(
        ScriptedAgent(),
        QUESTIONS,
        references=GOLD,
        judge=contains_reference,
        repeats=4,
        concurrency=1,
        registry=Registry.from_plugins(),
    )
    answers, graded = capsys.readouterr().err.splitlines()
    assert answers.startswith("whileai: 12/12 answers, ") and answers.endswith(", errors 0")
    assert graded.startswith("whileai: 12/12 rows graded, ") and graded.endswith(", errors 0")


ANSWER_SLOWLY = """
import asyncio, pathlib, sys
import whileai as wai
from whileai.registry import Registry

started = pathlib.Path(sys.argv[1])

async def slow_agent(prompt):
    started.touch()
    await asyncio.sleep(0.05)
    return "42"

wai.evaluate(slow_agent, [f"question {i}" for i in range(100)], repeats=4, concurrency=1,
             judge=lambda prompt, completion: True, registry=Registry.from_plugins())
"""


def test_ctrl_c_mid_evaluation_says_what_was_lost_and_what_asking_again_costs(
    tmp_path: Any, interrupt: Any
) -> None:
    import sys

    started = tmp_path / "started"
    stopped = interrupt([sys.executable, "-c", ANSWER_SLOWLY, str(started)], started.exists)
    assert stopped.returncode != 0
    (said,) = [x for x in stopped.stderr.splitlines() if x.startswith("whileai: stopped")]
    assert said.startswith("whileai: stopped at ") and said.endswith(
        "/400 answers: the answers were held in memory and are gone; evaluating again asks the "
        "agent again, except what a response cache holds (cache=, or WHILEAI_CACHE)"
    )
