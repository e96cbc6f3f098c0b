"""A third-party world in front of a live service: its episodes start the service, list their
own tools, answer calls as coroutines, read the service's state when the talk is over, and are
closed exactly once, whether the rollout finished, failed to start, or was cut off."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pytest

import whileai as wai
from whileai import hookimpl
from whileai.registry import Registry
from whileai.scoring import Verdict
from whileai.simulations import episode_life
from whileai.testing import BackendsPlugin, PleasedUser, ScriptedBackend, call_tool
from whileai.worlds import FaultPlan, Situation, ToolResult


@attrs.define
class Service:
    """What the test watches: every episode's life, and how many calls were in flight."""

    started: list[str] = attrs.field(factory=list)
    closed: list[str] = attrs.field(factory=list)
    in_flight: int = 0
    most_in_flight: int = 0


def tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": name, "parameters": {"type": "object"}},
    }


@attrs.define
class RemoteEpisode:
    service: Service
    situation: Situation
    notes: list[str] = attrs.field(factory=list)
    final: dict[str, Any] | None = None

    async def start(self) -> None:
        if self.situation.dimensions["case"] == "down":
            raise ConnectionError("the service refused the connection")
        self.service.started.append(self.situation.situation_id)

    def tools(self) -> list[dict[str, Any]]:
        if self.situation.dimensions["case"] == "empty":
            raise LookupError("the service lists no tools")
        return [tool("add_note")]

    async def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        self.service.in_flight += 1
        self.service.most_in_flight = max(self.service.most_in_flight, self.service.in_flight)
        await asyncio.sleep(0.05)  # waiting on the service must not hold up other rollouts
        self.service.in_flight -= 1
        self.notes.append(str(arguments.get("text")))
        return ToolResult({"saved": len(self.notes)})

    async def finish(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> None:
        self.final = {"notes": list(self.notes)}

    def state(self) -> dict[str, Any]:
        assert self.final is not None, "finish() runs before state() is read"
        return self.final

    def faults(self) -> list[dict[str, Any]]:
        return []

    def check(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> Verdict:
        return Verdict(1.0 if self.notes == ["milk"] else 0.0, f"notes saved: {self.notes}")

    async def close(self) -> None:
        self.service.closed.append(self.situation.situation_id)


@attrs.define
class RemoteWorld:
    service: Service
    cases: tuple[str, ...] = ("up",)
    name: str = "remote"
    version: str = "1"
    default_fault_rate: float = 0.0

    def tools(self) -> list[dict[str, Any]]:
        raise AssertionError("the episode's own tools are offered, not the world's")

    def dimensions(self) -> dict[str, list[Any]]:
        return {"case": list(self.cases)}

    def template_situation(
        self, spec: Mapping[str, Any], rng: random.Random, phrasing: int = 0
    ) -> Situation:
        case = spec["case"]
        return Situation(f"remote-{case}", "Note down milk, please.", dimensions={"case": case})

    def new_episode(
        self, situation: Situation, rng: random.Random, fault_plan: FaultPlan | None = None
    ) -> RemoteEpisode:
        return RemoteEpisode(self.service, situation)


def note_taker(messages: Sequence[Mapping[str, Any]], tools: Any) -> Any:
    if not any(m.get("role") == "tool" for m in messages):
        return call_tool("add_note", {"text": "milk"}, call_id="n1")
    return "Noted: milk."


def registry(service: Service, cases: tuple[str, ...]) -> Registry:
    class Worlds:
        @hookimpl
        def whileai_register_worlds(self, register: Any) -> None:
            register("remote", lambda **_: RemoteWorld(service, cases))

    return Registry.from_plugins(
        Worlds(),
        BackendsPlugin(
            agent=lambda argument=None, **_: ScriptedBackend("agent:notes", note_taker),
            customer=lambda argument=None, **_: PleasedUser("customer:pleased"),
        ),
    )


def run(service: Service, cases: tuple[str, ...], **given: Any) -> Any:
    params: dict[str, Any] = {
        "agent_model": "agent",
        "user_model": "customer",
        "simulator": "template",
        "unique": len(cases),
        "repeats": 2,
        "fault_rate": 0.0,
        "seed": 3,
        "advanced": {"world": "remote"},
        **given,
    }
    return wai.simulate(registry=registry(service, cases), **params)


def test_a_live_service_world_runs_and_every_episode_is_closed_once() -> None:
    service = Service()
    data = run(service, ("up",), repeats=4)
    rows = data.rows()
    assert [r["reward"] for r in rows] == [1.0] * 4
    assert all(r["world_state"] == {"notes": ["milk"]} for r in rows)
    assert [r["steps"][1]["content"] for r in rows] == ['{"saved": 1}'] * 4
    assert sorted(service.closed) == sorted(service.started) == ["remote-up"] * 4
    # four rollouts waited on the service at the same time: the calls were awaited, not blocking
    assert service.most_in_flight > 1


def test_a_service_that_does_not_start_or_lists_no_tools_fails_its_rows_and_the_run_goes_on() -> (
    None
):
    service = Service()
    data = run(service, ("up", "down", "empty"))
    assert len(data.rows()) == 6
    down = [r for r in data.rows() if "refused" in (r.get("error") or "")]
    empty = [r for r in data.rows() if "lists no tools" in (r.get("error") or "")]
    up = [r for r in data.rows() if r.get("error") is None]
    assert len(down) == len(empty) == len(up) == 2
    assert all("could not start an episode: ConnectionError" in r["error"] for r in down)
    assert all(r["reward"] is None for r in down + empty), "a failed start is not scored 0"
    assert all(r["reward"] == 1.0 for r in up)
    # the episode that started and the one whose tools failed were closed; one that never
    # started was closed too, so a half-open connection is released
    assert sorted(service.closed) == sorted(
        ["remote-up"] * 2 + ["remote-down"] * 2 + ["remote-empty"] * 2
    )


def test_a_run_interrupted_mid_rollout_closes_the_episode_it_had_open() -> None:
    service = Service()

    def interrupted(messages: Sequence[Mapping[str, Any]], tools: Any) -> Any:
        if any(m.get("role") == "tool" for m in messages):
            raise KeyboardInterrupt  # the user pressed Ctrl-C while the service was up
        return call_tool("add_note", {"text": "milk"}, call_id="n1")

    with pytest.raises(KeyboardInterrupt):
        run(service, ("up",), repeats=1, agent_model=interrupted)
    assert service.started == service.closed == ["remote-up"]


def test_a_close_that_raises_is_reported_not_raised() -> None:
    class Sticky:
        def close(self) -> None:
            raise OSError("socket already gone")

    problem = asyncio.run(episode_life.close(Sticky()))  # type: ignore[arg-type]
    assert problem == "an episode did not close cleanly: OSError: socket already gone"
