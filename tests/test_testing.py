"""whileai.testing: backends that answer from a script, registered through the real hook, so
a test drives a run exactly as a user's run is driven."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import whileai as wai
from whileai import hookimpl
from whileai.scoring import Verdict
from whileai.testing import BackendsPlugin, PleasedUser, ScriptedBackend, call_tool, say
from whileai.worlds import Situation, ToolResult


def test_a_scripted_backend_answers_from_its_script_and_keeps_what_it_was_sent() -> None:
    async def script(messages: Any, tools: Any) -> Any:
        return call_tool("look", {"q": 1}) if tools else "plain"

    backend = ScriptedBackend("agent:x", script)
    tool_answer = asyncio.run(backend.complete([{"role": "user", "content": "hi"}], [{"t": 1}]))
    text_answer = asyncio.run(backend.complete([{"role": "user", "content": "again"}]))
    assert tool_answer.tool_calls[0].name == "look" and tool_answer.finish_reason == "tool_calls"
    assert text_answer.text == "plain" and text_answer.model == "agent:x"
    assert backend.calls == [
        [{"role": "user", "content": "hi"}],
        [{"role": "user", "content": "again"}],
    ]
    assert backend.tools == [[{"t": 1}], None]
    asyncio.run(backend.aclose())
    assert backend.closed == 1


def test_a_double_told_not_to_record_keeps_nothing_of_a_long_run() -> None:
    user = PleasedUser("customer:pleased", record=False)
    registry = wai.Registry.from_plugins(
        BackendsPlugin(
            agent=lambda argument=None, **_: ScriptedBackend(
                "agent:polite", lambda messages, tools: "Your order is shipped.", record=False
            ),
            user=lambda argument=None, **_: user,
        ),
        TinyWorldPlugin(),
    )
    data = two_turn_run(registry, unique=50, repeats=4)
    # every rollout still met the user, who still answered: only the copies are gone
    assert [r["stop_reason"] for r in data.rows] == ["satisfied"] * 200
    assert user.calls == [] and user.tools == [] and user.sampling == []


def test_the_doubles_register_through_the_backend_hook_and_serve_a_whole_run() -> None:
    agent = ScriptedBackend("agent:polite", lambda messages, tools: say("Your order is shipped."))
    user = PleasedUser()
    doubles = BackendsPlugin(
        agent=lambda argument=None, **_: agent, user=lambda argument=None, **_: user
    )
    registry = wai.Registry.from_plugins(doubles, TinyWorldPlugin())
    assert [
        (e.kind, e.name, e.description) for e in wai.plugins(registry) if e.kind == "backend"
    ] == [
        ("backend", "agent", "test double"),
        ("backend", "user", "test double"),
    ]
    data = two_turn_run(registry, unique=2, repeats=1)
    assert [r["final_text"] for r in data.rows] == ["Your order is shipped."] * 2
    assert [r["stop_reason"] for r in data.rows] == ["satisfied"] * 2
    assert len(agent.calls) == 2 and len(user.calls) == 2
    assert user.calls[0][-1] == {"role": "user", "content": "Your order is shipped."}


def two_turn_run(registry: wai.Registry, unique: int, repeats: int) -> Any:
    """A run in the tiny world, the doubles registered as ``agent`` and ``user``: the agent
    answers, the user replies."""
    return wai.simulate(
        agent_model="agent",
        user_model="user",
        simulator="template",
        unique=unique,
        repeats=repeats,
        max_turns=2,
        advanced={"world": "tiny"},
        registry=registry,
    )


class TinyEpisode:
    def call(self, name: str, arguments: Any) -> ToolResult:
        return ToolResult({"ok": True})

    def state(self) -> dict[str, Any]:
        return {}

    def faults(self) -> list[dict[str, Any]]:
        return []

    def check(self, final_text: str, steps: Any) -> Verdict:
        return Verdict(1.0 if "shipped" in final_text else 0.0, "said shipped")


class TinyWorld:
    name = "tiny"
    version = "1"
    default_fault_rate = 0.0

    def tools(self) -> list[dict[str, Any]]:
        return []

    def dimensions(self) -> dict[str, list[Any]]:
        return {"difficulty": ["easy", "hard"]}

    def template_situation(self, spec: Any, rng: random.Random, phrasing: int = 0) -> Situation:
        return Situation(f"s{rng.random()}", "Where is my parcel?", dimensions=dict(spec))

    def new_episode(self, situation: Situation, rng: random.Random, fault_plan: Any = None) -> Any:
        return TinyEpisode()


class TinyWorldPlugin:
    @hookimpl
    def whileai_register_worlds(self, register: Any) -> None:
        register("tiny", TinyWorld)
