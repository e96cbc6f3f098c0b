"""The attribution judge: the failures the rules leave to the agent go to a model that reads
the transcript with what the simulated user was told, and its verdict is recorded with where
it came from; an answer it cannot read leaves the rules' verdict, saying why."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import whileai as wai
from whileai.simulations.attribution_judge import read_answer
from whileai.testing import BackendsPlugin, ScriptedBackend

from .sim_doubles import BASE, registry


def run_with_judge(answer: str, seen: list[dict[str, Any]]) -> Any:
    def judge(messages: Sequence[Mapping[str, Any]], tools: Any) -> str:
        seen.append(json.loads(messages[1]["content"]))
        return answer

    judges = BackendsPlugin(blame=lambda argument=None, **_: ScriptedBackend("blame:v1", judge))
    advanced = {**BASE["advanced"], "attribution_model": "blame:v1"}
    return wai.simulate(
        **{**BASE, "advanced": advanced},
        registry=registry(judges),
        unique=12,
        repeats=4,
        seed=2,
        fault_rate=0.5,
    )


def test_the_rules_fall_through_goes_to_the_judge_and_is_recorded_with_its_source() -> None:
    seen: list[dict[str, Any]] = []
    data = run_with_judge('{"owner": "user", "reason": "the user asked for another order"}', seen)
    failed = [r for r in data.rows if r["reward"] is not None and r["reward"] < 0.5]
    judged = [r for r in failed if r["failure_owner"]["source"] == "judge"]
    ruled = [r for r in failed if r["failure_owner"]["source"] == "rules"]
    assert judged and len(seen) == len(judged), "one judge call per fall-through failure"
    for row in judged:
        owner = row["failure_owner"]
        assert owner["owner"] == "user" and owner["reason"] == "the user asked for another order"
        assert owner["judge_model"] == "blame:v1"  # the model the answer came from
        assert owner["rules"]["owner"] == "agent"
    # the rules' own evidence (a fault that withheld every answer) is not second-guessed
    assert all(r["failure_owner"]["owner"] != "agent" for r in ruled)
    # the judge read the request, who the user was and what it knew, and the transcript
    case = seen[0]
    assert {"request", "user_persona", "user_knows", "user_patience", "transcript"} <= set(case)
    shares = data.report()["failures"]
    assert shares["by_source"] == {"judge": len(judged), "rules": len(ruled)}
    assert shares["user"]["n"] >= len(judged)
    assert "decided by the attribution judge" in str(data.report())


def test_an_answer_the_judge_botched_leaves_the_rules_verdict_and_says_why() -> None:
    data = run_with_judge("The agent, I think.", [])
    failed = [r for r in data.rows if r["reward"] is not None and r["reward"] < 0.5]
    botched = [r for r in failed if "judge_problem" in r["failure_owner"]]
    assert botched
    for row in botched:
        assert row["failure_owner"]["source"] == "rules"
        assert row["failure_owner"]["owner"] == "agent"
        assert "blame:v1: the answer holds no JSON object" in row["failure_owner"]["judge_problem"]


def test_the_judges_reply_is_read_strictly() -> None:
    assert read_answer('Sure: {"owner": "world", "reason": "every lookup timed out"}') == (
        "world",
        "every lookup timed out",
    )
    assert "not one of agent, user, world" in str(read_answer('{"owner": "me", "reason": "x"}'))
    assert read_answer('{"owner": "user"}') == "the answer gives no reason"
    assert "does not parse" in str(read_answer('{"owner": user}'))
