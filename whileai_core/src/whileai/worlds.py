"""The mock-world contract: the tools an agent may call, per-rollout state, and faults.

A world plugin (``whileai_register_worlds``) registers a factory returning a :class:`World`.
For every rollout the engine asks the world for a fresh :class:`Episode` (state is never shared
between rollouts), offers ``world.tools()`` to the agent, and routes each tool call to
``episode.call``. The episode decides, from its :class:`FaultPlan`, whether a call fails
(timeout, error response, rate limit, stale or partial data, malformed payload) and records
every fault that fired. At the end ``episode.state()`` goes on the row as ``world_state`` and
``episode.check(...)`` grades what the rollout reached.

A world also carries the defaults of its domain (as a tau2 environment carries its policy):
the deploy prompt the agent runs under when ``system_prompt=`` is not given, the simulated
user's and the situation writer's instructions, and which dimension and value make a
situation hard. Each is optional; :func:`world_defaults` reads them, and a world without one
gets a domain-free fallback, so the core names no domain of its own.

Situations are what the agent is put in. A world can write them from templates
(``template_situation``), which is what the offline demo uses, because a small model writes
poor situations; a model writer fills the same :class:`Situation` record.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from whileai.scoring import Verdict

#: Every fault kind a plan may list.
FAULT_KINDS: tuple[str, ...] = ("timeout", "error", "rate_limit", "stale", "partial", "malformed")


@attrs.frozen
class FaultPlan:
    """Which faults a world may inject, and at what rate.

    ``rate=None`` means the plan has no rate of its own: it fires at the world's
    ``default_fault_rate`` (the run's report says which applied, in ``world_note``).
    """

    kinds: tuple[str, ...] = FAULT_KINDS
    rate: float | None = None

    def __attrs_post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in FAULT_KINDS]
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; kinds are {', '.join(FAULT_KINDS)}")
        if not self.kinds:
            raise ValueError("a fault plan needs at least one fault kind")
        if self.rate is not None and not 0 <= self.rate <= 1:
            raise ValueError(f"fault plan rate must lie in [0, 1], got {self.rate!r}")

    def effective_rate(self, default_fault_rate: float) -> float:
        return self.rate if self.rate is not None else default_fault_rate


@attrs.frozen
class Situation:
    """One situation, as the writer wrote it.

    ``prompt`` is the user's first message. ``persona`` and ``patience`` (how many follow-up
    turns the simulated user will give before giving up) steer the simulated user.
    ``hidden_state`` is what the user knows and the agent must discover; ``goal`` is what a
    good rollout reaches. Both are privileged: they reach the judge and the simulated user, and
    never an exported row.
    """

    situation_id: str
    prompt: str
    persona: str = "a customer"
    patience: int = 3
    dimensions: Mapping[str, Any] = attrs.field(factory=dict)
    hidden_state: Mapping[str, Any] = attrs.field(factory=dict)
    goal: Mapping[str, Any] = attrs.field(factory=dict)
    reference: Any = None
    writer_model: str = "template"
    #: for the judge: the principle a good rollout follows, and a rubric to grade it by
    #: (privileged, like the hidden state; a model writer may write them)
    principle: str | None = None
    rubric: str | None = None


@attrs.frozen
class ToolResult:
    """What one tool call returned: JSON-able ``content``, or the fault that replaced it."""

    content: Any
    #: the fault kind that fired on this call, if any
    fault: str | None = None
    #: a readable error for calls that failed (faulted or invalid)
    error: str | None = None


@runtime_checkable
class Episode(Protocol):
    """One rollout's private copy of the world.

    Besides the four methods below, an episode in front of a live service may define any of
    ``start()``, ``tools()``, ``finish(final_text, steps)`` and ``close()``, and may make
    ``call`` a coroutine function; the engine calls what it finds, in that order, with
    ``close()`` exactly once whatever happened (``whileai.simulations.episode_life`` says
    when each runs). An exception from ``start()`` or ``tools()`` fails that rollout's row
    with the reason, and the run goes on.
    """

    def call(self, name: str, arguments: Mapping[str, Any], step: int | None = None) -> ToolResult:
        """Run one tool call; an unknown tool or bad arguments give an error result, not a raise.

        ``step`` is the index the call's tool step takes in ``row["steps"]``; an episode
        records faults at it (the engine passes it only to episodes whose ``call`` takes it,
        so one without the parameter still works, numbering faults its own way)."""
        ...

    def state(self) -> dict[str, Any]:
        """The final state for ``row["world_state"]`` (nothing privileged in it)."""
        ...

    def faults(self) -> list[dict[str, Any]]:
        """Faults that fired, each ``{"step": int, "tool": str, "kind": str}`` (``step``
        indexes ``row["steps"]`` when the engine passed it to ``call``)."""
        ...

    def check(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> Verdict:
        """Grade the rollout programmatically: goal state reached, constraints kept."""
        ...


@runtime_checkable
class World(Protocol):
    """A mock world."""

    name: str
    version: str
    #: the rate a fault plan with no rate of its own fires at
    default_fault_rate: float

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI-format tool schemas (``{"type": "function", "function": {...}}``)."""
        ...

    def dimensions(self) -> dict[str, list[Any]]:
        """The dimensions situations vary along, with their values (the engine's default)."""
        ...

    def template_situation(
        self, spec: Mapping[str, Any], rng: random.Random, phrasing: int = 0
    ) -> Situation:
        """A situation written from templates for a strategy's ``spec`` (dimension values);
        ``phrasing`` picks one of several ways the user words the same request."""
        ...

    def new_episode(
        self, situation: Situation, rng: random.Random, fault_plan: FaultPlan | None = None
    ) -> Episode:
        """A fresh state for one rollout of ``situation``; faults drawn from ``rng``."""
        ...


@runtime_checkable
class WritesSituations(Protocol):
    """A world a model writer can write whole situations for (``simulate(simulator=...)``):
    it exposes an episode's facts, the schema of a written situation, and its own check that
    a written one is consistent with the facts."""

    def situation_facts(self, spec: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
        """The facts of one episode the writer must use (real ids, accounts), JSON-able,
        drawn from ``rng`` (the situation's seed)."""
        ...

    def situation_schema(self) -> dict[str, Any]:
        """The JSON Schema of the object the writer returns."""
        ...

    def situation_from_written(
        self, spec: Mapping[str, Any], facts: Mapping[str, Any], written: Mapping[str, Any]
    ) -> Situation:
        """The situation the writer wrote; a ValueError naming what is missing or what
        names something the world does not hold, when it is not consistent."""
        ...


#: What the simulated user's instructions may refer to: ``{persona}`` (who the user is),
#: ``{request}`` (what they want, the situation's prompt), ``{known}`` (what they know, from
#: the hidden state), ``{done}`` and ``{give_up}`` (the tags that end the chat).
USER_PROMPT_FIELDS: tuple[str, ...] = ("persona", "request", "known", "done", "give_up")

#: A world's defaults when it names none: domain-free, so they fit any world.
GENERIC_SYSTEM_PROMPT = (
    "You are an assistant with tools. Look things up with the tools before you answer, say "
    "plainly what you did, and never invent a detail the tools did not give you."
)
GENERIC_USER_PROMPT = (
    "You are {persona}, talking with an assistant. What you want: {request}\n"
    "What you know (give it when asked): {known}\n"
    "Reply as yourself in one or two short sentences. When your problem is solved, thank the "
    "assistant and end with {done}. If you have had enough, end with {give_up}."
)
GENERIC_WRITER_PROMPT = (
    "You write the first message a person sends to an assistant. Reply with that message only."
)
GENERIC_DIFFICULTY_DIMENSION = "difficulty"
GENERIC_HARD_VALUE = "hard"


@attrs.frozen
class WorldDefaults:
    """What a run takes from its world when the caller does not say.

    ``system_prompt``: the deploy prompt the agent runs under. ``user_prompt``: the simulated
    user's instructions, a ``str.format`` template over :data:`USER_PROMPT_FIELDS`.
    ``writer_prompt``: the system message a model writer gets when it words a situation.
    ``difficulty_dimension`` and ``hard_value``: the dimension ``hard_share`` acts on and the
    value a hard situation takes."""

    system_prompt: str = GENERIC_SYSTEM_PROMPT
    user_prompt: str = GENERIC_USER_PROMPT
    writer_prompt: str = GENERIC_WRITER_PROMPT
    difficulty_dimension: str = GENERIC_DIFFICULTY_DIMENSION
    hard_value: Any = GENERIC_HARD_VALUE

    def __attrs_post_init__(self) -> None:
        for name in ("system_prompt", "user_prompt", "writer_prompt", "difficulty_dimension"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"a world's {name} must be non-empty text, got {value!r}")
        try:
            self.user_prompt.format(**{field: "" for field in USER_PROMPT_FIELDS})
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"a world's user_prompt may use only the fields "
                f"{', '.join('{' + f + '}' for f in USER_PROMPT_FIELDS)}: {exc!r}"
            ) from None


def world_defaults(world: Any) -> WorldDefaults:
    """The defaults ``world`` carries as attributes of the same names, the generic ones for
    those it leaves out. A bad value is a ValueError naming the world and the attribute."""
    given = {
        field.name: getattr(world, field.name)
        for field in attrs.fields(WorldDefaults)
        if getattr(world, field.name, None) is not None
    }
    try:
        return WorldDefaults(**given)
    except ValueError as exc:
        raise ValueError(f"world {getattr(world, 'name', world)!r}: {exc}") from None
