"""A real ``simulate(output=)`` run in a world that leaks its answer key every way it can:
its tool results carry the privileged block in one encoding after another, its final state
holds the hidden values raw and encoded, and its grader quotes them. Every byte the run writes
(the rows, the sidecar, ``data.save``, a graded copy's ``save``, ``wai.rank``'s rewrite) is
searched for every planted value, read as a person or a parser would."""

from __future__ import annotations

import json
import random
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

import whileai as wai
from whileai import hookimpl
from whileai.registry import Registry
from whileai.schema.reserved import unescaped
from whileai.scoring import Verdict
from whileai.testing import BackendsPlugin, PleasedUser, ScriptedBackend, call_tool
from whileai.worlds import FaultPlan, Situation, ToolResult

REFERENCE = "gold5e1d7c93a0b4f6"
STATUS = "status8a2f4b61c7d0"
ORDER = "order3c9e0d27f1a5b8"
OUTCOME = "outcome6b4a1e05c3d9"
PRINCIPLE = "never disclose principle 2f7d9c41"
RUBRIC = "full marks when rubric 9a0b3e62 is met"
PLANTED = (REFERENCE, STATUS, ORDER, OUTCOME, PRINCIPLE, RUBRIC)


def block() -> dict[str, Any]:
    return {
        "reference": REFERENCE,
        "hidden_state": {"status": STATUS, "order_id": ORDER},
        "goal": {"outcome": OUTCOME},
    }


def u_escaped(name: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in name)


#: How the world's tools hand the privileged block back, one encoding per situation.
ENCODINGS: list[Callable[[], Any]] = [
    lambda: {"order": "ok", "privileged": block()},
    lambda: json.dumps({"order": "ok", "Privileged": block()}),
    lambda: json.dumps({"data": json.dumps({"privileged": block()})}),
    lambda: json.dumps({"privileged": block()}).replace(
        '"privileged"', f'"{u_escaped("priv")}ileged"'
    ),
    lambda: "Here is the record: " + json.dumps({" PRIVILEGED ": block()}),
    lambda: repr({"privileged": block()}),
    lambda: json.dumps({"privileged": block(), "tail": "x" * 40})[:60],
    lambda: {json.dumps({"privileged": block()}): 1},
]


@attrs.define
class LeakyEpisode:
    situation: Situation
    index: int

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        if name == "broken":
            return ToolResult(None, error=f"upstream said {json.dumps({'privileged': block()})}")
        return ToolResult(ENCODINGS[self.index % len(ENCODINGS)]())

    def state(self) -> dict[str, Any]:
        # a world that forgot its promise: the hidden values raw, as JSON, JSON in JSON, a repr
        return {
            "status": STATUS,
            ORDER: {"status": STATUS.upper()},
            "dump": json.dumps({"order": ORDER, "outcome": OUTCOME}),
            "twice": json.dumps(json.dumps({"status": STATUS})),
            "repr": repr({"reference": REFERENCE}),
            "cut": ORDER[:13],
        }

    def faults(self) -> list[dict[str, Any]]:
        return []

    def check(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> Verdict:
        return Verdict(
            0.0,
            f"expected {REFERENCE!r} for order {ORDER} ({STATUS}); {PRINCIPLE}; {RUBRIC}",
            meta={
                "expected": [REFERENCE, OUTCOME],
                "as_json": json.dumps({"Reference": REFERENCE}),
            },
            quotes=[STATUS.upper()],
        )


@attrs.define
class LeakyWorld:
    name: str = "leaky"
    version: str = "1"
    default_fault_rate: float = 0.0

    def tools(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {"name": n, "description": n, "parameters": {"type": "object"}},
            }
            for n in ("lookup", "broken")
        ]

    def dimensions(self) -> dict[str, list[Any]]:
        return {"case": list(range(len(ENCODINGS)))}

    def template_situation(
        self, spec: Mapping[str, Any], rng: random.Random, phrasing: int = 0
    ) -> Situation:
        case = int(spec.get("case", 0))
        return Situation(
            situation_id=f"leaky-{case}",
            prompt="Where is my order?",
            dimensions={"case": case},
            hidden_state={"status": STATUS, "order_id": ORDER},
            goal={"outcome": OUTCOME},
            reference=REFERENCE,
            principle=PRINCIPLE,
            rubric=RUBRIC,
        )

    def new_episode(
        self, situation: Situation, rng: random.Random, fault_plan: FaultPlan | None = None
    ) -> LeakyEpisode:
        return LeakyEpisode(situation, int(situation.dimensions["case"]))


class EveryCase:
    """One situation per encoding, in order."""

    name = "every-case"

    def choose(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        n: int,
        rng: random.Random,
        arm_weights: Mapping[str, float] | None,
    ) -> list[dict[str, Any]]:
        cases = list(dimensions["case"])
        return [{"case": cases[i % len(cases)]} for i in range(n)]


class LeakyPlugin:
    @hookimpl
    def whileai_register_worlds(self, register: Any) -> None:
        register("leaky", lambda **options: LeakyWorld())

    @hookimpl
    def whileai_register_strategies(self, register: Any) -> None:
        register("every-case", EveryCase)


def agent_script(messages: Sequence[Mapping[str, Any]], tools: Any) -> Any:
    """Looks the order up, trips the broken tool, then answers without repeating anything."""
    tool_turns = sum(1 for m in messages if m.get("role") == "tool")
    if tool_turns == 0:
        return call_tool("lookup", {"reference": "PAY-1"}, call_id="c1")
    if tool_turns == 1:
        return call_tool("broken", {}, call_id="c2")
    return "I have looked into it."


def leaked(written: str) -> list[str]:
    """The planted values ``written`` holds as written, in any case, escapes decoded,
    URL-decoded, or cut to half their length or more (at least 12
    characters)."""
    views = {written}
    for _ in range(3):
        views |= {urllib.parse.unquote(v) for v in views} | {unescaped(v) for v in views}
    lowered = "\n".join(views).lower()
    return [v for v in PLANTED if v[: max(12, len(v) // 2)].lower() in lowered]


def every_byte_under(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_run_in_a_world_that_leaks_writes_no_privileged_value_anywhere(tmp_path: Path) -> None:
    registry = Registry.from_plugins(
        LeakyPlugin(),
        BackendsPlugin(
            agent=lambda argument=None, **_: ScriptedBackend("agent:leak-test", agent_script),
            customer=lambda argument=None, **_: PleasedUser("customer:pleased"),
        ),
    )
    out = tmp_path / "run"
    out.mkdir()
    knobs: dict[str, Any] = dict(
        registry=registry,
        agent_model="agent",
        user_model="customer",
        simulator="template",
        unique=len(ENCODINGS),
        repeats=2,
        strategy="every-case",
        fault_rate=0.0,
        seed=11,
        advanced={"world": "leaky"},
    )
    # the run does meet every leak: held in memory, its trajectories keep the values
    in_memory = wai.simulate(**knobs)
    assert all(REFERENCE in t["reason"] for t in in_memory.trajectories)
    data = wai.simulate(**knobs, output=str(out / "rows.jsonl"))
    rows = data.rows()
    assert len(rows) == 2 * len(ENCODINGS)
    # streamed, its trajectories are the rows read back from disk with the privileged block
    # put back for the judge: the reason is masked there as it is on disk
    assert {t["privileged"]["reference"] for t in data.trajectories} == {REFERENCE}
    assert not any(REFERENCE in t["reason"] for t in data.trajectories)
    assert len({r["scenario_id"] for r in rows}) == len(ENCODINGS)

    data.save(out / "saved.jsonl")
    graded = wai.grade(
        data.trajectories,
        judge=lambda row: Verdict(0.0, f"wanted {row['privileged']['reference']}"),
    )
    graded.save(out / "graded.jsonl")
    # rows a user wrote with their privileged block, ranked into a new file
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps(t) + "\n" for t in data.trajectories), encoding="utf-8")
    wai.rank(str(raw), judge=Longer(), output=str(out / "ranked.jsonl"))

    written = every_byte_under(out)
    assert {"rows.jsonl", "saved.jsonl", "graded.jsonl", "ranked.jsonl"} <= set(written)
    assert {name: leaked(text) for name, text in written.items() if leaked(text)} == {}
    assert leaked(json.dumps(rows, default=str)) == []
    assert leaked(json.dumps(graded.rows, default=str)) == []

    # and nothing the agent did was lost on the way: its tool call argument named reference
    # is its own data, its answer and the steps' shape are as they were
    shipped = rows[0]
    assert shipped["steps"][0]["tool_calls"][0]["arguments"] == {"reference": "PAY-1"}
    assert shipped["final_text"] == "I have looked into it."
    assert shipped["reason"].startswith("expected '***' for order *** (***)")


class Longer:
    name = "longer"
    version = "longer@1"

    def compare(self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]) -> str:
        return "tie"
