"""Any MCP server as a whileai world.

``advanced={"world": "mcp:python my_server.py", "world_options": {"situations": "seeds.jsonl"}}``
puts the run's agent in front of that server: each episode starts its own server process over
stdio (or, for an ``http://`` URL, connects to the running server and calls its reset tool),
offers the server's tools to the agent, and routes every call to the server with the run's
fault plan applied in between. Situations come from the user's seeds (``whileai_mcp.seeds``)
or a model writer given the seeds and the server's tools; checks call the server's own tools,
run the user's Python, or are left to ``judge=``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import random
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from whileai.faults import coerce_fault_plan
from whileai.worlds import FaultPlan, Situation
from whileai_mcp.episode import McpEpisode, ServerSlots, Settings
from whileai_mcp.seeds import Seeds, parse_check
from whileai_mcp.target import Target, named_target, parse_target

#: The rate a plan without its own fires at: the same as the built-in worlds', so a run
#: against a server meets faults unless fault_rate=0 says otherwise.
DEFAULT_FAULT_RATE = 0.1


def _plugin_version() -> str:
    try:
        return importlib.metadata.version("whileai-mcp")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "0+unknown"


def _probe_tools(settings: Settings) -> list[dict[str, Any]]:
    """Start the server once, list its tools, stop it: for the writer, which needs the tools
    before any episode runs. In a thread of its own, as the caller may be inside a loop."""
    found: list[list[dict[str, Any]]] = []
    failed: list[BaseException] = []

    async def probe() -> None:
        situation = Situation("probe", "probe", goal={"checks": []})
        # a probe only lists, so it needs no turn at a shared server
        alone = attrs.evolve(settings, slots=None)
        episode = McpEpisode(alone, situation, random.Random(0), FaultPlan(), 0.0)
        try:
            await episode.start(reset=False)
            found.append(episode.tools())
        finally:
            await episode.close()

    def run() -> None:
        try:
            asyncio.run(probe())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run, name="whileai-mcp-probe")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return found[0]


@attrs.define
class McpWorld:
    """A world whose tools, state and checks are an MCP server's."""

    settings: Settings
    seeds: Seeds
    fault_plan: FaultPlan = attrs.field(factory=FaultPlan)
    default_fault_rate: float = DEFAULT_FAULT_RATE
    name: str = "mcp"
    version: str = attrs.field(factory=_plugin_version)
    _listed: list[dict[str, Any]] | None = None

    # -- what the engine asks of a world ----------------------------------------------------
    def tools(self) -> list[dict[str, Any]]:
        """The server's tools, listed once (episodes list their own as they start)."""
        if self._listed is None:
            self._listed = _probe_tools(self.settings)
        return list(self._listed)

    def dimensions(self) -> dict[str, list[Any]]:
        return {"situation": [s.situation_id for s in self.seeds.situations]}

    def template_situation(
        self, spec: Mapping[str, Any], rng: random.Random, phrasing: int = 0
    ) -> Situation:
        """The seed ``spec["situation"]`` names (a seeded draw when it names none), worded by
        its ``phrasing``-th phrasing."""
        chosen = spec.get("situation")
        if chosen is None:
            pool = [s for s in self.seeds.situations if _matches(s, spec)] or list(
                self.seeds.situations
            )
            situation = pool[rng.randrange(len(pool))]
        else:
            situation = self.seeds.by_id(str(chosen))
        worded = self.seeds.phrasings[situation.situation_id]
        return attrs.evolve(situation, prompt=worded[phrasing % len(worded)])

    def new_episode(
        self, situation: Situation, rng: random.Random, fault_plan: FaultPlan | None = None
    ) -> McpEpisode:
        plan = fault_plan if fault_plan is not None else self.fault_plan
        return McpEpisode(
            self.settings, situation, rng, plan, plan.effective_rate(self.default_fault_rate)
        )

    # -- what a model writer gets -----------------------------------------------------------
    def situation_facts(self, spec: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
        """The server's tools and one of the user's seeds, as the example to write after."""
        example = self.template_situation(spec, rng)
        return {
            "tools": [
                {"name": t["function"]["name"], "description": t["function"]["description"]}
                for t in self.tools()
            ],
            "example": {
                "prompt": example.prompt,
                "persona": example.persona,
                "patience": example.patience,
                "hidden_state": dict(example.hidden_state),
                "goal": dict(example.goal),
            },
        }

    def situation_schema(self) -> dict[str, Any]:
        check = {
            "type": "object",
            "required": ["tool", "arguments", "expect"],
            "properties": {
                "tool": {"type": "string", "description": "a tool of the server to read with"},
                "arguments": {"type": "object"},
                "expect": {"description": "what its answer holds when the goal is reached"},
            },
        }
        return {
            "type": "object",
            "required": ["prompt", "persona", "patience", "hidden_state", "goal", "checks"],
            "properties": {
                "prompt": {"type": "string", "description": "the user's first message"},
                "persona": {"type": "string", "description": "who the user is, one line"},
                "patience": {"type": "integer", "minimum": 1, "maximum": 6},
                "hidden_state": {
                    "type": "object",
                    "description": "what the user knows and gives only when asked",
                },
                "goal": {"type": "object", "description": "what a good rollout reaches"},
                "checks": {"type": "array", "minItems": 1, "items": check},
                "reference": {"type": "string"},
                "principle": {"type": "string"},
                "rubric": {"type": "string"},
            },
        }

    def situation_from_written(
        self, spec: Mapping[str, Any], facts: Mapping[str, Any], written: Mapping[str, Any]
    ) -> Situation:
        """The written situation, when its checks read tools the server has; a ValueError
        naming what is missing or unknown otherwise."""
        missing = [f for f in self.situation_schema()["required"] if f not in written]
        if missing:
            raise ValueError(f"the written situation lacks {missing}")
        prompt = written["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("the written situation's prompt is empty")
        tools = {t["name"] for t in facts["tools"]} | set(self.settings.hidden_tools)
        checks = written["checks"]
        if not isinstance(checks, list) or not checks:
            raise ValueError("the written situation has no checks; write at least one")
        parsed = [
            parse_check(c, f"written check {i}", allow_python=False) for i, c in enumerate(checks)
        ]
        unknown = sorted({c["tool"] for c in parsed} - tools)
        if unknown:
            raise ValueError(f"the checks read tools the server does not have: {unknown}")
        for name in ("hidden_state", "goal"):
            if not isinstance(written[name], Mapping):
                raise ValueError(f"the written situation's {name} must be an object")
        patience = written["patience"]
        if isinstance(patience, bool) or not isinstance(patience, int) or not 1 <= patience <= 6:
            raise ValueError(f"the written situation's patience must be 1 to 6, got {patience!r}")
        base = str(spec.get("situation", "written"))
        return Situation(
            situation_id=f"{base}-written",
            prompt=prompt,
            persona=str(written["persona"]),
            patience=patience,
            dimensions={"situation": base},
            hidden_state=dict(written["hidden_state"]),
            goal={**dict(written["goal"]), "checks": parsed},
            reference=written.get("reference"),
            principle=written.get("principle"),
            rubric=written.get("rubric"),
        )


def _matches(situation: Situation, spec: Mapping[str, Any]) -> bool:
    """The seed agrees with every dimension the spec names that the seed has."""
    return all(situation.dimensions[k] == v for k, v in spec.items() if k in situation.dimensions)


def make_mcp(
    argument: str | None = None,
    *,
    situations: str | Path | Sequence[Mapping[str, Any]] | None = None,
    config: str | Path | None = None,
    state_tool: str | None = None,
    reset_tool: str | None = None,
    hidden_tools: Iterable[str] = (),
    call_timeout_s: float = 30.0,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    fault_plan: Any = None,
    default_fault_rate: float = DEFAULT_FAULT_RATE,
    max_servers: int | None = None,
) -> McpWorld:
    """``"mcp:<command>"``, ``"mcp:http://127.0.0.1:<port>/mcp"``, or ``"mcp:<name>"`` with
    ``config=`` an MCP client's config file holding that server; the other options are
    ``advanced["world_options"]``'s. Every bad option is a ValueError naming it."""
    if config is not None:
        if env or cwd:
            raise ValueError("with config=, the server's env and cwd come from the config file")
        target: Target = named_target(config, (argument or "").strip())
    else:
        target = parse_target(argument or "", env=env, cwd=cwd)
    if situations is None:
        raise ValueError(
            "the MCP world needs situations: advanced={'world_options': "
            "{'situations': 'seeds.jsonl'}} (a JSONL or JSON file, or a list of objects)"
        )
    if not target.starts_a_process and reset_tool is None:
        raise ValueError(
            f"MCP server {target.spec!r} is shared by every episode: name its reset tool "
            "(world_options reset_tool=...), so no episode starts in another's state"
        )
    if not isinstance(call_timeout_s, int | float) or call_timeout_s <= 0:
        raise ValueError(
            f"call_timeout_s must be a positive number of seconds, got {call_timeout_s!r}"
        )
    if not 0 <= default_fault_rate <= 1:
        raise ValueError(f"default_fault_rate must lie in [0, 1], got {default_fault_rate!r}")
    if max_servers is not None:
        if isinstance(max_servers, bool) or not isinstance(max_servers, int) or max_servers < 1:
            raise ValueError(
                f"max_servers must be a whole number >= 1 (None: one server per rollout in "
                f"flight), got {max_servers!r}"
            )
        if not target.starts_a_process:
            raise ValueError(
                f"max_servers caps the server processes episodes start; {target.spec!r} is one "
                "running server every episode shares, one at a time"
            )
    hidden = set(hidden_tools) | {t for t in (state_tool, reset_tool) if t}
    # a shared server (a URL) is held by one episode at a time: its reset gives each a clean
    # store only while no other episode writes to it
    limit = max_servers if target.starts_a_process else 1
    settings = Settings(
        target=target,
        hidden_tools=frozenset(hidden),
        state_tool=state_tool,
        reset_tool=reset_tool,
        call_timeout_s=float(call_timeout_s),
        slots=ServerSlots(limit) if limit is not None else None,
    )
    return McpWorld(
        settings,
        Seeds.load(situations),
        fault_plan=coerce_fault_plan(fault_plan) or FaultPlan(),
        default_fault_rate=float(default_fault_rate),
    )
