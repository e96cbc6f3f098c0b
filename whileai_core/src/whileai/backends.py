"""The backend interface: how the engine, the writer, the simulated user and the judge talk to a
model, whichever plugin serves it.

A backend is what a ``whileai_register_backends`` factory returns: an object with a ``name``
(the spec it was resolved from) and an async ``complete(...)`` returning a :class:`Completion`.
Backend plugins raise :class:`BackendError` for a call that failed after its retries; the
engine records it on that rollout's row and the run goes on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from whileai.registry import Registry, get_registry
from whileai.schema.wording import counted, named_with_close

#: Environment variables that choose each role's model (a spec: ``openai:<model>``,
#: ``vllm:<model>@<url>``, a bare URL, ``local:smollm2`` or a third-party backend name).
ROLE_ENV = {
    "agent": "WHILEAI_AGENT",
    "simulator": "WHILEAI_SIMULATOR",
    "user": "WHILEAI_USER",
    "judge": "WHILEAI_JUDGE",
}
#: The OpenAI-compatible endpoint the hosted defaults are reached through, and its key.
BASE_URL_ENV = "WHILEAI_BASE_URL"
API_KEY_ENV = "WHILEAI_API_KEY"
#: The hosted defaults (seed pages): rollouts from Qwen, judging by Phi-4, so a judge never
#: grades its own model's writing.
DEFAULT_AGENT_MODEL = "Qwen/Qwen2.5-7B-Instruct"
DEFAULT_JUDGE_MODEL = "microsoft/phi-4"
#: What serves every role when no endpoint is configured: the embedded model, offline.
EMBEDDED_SPEC = "local:smollm2"


@attrs.frozen
class ToolCall:
    """A function call the model asked for (OpenAI format, arguments already parsed)."""

    id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    #: the raw argument text when it was not valid JSON (arguments is then empty)
    raw_arguments: str | None = None


@attrs.frozen
class Sampling:
    """How a call samples. ``None`` fields fall back to the backend's own defaults."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None

    @classmethod
    def coerce(cls, value: Sampling | Mapping[str, Any] | None) -> Sampling:
        if value is None:
            return cls()
        if isinstance(value, Sampling):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"sampling must be a mapping or Sampling, got {type(value).__name__}")
        known = {f.name for f in attrs.fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(
                f"sampling has unknown keys {named_with_close(unknown, sorted(known))}; "
                f"known: {sorted(known)}"
            )
        data = dict(value)
        if data.get("stop") is not None:
            data["stop"] = tuple(data["stop"])
        return cls(**data)

    def with_seed(self, seed: int) -> Sampling:
        """This sampling with ``seed`` (a rollout's own, made for every rollout: by name,
        at half the cost of ``attrs.evolve``'s look at every field)."""
        return Sampling(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            top_p=self.top_p,
            seed=seed,
            stop=self.stop,
        )


@attrs.frozen
class Completion:
    """One model answer, with what the server reported about it."""

    text: str
    model: str
    #: temperature, max_tokens and model, as resolved for this call
    sampling: Mapping[str, Any]
    tool_calls: tuple[ToolCall, ...] = ()
    #: "stop", "tool_calls", or "truncated" (cut at the token cap)
    finish_reason: str = "stop"
    input_tokens: int | None = None
    output_tokens: int | None = None
    #: of ``input_tokens``, how many the server answered from its prompt cache (priced at the
    #: model's cached-input rate); None when the server does not say
    cached_input_tokens: int | None = None
    #: with logprobs=True: summed log-probability of the generated tokens, and their count
    logprob: float | None = None
    n_tokens: int | None = None
    #: how many times the call was retried (rate limits, 5xx) before this answer
    retries: int = 0
    #: seconds spent waiting on Retry-After / back-off before this answer
    waited_s: float = 0.0

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "truncated"


@attrs.define
class BackendStats:
    """What a backend did across all its calls: the counters a run's report carries.

    A backend keeps one of these as ``backend.stats`` and updates it as calls, retries and
    waits happen, so a run that spent minutes waiting on rate limits can say so.
    """

    #: complete() calls started, and how they ended
    calls: int = 0
    succeeded: int = 0
    failed: int = 0
    #: HTTP requests (or generations) sent: calls plus retries
    requests: int = 0
    retries: int = 0
    #: pauses before a retry (back-off or Retry-After), and their total length
    waits: int = 0
    waited_s: float = 0.0
    #: rate-limit answers (HTTP 429) received, retried or not
    rate_limited: int = 0
    #: every failed attempt by kind ("rate_limited", "http_500", "timeout", ...)
    errors: dict[str, int] = attrs.Factory(dict)
    #: calls that raised BackendError in the end, by kind
    failures: dict[str, int] = attrs.Factory(dict)
    input_tokens: int = 0
    output_tokens: int = 0
    #: of ``input_tokens``, those the server reported answering from its prompt cache
    cached_input_tokens: int = 0

    def count_error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def count_failure(self, kind: str) -> None:
        self.failed += 1
        self.failures[kind] = self.failures.get(kind, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready copy for a report."""
        data = attrs.asdict(self)
        data["waited_s"] = round(self.waited_s, 3)
        return data

    def summary(self) -> str:
        """One sentence for a person: calls, retries, time spent waiting, errors."""
        parts = [f"{counted(self.calls, 'call')} ({self.failed} failed)"]
        if self.retries:
            parts.append(counted(self.retries, "retry"))
        if self.waits:
            limited = (
                f", {counted(self.rate_limited, 'rate-limit answer')}" if self.rate_limited else ""
            )
            parts.append(
                f"waited {self.waited_s:.1f} s over {counted(self.waits, 'pause')}{limited}"
            )
        if self.errors:
            parts.append("errors: " + ", ".join(f"{k} {v}" for k, v in sorted(self.errors.items())))
        return "; ".join(parts)


class BackendError(RuntimeError):
    """A model call that failed for good (after retries). ``kind`` says how."""

    def __init__(
        self, message: str, *, kind: str = "error", retries: int = 0, waited_s: float = 0.0
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retries = retries
        #: seconds spent waiting (Retry-After, back-off) before giving up
        self.waited_s = waited_s


@runtime_checkable
class Backend(Protocol):
    """What every backend plugin's factory returns."""

    name: str

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion: ...


def is_agent_function(agent: Any) -> bool:
    """``agent_model=`` is the user's own agent function (not a spec string, not a backend
    object with ``complete``)."""
    return callable(agent) and not isinstance(agent, str) and not hasattr(agent, "complete")


def default_spec(role: str, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The spec a role uses when the caller gave none, and why (for the run's report).

    ``WHILEAI_<ROLE>`` wins; else, with ``WHILEAI_BASE_URL`` set, the hosted default model of
    the role on that endpoint; else the embedded model.
    """
    if role not in ROLE_ENV:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLE_ENV)}")
    env = os.environ if environ is None else environ
    explicit = env.get(ROLE_ENV[role], "").strip()
    if explicit:
        return explicit, f"from {ROLE_ENV[role]}"
    base_url = env.get(BASE_URL_ENV, "").strip()
    if base_url:
        model = DEFAULT_JUDGE_MODEL if role == "judge" else DEFAULT_AGENT_MODEL
        return f"vllm:{model}@{base_url}", f"hosted default on {BASE_URL_ENV}"
    return EMBEDDED_SPEC, f"no endpoint configured ({BASE_URL_ENV} unset): the embedded model"


def resolve_backend(
    spec: str | Backend | None,
    *,
    role: str = "agent",
    registry: Registry | None = None,
    environ: Mapping[str, str] | None = None,
    offer: Mapping[str, Any] | None = None,
    **options: Any,
) -> Backend:
    """A backend for a spec, an object that already is one, or the role's default
    (``offer`` and ``options`` as for :meth:`Registry.resolve`)."""
    if spec is not None and not isinstance(spec, str):
        if isinstance(spec, Backend):
            # a live backend is the caller's; a registry that wraps backends (the response
            # cache) wraps it too
            wrap = getattr(registry, "backend_wrapper", None)
            return wrap(spec) if wrap is not None else spec
        raise TypeError(f"a {role} model must be a spec string or a backend, got {spec!r}")
    chosen = spec if spec is not None else default_spec(role, environ)[0]
    backend = get_registry(registry).resolve("backend", chosen, offer=offer, **options)
    if not isinstance(backend, Backend):
        raise TypeError(f"backend {chosen!r} does not implement complete(messages, ...)")
    return backend
