"""The shop world inside a real ``wai.simulate`` run, with a scripted support agent that does
the job right: rows carry the shop's final state, the faults that fired, and the shop's own
grade."""

from __future__ import annotations

import json
from typing import Any

import whileai as wai
from whileai import hookimpl
from whileai.hookspecs import Register
from whileai.registry import Registry
from whileai.testing import PleasedUser, ScriptedBackend
from whileai_worlds.testing import ScriptedSupportAgent


class DoublesPlugin:
    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        register("support", lambda argument=None, **_: ScriptedSupportAgent())
        register("customer", lambda argument=None, **_: PleasedUser("customer:pleased"))


def run(**params: Any) -> Any:
    return wai.simulate(
        registry=Registry.load(plugins=[DoublesPlugin()]),
        agent_model="support:scripted",
        user_model="customer:pleased",
        simulator="template",
        dimensions={
            "intent": ["refund", "track", "address_change"],
            "difficulty": ["easy"],
            "tone": ["polite", "angry"],
        },
        hard_share=0.0,
        strategy="grid",
        **params,
    )


def test_a_correct_agent_passes_every_shop_situation() -> None:
    data = run(unique=6, repeats=2, fault_rate=0.0, seed=3)
    rows = data.rows()
    assert len(rows) == 12
    assert {r["scenario_dimensions"]["intent"] for r in rows} == {
        "refund",
        "track",
        "address_change",
    }
    for row in rows:
        assert row["reward"] == 1.0, row["reason"]
        assert row["label_source"] == "world"
        assert row["world_state"]["changes"] or row["scenario_dimensions"]["intent"] == "track"
        assert row["faults"] == []
        assert row["markers"]["tool_errors"] == 0
        assert "privileged" not in row


def test_faults_land_on_the_rows_and_the_agent_recovers_from_loud_ones() -> None:
    data = run(
        unique=6,
        repeats=4,
        seed=4,
        fault_rate=0.3,
        advanced={"fault_kinds": ["timeout", "rate_limit"]},
    )
    rows = data.rows()
    faulted = [r for r in rows if r["faults"]]
    assert faulted, "at a 0.3 rate some of 24 rollouts meet a fault"
    for row in faulted:
        assert {f["kind"] for f in row["faults"]} <= {"timeout", "rate_limit"}
        assert row["markers"]["tool_errors"] == len(row["faults"])
    recovered = [r for r in faulted if r["reward"] == 1.0]
    assert recovered, [r["reason"] for r in faulted]


def test_a_garbled_answer_is_retried_not_a_crash() -> None:
    # the malformed fault cuts an answer's JSON short: the scripted agent retries the call as
    # it would a timeout, so the run has no errored rows and the benchmark grades every one
    data = run(unique=6, repeats=4, seed=5, fault_rate=0.4, advanced={"fault_kinds": ["malformed"]})
    rows = data.rows()
    assert any(f["kind"] == "malformed" for r in rows for f in r["faults"])
    assert not [r["error"] for r in rows if r.get("error")]
    assert all(r["reward"] is not None for r in rows)


def test_a_shop_configured_with_its_own_fault_plan_keeps_it_in_a_run() -> None:
    data = run(unique=6, repeats=2, seed=5, advanced={"world": "shop:timeout"})
    kinds = {f["kind"] for r in data.rows for f in r["faults"]}
    assert kinds == {"timeout"}
    assert data.report().world["fault_kinds"] == ["timeout"]


def test_tasks_replay_a_saved_shop_run_from_its_file(tmp_path: Any) -> None:
    """A saved row carries no privileged block: the shop rebuilds each situation's facts from
    the seed and spec on the row, so the replay plays the same situations to the same end."""
    out = tmp_path / "shop.jsonl"
    original = run(unique=6, repeats=1, seed=7, fault_rate=0.0, output=str(out))
    saved = [json.loads(line) for line in out.read_text().splitlines()]
    assert all("privileged" not in row for row in saved)
    replay = wai.simulate(
        registry=Registry.load(plugins=[DoublesPlugin(), Writer()]),
        tasks=saved,
        agent_model="support:scripted",
        user_model="customer:pleased",
        simulator="writer",  # a model writer is configured, and must not reword a replay
        repeats=1,
        fault_rate=0.0,
    )
    assert [r["prompt"] for r in replay.rows] == [r["prompt"] for r in original.rows]
    assert [r["reward"] for r in replay.rows] == [r["reward"] for r in original.rows]
    assert all(r["lineage"]["replayed"] and not r.get("error") for r in replay.rows)
    assert [r["seed"] for r in replay.rows] == [r["seed"] for r in original.rows]


def test_tasks_replay_bare_prompts_on_the_shop() -> None:
    data = wai.simulate(
        registry=Registry.load(plugins=[DoublesPlugin()]),
        tasks=["Where is my order A1234?", "Please refund my order."],
        agent_model="support:scripted",
        user_model="customer:pleased",
        repeats=1,
        fault_rate=0.0,
    )
    assert [r["prompt"] for r in data.rows] == [
        "Where is my order A1234?",
        "Please refund my order.",
    ]
    assert all(not r.get("error") and r["reward"] is not None for r in data.rows)
    assert {r["writer_model"] for r in data.rows} == {"seed"}


class Writer:
    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        register(
            "writer",
            lambda argument=None, **_: ScriptedBackend("writer", lambda m, t: "REWORDED"),
        )


def test_a_hard_shops_withheld_facts_reach_no_exported_field_but_the_episode() -> None:
    """What a hard situation withholds (the order id, the email, the order's status, the goal's
    outcome) and what the grader looked up (the tracking number) are masked in everything the
    run wrote about the episode; the agent's own words and its tool results keep them."""
    data = wai.simulate(
        registry=Registry.load(plugins=[DoublesPlugin()]),
        agent_model="support:scripted",
        user_model="customer:pleased",
        simulator="template",
        dimensions={"intent": ["refund", "track", "address_change"], "difficulty": ["hard"]},
        unique=6,
        repeats=1,
        hard_share=1.0,
        strategy="grid",
        fault_rate=0.0,
        seed=7,
    )
    checked = 0
    for memory, shipped in zip(data.trajectories, data.rows, strict=True):
        hidden = memory["privileged"]["hidden_state"]
        secret = [
            str(hidden[k])
            for k in ("order_id", "email", "status")
            if str(hidden[k]).lower() not in memory["prompt"].lower()
        ]
        secret.append(str(memory["privileged"]["goal"]["outcome"]))
        about = json.dumps(
            {k: shipped.get(k) for k in ("reason", "judge_meta", "world_state")}, default=str
        )
        in_memory = json.dumps(
            {k: memory.get(k) for k in ("reason", "judge_meta", "world_state")}, default=str
        )
        for value in secret:
            assert value in in_memory  # the leak was there to stop
            assert value not in about, (value, about[:300])
        checked += len(secret)
        assert shipped["final_text"] == memory["final_text"]
        assert shipped["steps"] == memory["steps"]
    assert checked >= 6 * 3
