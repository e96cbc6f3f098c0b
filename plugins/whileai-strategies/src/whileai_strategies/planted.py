"""A world with planted failures, to measure how fast a search strategy finds them.

Situations vary over ``topic`` (5 values) x ``channel`` (4) x ``tone`` (3): 60 cells. The
instant agent (``planted:agent``) answers every situation right except in the planted failure
regions, and except for two rare quirks a situation may be drawn with (one draw in ten each,
in any cell), which send it down a wrong path of its own (its behaviour signature shows it).
The regions are shaped as real agents' failures are, clustered rather than scattered, each
set off by two values meeting (most failures combinatorial testing finds need one value or
two): every tone of account questions by email, every channel of angry billing questions, and
warranty questions by phone unless polite; nine failing cells in all. A planted failure (a
failing cell, or a quirk) is found when some rollout failed on it. Nothing here calls a model, so a
benchmark or a test measures the strategy, not the agent.

Register ``PlantedPlugin()`` to use it: ``world="planted"``, ``agent_model="planted:agent"``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from whileai.backends import Completion, Sampling, ToolCall
from whileai.hookspecs import Register, hookimpl
from whileai.scoring import Verdict
from whileai.worlds import FaultPlan, Situation, ToolResult

DIMENSIONS: dict[str, list[str]] = {
    "topic": ["billing", "shipping", "returns", "account", "warranty"],
    "channel": ["chat", "email", "phone", "social"],
    "tone": ["polite", "curt", "angry"],
}

#: The cells where the agent fails, whatever the draw: three regions of 3, 4 and 2 cells.
FAILING_CELLS: tuple[tuple[str, str, str], ...] = (
    *(("account", "email", tone) for tone in DIMENSIONS["tone"]),
    *(("billing", channel, "angry") for channel in DIMENSIONS["channel"]),
    ("warranty", "phone", "curt"),
    ("warranty", "phone", "angry"),
)

#: Rare quirks of a draw, each in one draw of ten, and the wrong tool each sends the agent to.
QUIRKS: dict[str, str] = {"forgotten_id": "escalate", "double_charge": "refund_twice"}
QUIRK_CHANCE = 0.1

_REQUEST = re.compile(r"a (\w+) (\w+) question by (\w+)")
_NOTE = re.compile(r"Note: (\w+)\.")

#: Every planted failure by name: the nine failing cells and the two quirks.
PLANTED: tuple[str, ...] = (*("/".join(c) for c in FAILING_CELLS), *QUIRKS)


def _cell(spec: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(spec.get("topic")), str(spec.get("channel")), str(spec.get("tone")))


def planted_found(row: Mapping[str, Any]) -> str | None:
    """Which planted failure a failed row reveals (None for a pass, or a failure of no
    planted kind)."""
    if row.get("reward") is None or row["reward"] >= 0.5:
        return None
    # the agent fails a failing cell before it reads a quirk, so the cell is the cause
    cell = _cell(row.get("scenario_dimensions") or {})
    if cell in FAILING_CELLS:
        return "/".join(cell)
    quirk = (row.get("world_state") or {}).get("quirk")
    return str(quirk) if quirk in QUIRKS else None


@attrs.define
class PlantedEpisode:
    situation: Situation
    calls: list[str] = attrs.field(factory=list)

    def call(self, name: str, arguments: Mapping[str, Any], step: int | None = None) -> ToolResult:
        self.calls.append(name)
        return ToolResult({"done": name})

    def state(self) -> dict[str, Any]:
        return {"quirk": self.situation.hidden_state.get("quirk"), "calls": list(self.calls)}

    def faults(self) -> list[dict[str, Any]]:
        return []

    def check(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> Verdict:
        ok = final_text == "resolved" and self.calls == ["resolve"]
        return Verdict(1.0 if ok else 0.0, "resolved" if ok else f"went wrong: {self.calls}")


@attrs.define
class PlantedWorld:
    name: str = "planted"
    version: str = "1"
    default_fault_rate: float = 0.0

    def tools(self) -> list[dict[str, Any]]:
        return [
            {"type": "function", "function": {"name": n, "description": n, "parameters": {}}}
            for n in ("resolve", *QUIRKS.values())
        ]

    def dimensions(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in DIMENSIONS.items()}

    def template_situation(
        self, spec: Mapping[str, Any], rng: random.Random, phrasing: int = 0
    ) -> Situation:
        draw = rng.random()
        quirk = None
        for i, name in enumerate(QUIRKS):
            if QUIRK_CHANCE * i <= draw < QUIRK_CHANCE * (i + 1):
                quirk = name
        ticket = rng.randint(1000, 9999)
        topic, channel, tone = _cell(spec)
        return Situation(
            situation_id=f"planted-{ticket}",
            prompt=f"Ticket {ticket}: a {tone} {topic} question by {channel}."
            + (f" Note: {quirk}." if quirk else ""),
            dimensions=dict(spec),
            hidden_state={"quirk": quirk, "ticket": ticket},
        )

    def new_episode(
        self, situation: Situation, rng: random.Random, fault_plan: FaultPlan | None = None
    ) -> PlantedEpisode:
        return PlantedEpisode(situation)


class PlantedAgent:
    """Resolves a ticket in one tool call, except in the planted cells (it answers without
    acting) and for the quirks (it calls the quirk's wrong tool)."""

    name = "planted:agent"

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        if messages[-1]["role"] == "tool":
            return Completion("resolved", "planted-1", {"model": "planted-1"})
        request = next(str(m["content"]) for m in messages if m["role"] == "user")
        asked = _REQUEST.search(request)
        if asked is None:
            return Completion("which ticket?", "planted-1", {"model": "planted-1"})
        tone, topic, channel = asked.groups()
        if (topic, channel, tone) in FAILING_CELLS:
            return Completion("cannot help", "planted-1", {"model": "planted-1"})
        note = _NOTE.search(request)
        tool = QUIRKS.get(note.group(1), "resolve") if note else "resolve"
        call = ToolCall(id="call-1", name=tool, arguments={})
        return Completion("", "planted-1", {"model": "planted-1"}, (call,), "tool_calls")


class PlantedPlugin:
    """The planted world and its instant agent, through the same hooks as any plugin."""

    @hookimpl
    def whileai_register_worlds(self, register: Register) -> None:
        register("planted", PlantedWorld, description="a world with planted failures")

    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        register("planted", lambda argument=None, **_: PlantedAgent())
