"""A model writer writes whole shop situations: from the facts the shop exposes for the
episode, under its schema, checked by the shop, retried with the shop's reason, skipped
with that reason when no consistent one comes. The writer is a scripted backend registered
through the real backend hook; one test runs the embedded model."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

import whileai as wai
from whileai.registry import Registry
from whileai.testing import BackendsPlugin, PleasedUser, ScriptedBackend
from whileai_worlds.testing import ScriptedSupportAgent

EASY = {"intent": ["refund", "track"], "difficulty": ["easy"], "tone": ["polite"]}


def facts_of(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return dict(json.loads(messages[1]["content"])["facts"])


def good_situation(facts: Mapping[str, Any]) -> dict[str, Any]:
    order = facts["order_in_question"]
    wants = "a refund for" if facts["intent"] == "refund" else "to know where"
    return {
        "request": f"Hello, I would like {wants} my order {order}, please.",
        "persona": f"{facts['customer']['name']}, unhurried",
        "patience": 3,
        "order_id": order,
        "reference": f"the agent looks up {order} and reaches {facts['expected_outcome']}",
        "principle": "act only on the customer's own order, after looking it up",
        "rubric": "1 if the goal is reached with no wrong change, else 0",
    }


def writer_script(bad_first: int = 0, never: bool = False) -> Any:
    """Writes a consistent situation; with ``bad_first`` the first replies for each situation
    name an order the shop does not hold; with ``never``, it never replies with JSON."""
    seen: dict[str, int] = {}

    def script(messages: Sequence[Mapping[str, Any]], tools: Any) -> str:
        if "Write it in their own words" in str(messages[-1]["content"]):
            return (
                "Hi again, " + str(messages[-1]["content"]).split("request: ", 1)[1].split("\n")[0]
            )
        if never:
            return "Sure! Here is a lovely situation for you."
        facts = facts_of(messages)
        key = facts["situation_id"]
        seen[key] = seen.get(key, 0) + 1
        written = good_situation(facts)
        if seen[key] <= bad_first:
            written = {**written, "order_id": "A0000"}
        return json.dumps(written)

    return script


def run(writer: ScriptedBackend, **given: Any) -> Any:
    registry = Registry.load(
        plugins=[
            BackendsPlugin(
                support=lambda argument=None, **_: ScriptedSupportAgent(),
                customer=lambda argument=None, **_: PleasedUser("customer:pleased"),
                writer=lambda argument=None, **_: writer,
            )
        ]
    )
    params: dict[str, Any] = {
        "agent_model": "support",
        "user_model": "customer",
        "simulator": "writer",
        "dimensions": EASY,
        "hard_share": 0.0,
        "fault_rate": 0.0,
        "repeats": 1,
        **given,
    }
    return wai.simulate(registry=registry, **params)


def test_the_writer_writes_the_whole_situation_from_the_shops_facts() -> None:
    writer = ScriptedBackend("writer", writer_script())
    data = run(writer, unique=4, seed=2)
    assert len(data.rows) == 4
    sent = json.loads(writer.calls[0][1]["content"])
    assert set(sent) == {"situation", "facts", "schema"}
    assert sent["schema"]["required"][0] == "request"
    assert "order_in_question" in sent["facts"] and sent["facts"]["orders"]
    for row, trajectory in zip(data.rows, data.trajectories, strict=True):
        assert row["writer_model"] == "writer"
        assert row["prompt"].startswith("Hello, I would like ")
        privileged = trajectory["privileged"]
        assert privileged["principle"].startswith("act only on the customer's own order")
        assert privileged["rubric"] and privileged["reference"].startswith("the agent looks up")
        assert privileged["hidden_state"]["order_id"] in row["prompt"]
        # consistent with the shop's state: the scripted agent reaches the goal
        assert row["reward"] == 1.0, row["reason"]
        assert "principle" not in row and "privileged" not in row


def test_an_inconsistent_situation_is_sent_back_with_the_shops_reason() -> None:
    writer = ScriptedBackend("writer", writer_script(bad_first=1))
    data = run(writer, unique=2, seed=3)
    assert len(data.rows) == 2 and all(r["reward"] == 1.0 for r in data.rows)
    retries = [c for c in writer.calls if len(c) > 2]
    assert len(retries) == 2
    feedback = retries[0][-1]["content"]
    assert feedback.startswith("That does not fit the world: order_id 'A0000' is no order the shop")
    assert data.report().search["skipped"] == 0


def test_a_writer_that_never_fits_skips_situations_with_the_reason_and_never_crashes() -> None:
    writer = ScriptedBackend("writer", writer_script(never=True))
    data = run(writer, unique=2, seed=4)
    search = data.report().search
    assert len(data.rows) == 0
    assert search["skipped"] > 0 and search["stopped_short"]
    (reason,) = search["rejections"]
    assert reason == ("writer: no consistent situation in 3 tries (the reply holds no JSON object)")
    assert any("stopped at 0 of 2 situations" in w for w in data.warnings)


def test_more_phrasings_reword_the_written_request_and_keep_its_facts() -> None:
    writer = ScriptedBackend("writer", writer_script())
    data = run(writer, unique=2, phrasings=2, seed=5)
    by_situation: dict[int, list[dict[str, Any]]] = {}
    for trajectory in data.trajectories:
        by_situation.setdefault(trajectory["lineage"]["situation"], []).append(trajectory)
    for first, second in by_situation.values():
        assert second["prompt"] == "Hi again, " + first["prompt"]
        assert first["privileged"]["hidden_state"] == second["privileged"]["hidden_state"]


def test_a_template_writer_still_writes_offline() -> None:
    data = run(ScriptedBackend("writer", writer_script()), simulator="template", unique=2)
    assert {r["writer_model"] for r in data.rows} == {"template"}


@pytest.mark.slow
def test_the_embedded_model_as_writer_writes_or_is_skipped_with_a_reason() -> None:
    """SmolLM2 rarely writes JSON the shop accepts; the run must still end with every
    situation either written (and played) or skipped with the shop's reason."""
    registry = Registry.load(
        plugins=[
            BackendsPlugin(
                support=lambda argument=None, **_: ScriptedSupportAgent(),
                customer=lambda argument=None, **_: PleasedUser("customer:pleased"),
            )
        ]
    )
    data = wai.simulate(
        registry=registry,
        agent_model="support",
        user_model="customer",
        simulator="local:smollm2",
        dimensions=EASY,
        hard_share=0.0,
        fault_rate=0.0,
        unique=2,
        repeats=1,
        advanced={"writer_retries": 1, "writer_max_tokens": 200},
    )
    search = data.report().search
    assert len(data.rows) + search["skipped"] >= 2
    assert all(r["writer_model"] == "local:smollm2" for r in data.rows)
    for reason in search["rejections"]:
        assert reason.startswith("writer: no consistent situation in 2 tries")
