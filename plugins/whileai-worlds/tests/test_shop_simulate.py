"""The shop world inside a real ``wai.simulate`` run, with a scripted support agent that does
the job right: rows carry the shop's final state, the faults that fired, and the shop's own
grade."""

from __future__ import annotations

from typing import Any

import whileai as wai
from whileai import hookimpl
from whileai.hookspecs import Register
from whileai.registry import Registry
from whileai.testing import PleasedUser
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


def test_a_shop_configured_with_its_own_fault_plan_keeps_it_in_a_run() -> None:
    data = run(unique=6, repeats=2, seed=5, advanced={"world": "shop:timeout"})
    kinds = {f["kind"] for r in data.rows for f in r["faults"]}
    assert kinds == {"timeout"}
    assert data.report().world["fault_kinds"] == ["timeout"]
