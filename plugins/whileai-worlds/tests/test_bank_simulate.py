"""The bank world inside real ``wai.simulate`` runs: a scripted teller that keeps the policy
passes every situation (hard ones too, asking for the identity details the customer
withholds), faults land on the rows, and a saved run replays and resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import whileai as wai
from whileai import hookimpl
from whileai.hookspecs import Register
from whileai.registry import Registry
from whileai_worlds.testing import ForthcomingCustomer, ScriptedBankAgent

GRID = {
    "intent": ["transfer", "balance", "freeze_card"],
    "difficulty": ["easy", "hard"],
    "mood": ["calm", "worried"],
}


class Doubles:
    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        register("teller", lambda argument=None, **_: ScriptedBankAgent())
        register("customer", lambda argument=None, **_: ForthcomingCustomer())


def run(**given: Any) -> Any:
    params: dict[str, Any] = {
        "agent_model": "teller",
        "user_model": "customer",
        "simulator": "template",
        "dimensions": GRID,
        "strategy": "grid",
        "hard_share": 0.5,
        "unique": 12,
        "repeats": 1,
        "seed": 21,
        "fault_rate": 0.0,
        "max_tool_calls": 14,
        **given,
    }
    advanced = {"world": "bank", "max_tool_rounds": 8}
    return wai.simulate(registry=Registry.load(plugins=[Doubles()]), advanced=advanced, **params)


def test_a_teller_that_keeps_the_policy_passes_every_bank_situation() -> None:
    data = run()
    rows = data.trajectories
    assert len(rows) == 12
    assert {r["scenario_dimensions"]["intent"] for r in rows} == set(GRID["intent"])
    assert [r["reward"] for r in rows] == [1.0] * 12, [r["reason"] for r in rows]
    hard = [r for r in rows if r["scenario_dimensions"]["difficulty"] == "hard"]
    # a hard customer gave the identity details only when the teller asked for them
    assert hard and all(r["steps"][0]["content"].startswith("Could you give me") for r in hard)
    over = [r for r in rows if r["privileged"]["goal"].get("complication") == "over_limit"]
    for row in over:
        assert row["world_state"]["changes"] == []
        assert "passes your daily limit" in row["final_text"]
    assert data.report()["world"]["name"] == "bank"
    assert data.metadata["system_prompt_sha"]


def test_faults_land_on_bank_rows_and_loud_ones_are_retried() -> None:
    data = run(fault_rate=0.3, unique=12, repeats=2)
    rows = data.rows()
    faults = [f for r in rows for f in r["faults"]]
    assert len({f["kind"] for f in faults}) >= 4
    for row in rows:
        for fault in row["faults"]:
            assert row["steps"][fault["step"]]["fault"] == fault["kind"]
    assert sum(r["reward"] == 1.0 for r in rows) >= len(rows) // 2
    assert all(r["reward"] in (0.0, 1.0) for r in rows)


def test_a_saved_bank_run_replays_and_a_cut_one_resumes(tmp_path: Path) -> None:
    out = tmp_path / "bank.jsonl"
    original = run(unique=6, output=str(out))
    saved = [json.loads(line) for line in out.read_text().splitlines()]
    assert all("privileged" not in row for row in saved)
    replay = run(tasks=saved, unique=None, dimensions=None, strategy=None, hard_share=None)
    assert sorted(r["prompt"] for r in replay.rows()) == sorted(
        r["prompt"] for r in original.rows()
    )
    assert [r["reward"] for r in replay.rows()] == [1.0] * 6

    # a streamed run's rows are read from its file: take what is compared before it is cut
    original_keys = sorted(r["lineage"]["rollout_key"] for r in original.rows())
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    run(unique=6, output=str(out), resume=True)
    keys = [json.loads(x)["lineage"]["rollout_key"] for x in out.read_text().splitlines()]
    assert sorted(keys) == original_keys
