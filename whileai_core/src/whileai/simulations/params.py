"""The public parameters of ``simulate()``: their defaults, aliases, checks and resolution.

``PARAMETERS`` is the one table of names, defaults, aliases and meanings; ``simulate``'s
signature, ``docs/parameters.md`` and the run's report all agree with it (a test checks the
page and the signature against it). Parameters that have an alias default to ``None`` in the
signature so that "given" is knowable: an alias and its name both given with different values
is an error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from whileai.schema.files import user_path
from whileai.schema.wording import counted
from whileai.worlds import WorldDefaults

MODES: tuple[str, ...] = ("eval", "rl")
REPEAT_POLICIES: tuple[str, ...] = ("rl", "fixed")

#: alias -> the parameter it stands for
ALIASES: dict[str, str] = {
    "policy": "system_prompt",
    "unique": "unique_situations",
    "phrasings": "requests_per_situation",
    "n": "requests_per_situation",
    "repeats": "rollouts_per_request",
    "risk": "fault_rate",
}


@attrs.frozen
class Parameter:
    """One public parameter: its name, resolved default, aliases and what it means."""

    name: str
    default: Any
    meaning: str
    aliases: tuple[str, ...] = ()


def _p(name: str, default: Any, meaning: str) -> Parameter:
    aliases = tuple(a for a, target in ALIASES.items() if target == name)
    return Parameter(name, default, meaning, aliases)


PARAMETERS: tuple[Parameter, ...] = (
    _p(
        "system_prompt",
        None,
        "the deploy prompt the agent runs under; None: the world's own (its system_prompt)",
    ),
    _p(
        "unique_situations",
        8,
        "how many distinct situations to write (from budget when only budget is given)",
    ),
    _p("requests_per_situation", 1, "phrasings of each situation: one task each"),
    _p("rollouts_per_request", 4, "repeats of each phrasing: the k of pass@k and pass^k"),
    _p(
        "fault_rate",
        None,
        "share of tool calls that fault; None: the world's default_fault_rate",
    ),
    _p(
        "mode",
        "eval",
        "eval (every request the same repeats) or rl (repeats go where groups split)",
    ),
    _p("budget", None, "cap on rollouts in the run, extra adaptive repeats included"),
    _p("seed", 0, "seeds situations, phrasings, faults and the rollouts' sampling"),
    _p("hard_share", 0.25, "share of situations drawn at the hard end of the difficulty dimension"),
    _p(
        "strategy",
        None,
        "registered strategy (or object) proposing situations, asked in batches and told each "
        "batch's rows when it learns; None: a seeded even spread",
    ),
    _p("dimensions", None, "{name: [values]} to vary situations along; None: the world's own"),
    _p("arm_weights", None, "{arm: weight} for the strategy (a bandit's prior); needs a strategy"),
    _p(
        "simulator",
        None,
        "who writes situations: a model spec (it writes whole situations from the world's "
        "facts when the world supports it, else rewords its templates), or 'template'; None: "
        "the role default",
    ),
    _p("agent_model", None, "the agent: a model spec, a backend, or your own callable"),
    _p("user_model", None, "who plays the user: a model spec or backend; None: the role default"),
    _p(
        "sampling",
        None,
        "the agent's sampling ({temperature, max_tokens, ...}); overrides advanced",
    ),
    _p("max_turns", 4, "agent turns per rollout, follow-ups included; 1 means a single message"),
    _p("max_tool_calls", 8, "tool calls per rollout before the agent must answer"),
    _p(
        "repeat_policy",
        None,
        "rl (more repeats where a group splits) or fixed (every request the same k); None: fixed under eval, rl under rl",
    ),
    _p("judge", None, "a judge or verifier spec, or a callable; None: the world's own checks"),
    _p("llm_grade", False, "also grade with the rubric judge into llm_reward"),
    _p("logprobs", False, "record the agent's summed logprob and token count per turn"),
    _p("tasks", None, "rows or prompts to replay instead of writing situations"),
    _p(
        "runs",
        1,
        "run the same situations this many times; above 1 returns a list of runs (output= gets -run<i>)",
    ),
    _p("output", None, "JSONL path rows stream to, with a .meta.json sidecar"),
    _p("resume", False, "continue the run already at output= instead of refusing to overwrite"),
    _p("advanced", None, "{RunKnobs field: value}: experiment knobs and engine internals"),
    _p("registry", None, "the plugin registry to resolve names in; None: installed plugins"),
    _p(
        "executor",
        None,
        "where rollouts run: None (this process), a registered executor such as 'ray' or "
        "'ray:auto', or an executor object",
    ),
)

BY_NAME: dict[str, Parameter] = {p.name: p for p in PARAMETERS}


def merge_aliases(given: dict[str, Any], aliases: Mapping[str, Any]) -> dict[str, Any]:
    """Fold alias values into ``given``; an alias and its name set to different values is an
    error naming both."""
    out = dict(given)
    seen: dict[str, str] = {}
    for alias, value in aliases.items():
        if value is None:
            continue
        target = ALIASES[alias]
        if out.get(target) is not None and out[target] != value:
            first = seen.get(target, target)
            raise ValueError(
                f"{first}={out[target]!r} and {alias}={value!r} disagree: {alias}= is an alias "
                f"of {target}=; give one of them"
            )
        out[target] = value
        seen[target] = alias
    return out


def _positive_int(name: str, value: Any, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


def _unit(name: str, value: Any, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")


def _choice(name: str, value: Any, choices: Sequence[str], *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


@attrs.frozen(kw_only=True)
class RunParams:
    """The public parameters as resolved (defaults filled, aliases folded, values checked)."""

    #: None until the run's world is known: then the world's own (``for_world``)
    system_prompt: str | None
    unique_situations: int
    requests_per_situation: int
    rollouts_per_request: int
    fault_rate: float | None
    mode: str
    budget: int | None
    seed: int
    hard_share: float
    strategy: Any
    dimensions: dict[str, list[Any]] | None
    arm_weights: dict[str, float] | None
    simulator: Any
    agent_model: Any
    user_model: Any
    sampling: dict[str, Any] | None
    max_turns: int
    max_tool_calls: int
    repeat_policy: str
    judge: Any
    llm_grade: bool
    logprobs: bool
    tasks: list[Any] | None
    runs: int
    output: str | None
    resume: bool
    executor: Any = None

    def for_world(self, defaults: WorldDefaults) -> RunParams:
        """These parameters with what was left to the world filled from its defaults."""
        if self.system_prompt is not None:
            return self
        return attrs.evolve(self, system_prompt=defaults.system_prompt)

    @property
    def prompt(self) -> str:
        """The system prompt, once ``for_world`` has filled it."""
        if self.system_prompt is None:
            raise ValueError("system_prompt is unresolved: call for_world(world_defaults(world))")
        return self.system_prompt


#: The most rollouts one run plans: a plan is held in memory before the first rollout, and
#: ten million jobs are about 10 GB; a larger eval is several runs (or resumed chunks).
MAX_PLANNED_ROLLOUTS = 10_000_000

#: What sampling= may set, with the same bounds advanced= gives the knobs' temperatures and
#: token caps.
SAMPLING_BOUNDS: dict[str, tuple[float, float, type]] = {
    "temperature": (0.0, 2.0, float),
    "top_p": (0.0, 1.0, float),
    "max_tokens": (1, 32768, int),
    "seed": (-(2**63), 2**63 - 1, int),
}


def _check_sampling(sampling: Mapping[str, Any]) -> None:
    for key, value in sampling.items():
        bounds = SAMPLING_BOUNDS.get(key)
        if bounds is None or value is None:
            continue
        floor, ceiling, kind = bounds
        whole = kind is int
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (whole and not isinstance(value, int))
            or not math.isfinite(value)
            or not floor <= value <= ceiling
        ):
            kind_text = "a whole number" if whole else "a number"
            raise ValueError(
                f"sampling[{key!r}] must be {kind_text} in [{floor}, {ceiling}], got {value!r}"
            )


def spellings(given: Mapping[str, Any], aliases: Mapping[str, Any]) -> dict[str, str]:
    """The alias each parameter was given by, where it was given by its alias alone: errors
    call a value by the name the caller wrote (``repeats=0``, not ``rollouts_per_request``)."""
    return {
        ALIASES[alias]: alias
        for alias, value in aliases.items()
        if value is not None and given.get(ALIASES[alias]) is None
    }


def resolve_params(given: Mapping[str, Any], spelled: Mapping[str, str] | None = None) -> RunParams:
    """Fill defaults and check every value; errors name the parameter (as ``spelled``, when
    it was given by an alias) and what was wrong."""
    said = spelled or {}

    def name_of(name: str) -> str:
        return said.get(name, name)

    values = {p.name: p.default for p in PARAMETERS}
    for name, value in given.items():
        if name not in BY_NAME:
            raise TypeError(f"simulate() has no parameter {name!r}")
        if value is not None:
            values[name] = value
    if values["system_prompt"] is not None and not isinstance(values["system_prompt"], str):
        raise TypeError(
            f"{name_of('system_prompt')} must be a string, got "
            f"{type(values['system_prompt']).__name__}"
        )
    budget = values["budget"]
    _positive_int("budget", budget, allow_none=True)
    for name in ("requests_per_situation", "rollouts_per_request", "runs", "max_turns"):
        _positive_int(name_of(name), values[name])
    if given.get("unique_situations") is None and budget is not None:
        per_situation = values["requests_per_situation"] * values["rollouts_per_request"]
        values["unique_situations"] = max(1, budget // per_situation)
    _positive_int(name_of("unique_situations"), values["unique_situations"])
    if (
        isinstance(values["max_tool_calls"], bool)
        or not isinstance(values["max_tool_calls"], int)
        or values["max_tool_calls"] < 0
    ):
        raise ValueError(
            f"max_tool_calls must be a whole number >= 0, got {values['max_tool_calls']!r}"
        )
    _unit(name_of("fault_rate"), values["fault_rate"], allow_none=True)
    _unit("hard_share", values["hard_share"])
    _choice("mode", values["mode"], MODES)
    _choice("repeat_policy", values["repeat_policy"], REPEAT_POLICIES, allow_none=True)
    if values["repeat_policy"] is None:
        values["repeat_policy"] = "rl" if values["mode"] == "rl" else "fixed"
    if isinstance(values["seed"], bool) or not isinstance(values["seed"], int):
        raise ValueError(f"seed must be a whole number, got {values['seed']!r}")
    planned = (
        values["unique_situations"]
        * values["requests_per_situation"]
        * values["rollouts_per_request"]
    )
    plan = " x ".join(
        f"{name_of(name)}={values[name]}"
        for name in ("unique_situations", "requests_per_situation", "rollouts_per_request")
    )
    if planned > MAX_PLANNED_ROLLOUTS:
        raise ValueError(
            f"the plan is {planned:,} rollouts ({plan}), above the {MAX_PLANNED_ROLLOUTS:,} "
            "one run plans at most; split it over runs or lower one of them"
        )
    if values["tasks"] is None and budget is not None and planned > budget:
        raise ValueError(
            f"budget={budget} is below the planned {counted(planned, 'rollout')} ({plan}); raise "
            "budget "
            "or lower one of them"
        )
    dims = values["dimensions"]
    if dims is not None:
        if not isinstance(dims, Mapping) or not all(
            isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0 for v in dims.values()
        ):
            raise ValueError(
                "dimensions must be {name: [values, ...]} with at least one value each"
            )
        values["dimensions"] = {str(k): list(v) for k, v in dims.items()}
    weights = values["arm_weights"]
    if weights is not None:
        if not isinstance(weights, Mapping) or any(
            isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0
            for w in weights.values()
        ):
            raise ValueError(f"arm_weights must be {{arm: finite weight >= 0}}, got {weights!r}")
        values["arm_weights"] = {str(k): float(w) for k, w in weights.items()}
    sampling = values["sampling"]
    if sampling is not None and not isinstance(sampling, Mapping):
        raise TypeError(
            f"sampling must be a mapping such as {{'temperature': 0.7}}, got {sampling!r}"
        )
    values["sampling"] = dict(sampling) if sampling is not None else None
    if sampling is not None:
        _check_sampling(values["sampling"])
    tasks = values["tasks"]
    if tasks is not None:
        if isinstance(tasks, str | bytes) or not isinstance(tasks, Sequence) or not tasks:
            raise ValueError("tasks must be a non-empty list of rows or prompt strings")
        values["tasks"] = list(tasks)
    for flag in ("llm_grade", "logprobs", "resume"):
        if not isinstance(values[flag], bool):
            raise TypeError(f"{flag} must be True or False, got {values[flag]!r}")
    if values["output"] is not None:
        if not isinstance(values["output"], str | os.PathLike) or not str(values["output"]).strip():
            raise ValueError(
                f"output must be the path of a JSONL file to write, got {values['output']!r}"
            )
        values["output"] = str(user_path(values["output"]))
    if values["resume"] and values["output"] is None:
        raise ValueError("resume=True needs output= (the JSONL file of the run to continue)")
    executor = values["executor"]
    if not (
        executor is None
        or (isinstance(executor, str) and executor.strip())
        or callable(getattr(executor, "run", None))
    ):
        raise TypeError(
            "executor must be None (this process), a registered executor name or spec such as "
            f"'ray' or 'ray:auto', or an object with run(jobs, concurrency, run); got {executor!r}"
        )
    values.pop("advanced")
    values.pop("registry")
    return RunParams(**values)


AgentFn = Callable[..., Any]
