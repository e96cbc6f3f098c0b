"""Who takes part in a run: the agent (a model spec, a backend, or your own callable), the
simulated user and the situation writer, resolved through the backend registry, with what the
report says about defaults and about one model doing several jobs."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from whileai.backend_use import RunBackend, add_backend
from whileai.backends import (
    EMBEDDED_SPEC,
    Backend,
    Completion,
    Sampling,
    default_spec,
    is_agent_function,
    resolve_backend,
)
from whileai.executors import RunSpec
from whileai.registry import Registry
from whileai.schema.secrets import safe_spec
from whileai.simulations.params import RunParams
from whileai.simulations.rollout import Models

TEMPLATE_WRITER = "template"
SEED_WRITER = "seed"


class CallableAgent:
    """Your own agent function as a backend: ``fn(messages)`` or ``fn(messages, tools)``,
    sync or async, returning text or a ``Completion``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = "callable:" + (getattr(fn, "__qualname__", None) or type(fn).__name__)
        try:
            params = [
                p
                for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
            ]
        except (TypeError, ValueError):
            params = []
        self._takes_tools = len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        chat = [dict(m) for m in messages]
        raw = self.fn(chat, list(tools) if tools else None) if self._takes_tools else self.fn(chat)
        if inspect.isawaitable(raw):
            raw = await raw
        if isinstance(raw, Completion):
            return raw
        if isinstance(raw, str):
            return Completion(text=raw, model=self.name, sampling={})
        raise TypeError(
            f"agent_model {self.name} returned {type(raw).__name__}; an agent callable returns "
            "the reply text or a whileai.backends.Completion"
        )


@attrs.frozen
class Writer:
    """Who writes the situations: the world's templates, or a model rephrasing them."""

    label: str
    backend: Backend | None = None


@attrs.frozen
class ResolvedModels:
    models: Models
    writer: Writer
    notes: list[str]
    warnings: list[str]
    degraded: list[str]
    agent_spec: str
    user_spec: str
    simulator: str
    #: the judge role's model spec, for a judge named without one (``llm_grade=True``,
    #: ``judge="rubric"``); None when the run grades without a model judge
    judge_spec: str | None = None
    judge_why: str = ""
    #: every distinct backend the run calls, with its roles (the report reads their stats;
    #: the engine closes the ones it opened)
    backends: list[RunBackend] = attrs.field(factory=list)


def served_model(backend: Any) -> tuple[str | None, str | None]:
    """What a backend serves, as far as it says before a call: its endpoint and model name
    (``base_url`` and ``model`` on an OpenAI-compatible backend; None where it has none)."""
    base = getattr(backend, "base_url", None)
    model = getattr(backend, "model", None)
    return (
        str(base).rstrip("/") if isinstance(base, str) and base else None,
        str(model) if isinstance(model, str) and model else None,
    )


def same_model(a: Any, a_label: str, b: Any, b_label: str) -> bool:
    """Whether two roles' backends are one model: the same spec, the same backend object, or
    the same served model under two specs (one endpoint serving one model, or one model name
    on the same endpoint)."""
    if a is b or a_label == b_label:
        return True
    (a_url, a_model), (b_url, b_model) = served_model(a), served_model(b)
    if a_model is not None and a_model == b_model:
        return a_url == b_url or a_url is None or b_url is None
    # one endpoint, and at least one of the two asks it for whatever it serves
    return a_url is not None and a_url == b_url and (a_model is None or b_model is None)


def _label(spec: Any, backend: Backend) -> str:
    """What rows and reports call a role's model: its spec (credentials and secret query
    values of a URL masked), or the backend's name."""
    if isinstance(spec, str):
        return safe_spec(spec)
    return safe_spec(str(getattr(backend, "name", type(backend).__name__)))


@attrs.define
class RoleBackends:
    """Opens the backend of each role. A spec is resolved once per run: roles given the same
    spec share one backend (one connection pool, one set of counters). A backend factory
    that takes ``concurrency=`` is offered the run's ``max_concurrency``, so its connection
    pool matches the rollouts in flight. Each backend is added to ``backends`` as soon as it
    is built, so the caller can close what was opened even when a later role fails."""

    registry: Registry
    concurrency: int | None
    backends: list[RunBackend]
    _by_spec: dict[str, Backend] = attrs.field(factory=dict)

    def open(self, spec: Any, role: str) -> Backend:
        if not isinstance(spec, str):
            given = resolve_backend(spec, role=role, registry=self.registry)
            add_backend(self.backends, _label(spec, given), given, role, opened=False)
            return given
        if spec not in self._by_spec:
            offer = {} if self.concurrency is None else {"concurrency": self.concurrency}
            self._by_spec[spec] = resolve_backend(
                spec, role=role, registry=self.registry, offer=offer
            )
        add_backend(self.backends, spec, self._by_spec[spec], role, opened=True)
        return self._by_spec[spec]


def open_run_models(run: RunSpec, registry: Registry, backends: list[RunBackend]) -> Models:
    """A worker's models for ``run``: the specs the driver resolved, opened in this process
    (no defaults are chosen again, so every worker calls the models the driver named)."""
    opener = RoleBackends(registry, run.concurrency, backends)
    if is_agent_function(run.agent_model):
        agent: Backend = CallableAgent(run.agent_model)
    else:
        agent = opener.open(run.agent_model, "agent")
    user = opener.open(run.user_model, "user")
    return Models(agent, user, run.agent_label, run.user_label, is_agent_function(run.agent_model))


def resolve_models(
    params: RunParams,
    registry: Registry,
    *,
    concurrency: int | None = None,
    backends: list[RunBackend] | None = None,
) -> ResolvedModels:
    """Resolve agent, user and writer; say which defaults applied and whether one model
    is doing several jobs (backends opened through :class:`RoleBackends`)."""
    notes: list[str] = []
    warnings: list[str] = []
    embedded_roles: list[str] = []
    opener = RoleBackends(registry, concurrency, [] if backends is None else backends)
    open_backend = opener.open
    backends = opener.backends

    def pick(given: Any, role: str) -> tuple[Any, bool]:
        if given is not None:
            return given, False
        spec, why = default_spec(role)
        notes.append(f"{role}: {spec} ({why})")
        if spec == EMBEDDED_SPEC:
            embedded_roles.append(role)
        return spec, True

    if is_agent_function(params.agent_model):
        agent: Backend = CallableAgent(params.agent_model)
        agent_label = agent.name
        agent_callable = True
    else:
        agent_spec, _ = pick(params.agent_model, "agent")
        agent = open_backend(agent_spec, "agent")
        agent_label = _label(agent_spec, agent)
        agent_callable = False
    user_spec, _ = pick(params.user_model, "user")
    user = open_backend(user_spec, "user")
    user_label = _label(user_spec, user)

    simulator = params.simulator
    if simulator in (TEMPLATE_WRITER, SEED_WRITER):
        writer = Writer(TEMPLATE_WRITER)
    elif simulator is None:
        spec, why = default_spec("simulator")
        if spec == EMBEDDED_SPEC:
            writer = Writer(TEMPLATE_WRITER)
            notes.append(
                f"simulator: templates ({why}; the embedded model writes poor situations, so "
                "the world's templates write them)"
            )
        else:
            notes.append(f"simulator: {spec} ({why})")
            backend = open_backend(spec, "simulator")
            writer = Writer(_label(spec, backend), backend)
    else:
        backend = open_backend(simulator, "simulator")
        writer = Writer(_label(simulator, backend), backend)

    # The judge role's model, for a judge named without one; the run notes it once a judge
    # that calls a model is built (a verifier named by judge= calls none).
    judge_spec: str | None = None
    judge_why = ""
    if params.llm_grade or isinstance(params.judge, str):
        judge_spec, judge_why = default_spec("judge")

    if embedded_roles:
        warnings.append(
            f"No model endpoint is configured, so the embedded model {EMBEDDED_SPEC} served "
            f"{', '.join(embedded_roles)}; its answers are weak and the scores say little about "
            "a real agent (set WHILEAI_BASE_URL or pass agent_model=)."
        )
    degraded: list[str] = []
    shared = []
    if params.max_turns > 1 and same_model(user, user_label, agent, agent_label):
        shared.append("played the user")
    if writer.backend is not None and same_model(writer.backend, writer.label, agent, agent_label):
        shared.append("wrote the situations")
    if shared:
        degraded.append("same_model")
        warnings.append(
            f"The agent model {agent_label} also {' and '.join(shared)}, so the run grades the "
            "model against itself; pass simulator= for the writer and user_model= for the user "
            "to put those jobs on a different model."
        )
    return ResolvedModels(
        models=Models(agent, user, agent_label, user_label, agent_callable),
        writer=writer,
        notes=notes,
        warnings=warnings,
        degraded=degraded,
        agent_spec=agent_label,
        user_spec=user_label,
        simulator=writer.label,
        judge_spec=judge_spec,
        judge_why=judge_why,
        backends=backends,
    )
