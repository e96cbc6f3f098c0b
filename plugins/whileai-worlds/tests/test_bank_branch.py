"""``wai.branch`` on saved bank trajectories: the recorded steps replay exactly (the same
state, tool answers and faults), another policy decides from the branch point, and the rows
say where they branched from."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import whileai as wai
from whileai import hookimpl
from whileai.hookspecs import Register
from whileai.registry import Registry
from whileai.testing import ScriptedBackend, call_tool
from whileai_worlds.testing import ForthcomingCustomer, ScriptedBankAgent

#: hard transfers: half of them pass the customer's daily limit, which only a teller that
#: reads the limit before moving money catches
TRANSFERS = {"intent": ["transfer"], "difficulty": ["hard"], "mood": ["calm", "worried"]}


def hasty(messages: Sequence[Mapping[str, Any]], tools: Any) -> Any:
    """Moves the money without reading the limit: reads the accounts, then transfers (and asks
    again after an answer it cannot read)."""
    tool_messages = [m for m in messages if m["role"] == "tool"]
    answers = [_readable(m) for m in tool_messages]
    if answers and answers[-1] is None:
        previous = next(m for m in reversed(messages) if m.get("tool_calls"))
        call = previous["tool_calls"][0]["function"]
        return call_tool(call["name"], json.loads(call["arguments"]))
    good = [a for a in answers if a is not None]
    if any("from_balance" in a for a in good):
        return "Done."
    listed = next((a for a in good if "accounts" in a), None)
    if listed is None:
        customer = next(a["customer_id"] for a in good if "customer_id" in a)
        return call_tool("list_accounts", {"customer_id": customer})
    checking = next(a for a in listed["accounts"] if a.get("type") == "checking")
    savings = next(a for a in listed["accounts"] if a.get("type") == "savings")
    request = next(str(m["content"]) for m in messages if m["role"] == "user")
    amount = float(next(w for w in request.split() if w[0].isdigit()).replace(",", ""))
    args = {"from_account": checking["account_id"], "to_account": savings["account_id"]}
    return call_tool("transfer", {**args, "amount": amount})


def _readable(message: Mapping[str, Any]) -> dict[str, Any] | None:
    try:
        answer = json.loads(message["content"])
    except ValueError:
        return None
    if not isinstance(answer, dict) or "error" in answer:
        return None
    if "accounts" in answer and not all("type" in a for a in answer["accounts"]):
        return None  # a partial answer lost the fields the transfer needs
    return answer


class Doubles:
    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        register("teller", lambda argument=None, **_: ScriptedBankAgent())
        register("hasty", lambda argument=None, **_: ScriptedBackend("hasty", hasty))
        register("customer", lambda argument=None, **_: ForthcomingCustomer())


def registry() -> Registry:
    return Registry.load(plugins=[Doubles()])


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    out = tmp_path / "bank.jsonl"
    wai.simulate(
        registry=registry(),
        agent_model="teller",
        user_model="customer",
        simulator="template",
        dimensions=TRANSFERS,
        strategy="grid",
        hard_share=1.0,
        unique=4,
        repeats=2,
        seed=9,
        fault_rate=0.25,
        max_tool_calls=14,
        output=str(out),
        advanced={"world": "bank", "max_tool_rounds": 8},
    )
    return out


def limits_step(row: Mapping[str, Any]) -> int:
    """Where the teller decided to read the customer's limit."""
    return next(
        i
        for i, s in enumerate(row["steps"])
        if s["role"] == "assistant"
        and any(c["name"] == "get_limits" for c in s.get("tool_calls") or ())
    )


def test_the_same_policy_branched_anywhere_plays_the_recorded_rollout_again(recorded: Path) -> None:
    rows = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert any(r["faults"] for r in rows), "the recording met faults, which the replay must too"
    for row in rows:
        at = limits_step(row)
        again = wai.branch(row_source(recorded, row), at, agent_model="teller", registry=registry())
        (branched,) = again.rows()
        # the world, its faults and the teller are deterministic: the whole rollout comes back
        assert branched["steps"] == row["steps"]
        assert branched["faults"] == row["faults"]
        assert branched["world_state"] == row["world_state"]
        assert branched["reward"] == row["reward"]
        assert branched["lineage"]["branched_from"] == row["lineage"]["rollout_key"]
        assert branched["lineage"]["branch_step"] == at


def row_source(recorded: Path, row: Mapping[str, Any]) -> Path:
    """The one row as a rows file beside the recording's sidecar."""
    single = recorded.with_name(f"one-{row['lineage']['rollout_key'].replace('/', '-')}.jsonl")
    single.write_text(json.dumps(row) + "\n")
    side = recorded.with_suffix(".meta.json")
    single.with_suffix(".meta.json").write_text(side.read_text())
    return single


def test_another_policy_decides_from_the_branch_point_and_compare_measures_it(
    recorded: Path,
) -> None:
    recorded_rows = [json.loads(line) for line in recorded.read_text().splitlines()]
    # retries after faults move the limit check; branch the rows that reach it at one step
    step, _ = Counter(limits_step(r) for r in recorded_rows).most_common(1)[0]
    rows = [r for r in recorded_rows if limits_step(r) == step]
    # rows without their sidecar: the run's settings are given again
    settings: dict[str, Any] = {
        "user_model": "customer",
        "fault_rate": 0.25,
        "max_tool_calls": 14,
        "registry": registry(),
        "advanced": {"world": "bank", "max_tool_rounds": 8},
    }
    careful = wai.branch(rows, step, agent_model="teller", repeats=2, **settings)
    hurried = wai.branch(rows, step, agent_model="hasty", repeats=2, **settings)
    assert len(careful.rows()) == len(hurried.rows()) == 2 * len(rows)
    for branched in hurried.rows():
        original = next(
            r for r in rows if r["lineage"]["rollout_key"] == branched["lineage"]["branched_from"]
        )
        assert branched["steps"][:step] == original["steps"][:step]
        assert not any(
            c["name"] == "get_limits"
            for s in branched["steps"][step:]
            for c in s.get("tool_calls") or ()
        )
        assert branched["model_version"] == "double-1" or branched["model_version"]
    over = {
        r["lineage"]["rollout_key"]
        for r in careful.trajectories
        if r["privileged"]["goal"]["complication"] == "over_limit"
    }
    assert over, "the recording holds a transfer past the limit"
    for r in hurried.rows():
        if r["lineage"]["rollout_key"] in over:
            assert r["reward"] == 0.0 and "transfers passed the daily limit" in r["reason"]
    # the careful teller, deterministic like the world, reaches what the recording reached
    by_key = {r["lineage"]["rollout_key"]: r["reward"] for r in rows}
    assert [r["reward"] for r in careful.rows()] == [
        by_key[r["lineage"]["branched_from"]] for r in careful.rows()
    ]
    careful_mean = sum(r["reward"] for r in careful.rows()) / len(careful.rows())
    hurried_mean = sum(r["reward"] or 0.0 for r in hurried.rows()) / len(hurried.rows())
    assert hurried_mean < careful_mean
    delta = wai.compare(careful.rows(), hurried.rows())
    print(delta)


def test_a_world_that_answers_otherwise_fails_the_branch_with_the_step(recorded: Path) -> None:
    rows = [json.loads(line) for line in recorded.read_text().splitlines()]
    faulted = next(r for r in rows if r["faults"])
    at = max(i for i, s in enumerate(faulted["steps"]) if s["role"] == "assistant")
    # without faults the replayed calls cannot answer as the faulted recording did
    diverged = wai.branch(
        faulted,
        at,
        agent_model="teller",
        fault_rate=0.0,
        registry=registry(),
        advanced={"world": "bank", "max_tool_rounds": 8},
    )
    (row,) = diverged.rows()
    assert row["stop_reason"] == "error" and row["reward"] is None
    assert (
        "BranchDiverged: step" in row["error"]
        and "came out otherwise than recorded" in row["error"]
    )


def test_branching_where_the_agent_made_no_decision_is_refused(recorded: Path) -> None:
    row = json.loads(recorded.read_text().splitlines()[0])
    tool_step = next(i for i, s in enumerate(row["steps"]) if s["role"] == "tool")
    with pytest.raises(
        ValueError, match=rf"row 0 .* has a tool step at {tool_step}; a branch redoes"
    ):
        wai.branch(row, tool_step, agent_model="teller", registry=registry())
    with pytest.raises(ValueError, match="past its last step"):
        wai.branch(row, 999, agent_model="teller", registry=registry())
    with pytest.raises(ValueError, match=r"branch\(at=\) is a step index"):
        wai.branch(row, -1, agent_model="teller", registry=registry())
    with pytest.raises(TypeError, match="branch\\(\\) takes a run"):
        wai.branch(42, 0, registry=registry())
