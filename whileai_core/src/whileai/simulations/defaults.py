"""``RunKnobs``: every number (and every experiment setting) the engine runs under.

Each field is settable through ``simulate(advanced={...})``, has bounds, and carries a comment
above it saying why its default is what it is: a measurement, an rlhfbook.com chapter by URL,
an arXiv id, or "convention, untested". A value outside its bounds is a ValueError naming the
floor or ceiling and the default; an unknown key is a ValueError naming the close matches.
``docs/parameters.md`` lists every field and a test keeps it equal to this file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from whileai.backend_use import DEFAULT_MAX_CONCURRENCY
from whileai.schema.wording import named_with_close
from whileai.worlds import FAULT_KINDS, WorldDefaults

#: The world a run happens in when ``advanced={"world": ...}`` names none.
DEFAULT_WORLD = "shop"

#: Fields that are experiment knobs (what a researcher changes between runs); the rest are
#: engine internals. Both are ``advanced=`` keys; the docs list them in two sections.
EXPERIMENT_KNOBS: tuple[str, ...] = (
    "world",
    "world_options",
    "fault_kinds",
    "user_persona",
    "user_patience",
    "agent_temperature",
    "agent_max_tokens",
    "user_temperature",
    "user_max_tokens",
    "writer_temperature",
    "writer_max_tokens",
    "writer_retries",
    "difficulty_dimension",
    "hard_value",
    "search_batch",
    "embedding_model",
    "strategy_options",
)


def bounded(floor: float | None = None, ceiling: float | None = None) -> Any:
    """A validator keeping a number within [floor, ceiling]; None passes (means "unset")."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None and attribute.default is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(
                f"advanced[{attribute.name!r}] must be a number, got {value!r} "
                f"(default {attribute.default!r})"
            )
        if isinstance(attribute.default, int) and not isinstance(value, int):
            raise ValueError(
                f"advanced[{attribute.name!r}] must be a whole number, got {value!r} "
                f"(default {attribute.default!r})"
            )
        if floor is not None and value < floor:
            raise ValueError(
                f"advanced[{attribute.name!r}]={value!r} is below its floor {floor!r} "
                f"(default {attribute.default!r})"
            )
        if ceiling is not None and value > ceiling:
            raise ValueError(
                f"advanced[{attribute.name!r}]={value!r} is above its ceiling {ceiling!r} "
                f"(default {attribute.default!r})"
            )

    return check


def _knob(default: Any, floor: float | None = None, ceiling: float | None = None) -> Any:
    return attrs.field(
        default=default,
        validator=bounded(floor, ceiling),
        metadata={"floor": floor, "ceiling": ceiling, "bounds": f"[{floor}, {ceiling}]"},
    )


def _nonempty_text(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attribute.default is None:
        return
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            f"advanced[{attribute.name!r}] must be a non-empty string, got {value!r} "
            f"(default {attribute.default!r})"
        )


def _fault_kinds(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    unknown = [k for k in value if k not in FAULT_KINDS]
    if unknown or not value:
        raise ValueError(
            f"advanced['fault_kinds']={list(value)!r}: kinds are {', '.join(FAULT_KINDS)} "
            f"(at least one; default all of them)"
        )


def _cache_dir(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None or value is False:
        return
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            f"advanced['cache'] must be a directory path, False (no cache) or None "
            f"(WHILEAI_CACHE), got {value!r}"
        )


def _text(default: str | None) -> Any:
    return attrs.field(
        default=default, validator=_nonempty_text, metadata={"bounds": "non-empty text"}
    )


@attrs.frozen(kw_only=True)
class RunKnobs:
    """Every number and experiment setting of a run, as resolved."""

    # -- experiment knobs: what the mock world answers ---------------------------------
    # The world the situations happen in: a documented default, resolved by name like any
    # world, so without whileai-worlds installed it is the usual install hint. "shop"
    # (orders, refunds, accounts) and "bank" (identity checks, transfers under a daily
    # limit, cards) ship in the built-in worlds plugin, "mcp:<command or url>" (any MCP
    # server) in whileai-mcp; see [worlds.md](worlds.md); convention.
    world: str = _text(DEFAULT_WORLD)
    # Keyword options the world's factory is built with (the MCP world's situations file and
    # state tool, a third party's own settings). Empty: the world's own defaults; convention.
    world_options: Mapping[str, Any] = attrs.field(
        factory=dict, converter=dict, metadata={"bounds": "keyword options"}
    )
    # Which fault kinds the world's fault plan may inject. All of them: an agent is measured on
    # every way a real tool fails; convention, untested.
    fault_kinds: tuple[str, ...] = attrs.field(
        default=FAULT_KINDS,
        converter=tuple,
        validator=_fault_kinds,
        metadata={"bounds": "one or more fault kinds"},
    )

    # -- experiment knobs: who plays the user and how patient they are -----------------
    # Persona of the simulated user; None keeps the persona each situation was written with.
    # Convention, untested.
    user_persona: str | None = _text(None)
    # Follow-up turns the simulated user gives before giving up; None keeps each situation's
    # own patience. Convention, untested.
    user_patience: int | None = _knob(None, 0, 50)

    # -- experiment knobs: how each of the three models samples -------------------------
    # Agent temperature 0.7: repeats of one request need spread for pass^k and a grouped
    # update to mean anything, and 0.7 keeps replies on topic; convention, untested.
    agent_temperature: float = _knob(0.7, 0.0, 2.0)
    # Agent reply cap in tokens; a support answer fits, a runaway is cut and marked truncated.
    # Convention, untested.
    agent_max_tokens: int = _knob(256, 1, 32768)
    # Simulated users at 0.7 like the agent, so follow-ups vary between repeats; convention,
    # untested.
    user_temperature: float = _knob(0.7, 0.0, 2.0)
    # A user's follow-up is a sentence or two; convention, untested.
    user_max_tokens: int = _knob(96, 1, 4096)
    # The writer samples hotter (1.0) so phrasings of one situation differ; convention,
    # untested.
    writer_temperature: float = _knob(1.0, 0.0, 2.0)
    # A written request is a short paragraph, and a whole written situation (request,
    # persona, what the user knows, goal, principle, rubric) a short JSON object; 400 fits
    # one; convention, untested.
    writer_max_tokens: int = _knob(400, 1, 4096)
    # Times a whole written situation the world found inconsistent is sent back with the
    # world's reason before the situation is skipped; two more tries fix most slips of a
    # small model; convention, untested.
    writer_retries: int = _knob(2, 0, 10)

    # -- experiment knobs: how hard the situations are, what the search steers by -------
    # The dimension hard_share acts on; a world without that dimension gets it as an extra
    # spec key its templates may read. None: the world's own (its difficulty_dimension, else
    # "difficulty"); a world knows which of its dimensions is difficulty. Convention.
    difficulty_dimension: str | None = _text(None)
    # The value of that dimension a hard situation takes. None: the world's own (its
    # hard_value, else "hard"); convention.
    hard_value: str | None = _text(None)
    # What situations' vectors come from: None, the offline hashed n-gram embedding (no model,
    # deterministic); or a model spec whose backend embeds (an OpenAI-compatible endpoint's
    # /v1/embeddings, e.g. "url:http://host:8080/v1"). Offline by default so a run needs no
    # extra endpoint; convention.
    embedding_model: str | None = _text(None)
    # Situations a strategy that learns (has tell) is asked for at a time; it is told their
    # rollouts before it is asked again. 8 lets a bandit move within a small run while
    # keeping rollouts in flight; a strategy that draws up front gets the whole run in one
    # batch. Convention, untested.
    search_batch: int = _knob(8, 1, 4096)
    # Keyword options handed to the strategy factory (what a search steers by: its own
    # weights, novelty thresholds). Empty: the strategy's own defaults; convention.
    strategy_options: Mapping[str, Any] = attrs.field(
        factory=dict, converter=dict, metadata={"bounds": "keyword options"}
    )

    # -- engine internals ---------------------------------------------------------------
    # Rollouts in flight at once, and the concurrency= each backend resolved from a spec is
    # built with (its connection pool). 16 keeps two cores busy with the embedded model off
    # the event loop while an HTTP endpoint sees a modest queue; convention, untested.
    max_concurrency: int = _knob(DEFAULT_MAX_CONCURRENCY, 1, 4096)
    # Tool-call rounds the agent may take inside one turn before it must answer; tool loops
    # in small models otherwise never end. Convention, untested.
    max_tool_rounds: int = _knob(4, 0, 64)
    # Extra repeats per split group under repeat_policy="rl": groups whose repeats
    # disagree carry the gradient (DAPO dynamic sampling, arXiv:2503.14476), so they get more.
    adaptive_extra_repeats: int = _knob(4, 0, 256)
    # Characters of the system prompt kept as lineage.system_prompt_head: 120, as the
    # parameter reference documents it (enough to tell prompts apart at a glance).
    system_prompt_head_chars: int = _knob(120, 0, 10000)
    # Characters of situation summary shown to the simulated user from the hidden state;
    # enough for ids and amounts. Convention, untested.
    user_context_chars: int = _knob(600, 0, 100000)
    # Progress display refreshes per second on a terminal; convention, untested.
    progress_refresh_per_second: float = _knob(4.0, 0.1, 60.0)
    # fsync the output file after each row (1) or only flush it (0). A flush survives a killed
    # process (measured: the kill-and-resume test); an fsync also survives power loss, at a
    # cost per row.
    fsync_rows: int = _knob(0, 0, 1)
    # A directory where model answers are cached (docs/parameters.md, "Response cache"): a
    # re-run with the same inputs costs no tokens and gives the same rows. None: the
    # WHILEAI_CACHE environment variable's directory, else no cache; False: no cache even
    # with WHILEAI_CACHE set. Off unless asked, as the parameter reference documents: a
    # cache answers a changed model's questions with the old model's answers.
    cache: str | bool | None = attrs.field(
        default=None, validator=_cache_dir, metadata={"bounds": "a directory, False or None"}
    )
    # Prices added to or replacing the shipped table (whileai/pricing/prices.json, dated list
    # prices): a mapping of model to {"input", "output", "cached_input"} in USD per million
    # tokens, or the path of a JSON file. None: the shipped table, as the parameter reference
    # documents ("Cost").
    prices: Any = attrs.field(default=None, metadata={"bounds": "a mapping, a JSON path or None"})
    # Dollars the run may spend on its models (agent, user, writer, judge) before it stops
    # asking for rollouts; the finished rows are on disk and resume=True continues. None: no
    # budget, as the parameter reference documents ("Cost").
    budget_usd: float | None = _knob(None, 0, None)
    # A model spec that reads each failed rollout the attribution rules leave to the agent
    # and says whose failure it was (agent, user, world), recorded on failure_owner with
    # source "judge", its model and the rules' verdict. None: the rules alone, as the
    # parameter reference documents (report()["failures"]); a judge costs a call per failure.
    attribution_model: str | None = _text(None)

    def for_world(self, defaults: WorldDefaults) -> RunKnobs:
        """These knobs with what was left to the world filled from its defaults."""
        return attrs.evolve(
            self,
            difficulty_dimension=self.difficulty_dimension or defaults.difficulty_dimension,
            hard_value=self.hard_value if self.hard_value is not None else defaults.hard_value,
        )

    def hard_end(self) -> tuple[str, Any]:
        """The difficulty dimension and its hard value, once ``for_world`` has filled them."""
        if self.difficulty_dimension is None or self.hard_value is None:
            raise ValueError("the hard end is unresolved: call for_world(world_defaults(world))")
        return self.difficulty_dimension, self.hard_value

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the report and the sidecar."""
        out = attrs.asdict(self)
        out["fault_kinds"] = list(self.fault_kinds)
        out["strategy_options"] = dict(self.strategy_options)
        out["world_options"] = dict(self.world_options)
        return out

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Each field's default."""
        return cls().as_dict()

    @classmethod
    def from_advanced(cls, advanced: Mapping[str, Any] | None) -> RunKnobs:
        """The knobs with ``advanced`` applied; unknown keys name their close matches."""
        if advanced is None:
            return cls()
        if not isinstance(advanced, Mapping):
            raise TypeError(f"advanced must be a mapping of knob name to value, got {advanced!r}")
        names = [f.name for f in attrs.fields(cls)]
        unknown = [k for k in advanced if k not in names]
        if unknown:
            raise ValueError(
                f"unknown advanced key {named_with_close(unknown, names, cutoff=0.5)}; "
                "advanced keys are the RunKnobs "
                f"fields: {', '.join(names)}"
            )
        return cls(**dict(advanced))
