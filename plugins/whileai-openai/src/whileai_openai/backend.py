"""A backend for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp's
server, a proxy), over httptools, aiohttp or httpx (see :mod:`whileai_openai.transports`).

In-flight requests are bounded by ``concurrency`` (slots taken before each request, and a
connection pool of the same size). Rate limits and server errors are retried with back-off that honours
``Retry-After``; a ``Retry-After`` on a 429 pauses every caller of this backend, not just the
one that got it, since they share the quota. Everything is counted on ``backend.stats``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import ssl
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from whileai.backends import BackendError, BackendStats, Completion, Sampling
from whileai.schema.secrets import SECRET_NAMES, Redactor, safe_spec, safe_url, url_secrets
from whileai.schema.wording import counted
from whileai_openai import transports
from whileai_openai.retry import (
    RetryPolicy,
    is_retryable_status,
    parse_retry_after,
)
from whileai_openai.transports import Settings, Transport, TransportFailure, make_transport
from whileai_openai.wire import (
    JSON_SCHEMA_MODES,
    WireError,
    message_spec,
    read_completion,
    response_format_spec,
    tool_spec,
)

log = logging.getLogger("whileai.openai")

#: What the backend sends when neither the call nor the backend's options say: OpenAI's own
#: default temperature, sent explicitly so the row's ``sampling`` states what was used.
DEFAULT_TEMPERATURE = 1.0
#: A reply cap for one turn (convention, untested); a turn that hits it is marked truncated.
DEFAULT_MAX_TOKENS = 1024
#: Requests in flight at once, per backend, when the engine passes no ``concurrency``.
DEFAULT_CONCURRENCY = 32
#: Seconds for one HTTP request (a long generation on a busy server takes a while).
DEFAULT_TIMEOUT_S = 120.0
#: How much of an error body goes into a message: enough to read the server's reason.
_BODY_EXCERPT = 300


class Secret:
    """An API key that never prints: repr and str show ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)


@attrs.define
class _LoopState:
    """What must belong to one event loop: the transport and the slots.

    ``slots`` holds one token per request allowed in flight, each naming the transport pool it
    runs on: taking a token is the concurrency limit and the choice of pool in one step. Last
    in, first out, so requests go back to pools whose connections are already open.
    """

    transport: Transport
    slots: asyncio.LifoQueue[int]
    model_lock: asyncio.Lock


@attrs.define
class _Failure:
    """One failed attempt: its kind, a message for a person, and a Retry-After if any."""

    kind: str
    message: str
    retryable: bool
    retry_after: float | None = None


class OpenAICompatibleBackend:
    """An OpenAI-compatible endpoint as a whileai backend (see ``docs/backends.md``)."""

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout: float = DEFAULT_TIMEOUT_S,
        connect_timeout: float = 10.0,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        temperature: float | None = DEFAULT_TEMPERATURE,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        max_tokens_field: str = "max_tokens",
        json_schema_mode: str = "json_schema",
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        jitter_seed: int | None = None,
        transport: str = "auto",
    ) -> None:
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ValueError(f"concurrency must be a positive integer, got {concurrency!r}")
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if transport not in transports.NAMES:
            raise ValueError(f"transport must be one of {transports.NAMES}, got {transport!r}")
        if json_schema_mode not in JSON_SCHEMA_MODES:
            raise ValueError(
                f"json_schema_mode must be one of {JSON_SCHEMA_MODES}, got {json_schema_mode!r}"
            )
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                "max_tokens_field must be 'max_tokens' or 'max_completion_tokens', "
                f"got {max_tokens_field!r}"
            )
        policy = retry or RetryPolicy()
        if max_retries is not None:
            policy = attrs.evolve(policy, max_retries=max_retries)
        self.name = name
        # a query on the endpoint (an api-key=, an api-version=) goes on every request
        root, _, query = base_url.partition("?")
        self.base_url = root.rstrip("/")
        self._query = f"?{query}" if query else ""
        self.model = model
        #: the model as configured (None: the server's first), before any is resolved
        self._configured_model = model
        self.concurrency = concurrency
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry = policy
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_tokens_field = max_tokens_field
        self.json_schema_mode = json_schema_mode
        self.extra_body = dict(extra_body or {})
        self.transport = transport
        self.stats = BackendStats()
        self._api_key = Secret(api_key or "")
        self._headers = dict(headers or {})
        self._redactor = Redactor(self.secrets())
        self._rng = random.Random(jitter_seed)
        # A 429's Retry-After pauses every caller until this monotonic instant.
        self._cooldown_until = 0.0
        self._loop_states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    def secrets(self) -> list[str]:
        """What this backend holds that no output may show: the API key, the values of
        secret headers (``Authorization``, an Azure ``api-key``, any ``*token*``), and the
        credentials and secret query values of its URL."""
        out = [self._api_key.reveal()] if self._api_key else []
        for header, value in self._headers.items():
            if SECRET_NAMES.search(header) and value:
                out.append(value)
                out.extend(part for part in value.split() if len(part) >= 8)
        out.extend(url_secrets(self.base_url + self._query))
        return out

    def cache_identity(self) -> str:
        """What names this backend's answers in the response cache, known without a request:
        the endpoint, the model as configured (None: whatever the server serves first), and
        this backend's own sampling defaults."""
        return json.dumps(
            {
                "backend": "openai-compatible",
                "url": safe_url(self.base_url),
                "model": self._configured_model,
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
                "max_tokens_field": self.max_tokens_field,
                "extra_body": self.extra_body,
            },
            sort_keys=True,
            default=str,
        )

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"{type(self).__name__}(name={self.name!r}, base_url={safe_url(self.base_url)!r}, "
            f"model={self.model!r}, concurrency={self.concurrency}, api_key={key})"
        )

    # -- lifecycle ------------------------------------------------------------------------
    def _state(self) -> _LoopState:
        # Connection pools and asyncio queues belong to the loop that first used them; a
        # backend reused under a second asyncio.run() gets fresh ones.
        loop = asyncio.get_running_loop()
        state = self._loop_states.get(loop)
        if state is None:
            headers = {
                "Accept": "application/json",
                "Content-Type": "application/json",
                **self._headers,
            }
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key.reveal()}"
            # One TLS context per loop: building one loads the CA bundle (~70 ms). A plain-http
            # endpoint never uses TLS (redirects are not followed), so it gets none.
            tls = ssl.create_default_context() if self.base_url.startswith("https") else None
            transport = make_transport(
                self.transport,
                Settings(
                    headers,
                    self.concurrency,
                    self.timeout,
                    self.connect_timeout,
                    tls,
                    self.base_url,
                ),
            )
            slots: asyncio.LifoQueue[int] = asyncio.LifoQueue()
            for slot in range(self.concurrency):
                slots.put_nowait(slot % transport.pools)
            state = _LoopState(transport, slots, asyncio.Lock())
            self._loop_states[loop] = state
        return state

    async def aclose(self) -> None:
        """Close this event loop's connections (the backend stays usable; it reconnects)."""
        loop = asyncio.get_running_loop()
        state = self._loop_states.pop(loop, None)
        if state is not None:
            await state.transport.aclose()

    async def __aenter__(self) -> OpenAICompatibleBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the call -------------------------------------------------------------------------
    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One chat completion; BackendError (with ``kind``) once retries are spent."""
        self.stats.calls += 1
        try:
            resolved = Sampling.coerce(sampling)
            if not messages:
                raise ValueError("messages is empty: a chat completion needs at least one")
            state = self._state()
            model = self.model or await self.resolve_model()
            # The slot first, the request body after: callers that start thousands of calls at
            # once then queue for almost nothing, and the first answers are read on time
            # instead of after every queued call has built its body.
            pool = await state.slots.get()
            try:
                temperature = (
                    resolved.temperature if resolved.temperature is not None else self.temperature
                )
                max_tokens = (
                    resolved.max_tokens if resolved.max_tokens is not None else self.max_tokens
                )
                body = self._body(
                    model,
                    messages,
                    tools,
                    resolved,
                    temperature,
                    max_tokens,
                    logprobs,
                    response_format,
                )
            except BaseException:
                state.slots.put_nowait(pool)
                raise
            data, retries, waited = await self._request_json(
                state, "POST", "/chat/completions", body, held=pool
            )
            try:
                completion = read_completion(
                    data,
                    requested_model=model,
                    temperature=temperature,
                    max_tokens=max_tokens,
                    logprobs=logprobs,
                )
            except WireError as exc:
                self.stats.count_error(exc.kind)
                raise self._error(exc.kind, f"unreadable answer: {exc}", retries, waited) from None
        except BackendError as exc:
            self.stats.count_failure(exc.kind)
            raise
        except asyncio.CancelledError:
            raise  # the caller gave up on it; neither a success nor a failure
        except BaseException:
            self.stats.failed += 1
            raise
        self.stats.succeeded += 1
        self.stats.input_tokens += completion.input_tokens or 0
        self.stats.cached_input_tokens += completion.cached_input_tokens or 0
        self.stats.output_tokens += completion.output_tokens or 0
        return attrs.evolve(completion, retries=retries, waited_s=waited)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embeddings of ``texts`` from the endpoint's ``/embeddings`` (one vector per text,
        in order); BackendError (with ``kind``) once retries are spent."""
        if not texts:
            return []
        state = self._state()
        model = self.model or await self.resolve_model()
        data, _, _ = await self._request_json(
            state, "POST", "/embeddings", {"model": model, "input": list(texts)}
        )
        rows = data.get("data") if isinstance(data, Mapping) else None
        if not isinstance(rows, list) or len(rows) != len(texts):
            raise self._error(
                "malformed",
                f"unreadable embeddings: expected {len(texts)} in 'data', got {rows!r:.80}",
                0,
                0.0,
            )
        ordered = sorted(rows, key=lambda r: r.get("index", 0) if isinstance(r, Mapping) else 0)
        vectors = []
        for row in ordered:
            vector = row.get("embedding") if isinstance(row, Mapping) else None
            if not isinstance(vector, list) or not all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in vector
            ):
                raise self._error(
                    "malformed", "unreadable embeddings: a vector is not numbers", 0, 0.0
                )
            vectors.append([float(x) for x in vector])
        return vectors

    async def resolve_model(self) -> str:
        """The model to ask for: the configured one, else the first the server lists."""
        if self.model:
            return self.model
        state = self._state()
        async with state.model_lock:
            if self.model:
                return self.model
            data, _, _ = await self._request_json(state, "GET", "/models", None)
            listed = data.get("data") if isinstance(data, Mapping) else None
            ids: list[str] = [
                m["id"]
                for m in listed or ()
                if isinstance(m, Mapping) and isinstance(m.get("id"), str) and m["id"]
            ]
            if not ids:
                raise self._error(
                    "no_model",
                    f"{self.base_url}/models lists no model; pass model= or use vllm:<model>@<url>",
                    0,
                    0.0,
                )
            model: str = ids[0]
            self.model = model
            return model

    def _body(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        sampling: Sampling,
        temperature: float | None,
        max_tokens: int | None,
        logprobs: bool,
        response_format: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": [message_spec(m) for m in messages]}
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body[self.max_tokens_field] = max_tokens
        if sampling.top_p is not None:
            body["top_p"] = sampling.top_p
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if tools:
            body["tools"] = [tool_spec(t) for t in tools]
        if logprobs:
            # top_logprobs=0 asks for the sampled token's logprob only; llama.cpp's server
            # returns none at all without it.
            body["logprobs"] = True
            body["top_logprobs"] = 0
        if response_format is not None:
            body["response_format"] = response_format_spec(response_format, self.json_schema_mode)
        body.update(self.extra_body)
        return body

    # -- HTTP with retries ----------------------------------------------------------------
    async def _request_json(
        self,
        state: _LoopState,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
        *,
        held: int | None = None,
    ) -> tuple[Any, int, float]:
        """The decoded JSON answer, the retries it took and the seconds waited before it.

        ``held`` is a slot the caller already took for the first attempt; this releases it.
        A retry gives its slot back while it sleeps and queues for one again.
        """
        retries = 0
        waited = 0.0
        while True:
            if held is not None:
                pool, held = held, None
            else:
                pool = await state.slots.get()
            try:
                # Checked with the slot in hand: a 429 may have arrived while this call queued.
                waited += await self._wait_cooldown()
                self.stats.requests += 1
                outcome = await self._attempt(state.transport, pool, method, path, body)
            finally:
                state.slots.put_nowait(pool)
            if not isinstance(outcome, _Failure):
                return outcome, retries, waited
            self.stats.count_error(outcome.kind)
            if outcome.kind == "rate_limited":
                self.stats.rate_limited += 1
            if not outcome.retryable or retries >= self.retry.max_retries:
                tail = f" after {counted(retries, 'retry')}" if retries else ""
                raise self._error(outcome.kind, f"{outcome.message}{tail}", retries, waited)
            retries += 1
            self.stats.retries += 1
            if outcome.retry_after is not None:
                if outcome.retry_after > self.retry.max_retry_after_s:
                    raise self._error(
                        outcome.kind,
                        f"{outcome.message}; the server asked to wait {outcome.retry_after:.0f} s, "
                        f"more than max_retry_after_s={self.retry.max_retry_after_s:.0f}",
                        retries - 1,
                        waited,
                    )
                delay = self.retry.after_header(outcome.retry_after, self._rng)
                why = f"Retry-After {outcome.retry_after:g} s"
            else:
                delay = self.retry.backoff(retries, self._rng)
                why = "back-off"
            if outcome.kind == "rate_limited":
                # The quota is shared: every caller of this backend waits it out, not just
                # the one that was told.
                self._cooldown_until = max(self._cooldown_until, time.monotonic() + delay)
            log.warning(
                "%s: %s; retry %d/%d in %.2f s (%s)",
                safe_spec(self.name),
                self._redact(outcome.message),
                retries,
                self.retry.max_retries,
                delay,
                why,
            )
            waited += await self._sleep(delay)

    async def _attempt(
        self,
        transport: Transport,
        pool: int,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
    ) -> Any:
        """One HTTP request: the decoded JSON body, or a :class:`_Failure` saying what went wrong."""
        where = f"{method} {self.base_url}{path}"
        payload = None if body is None else json.dumps(body).encode()
        try:
            answer = await transport.send(method, self.base_url + path + self._query, payload, pool)
        except TransportFailure as exc:
            if exc.kind == "timeout":
                return _Failure("timeout", f"{where} timed out ({exc})", True)
            return _Failure("connection", f"{where}: connection failed or was cut ({exc})", True)
        status = answer.status
        if status >= 400:
            retry_after = parse_retry_after(answer.retry_after)
            kind = "rate_limited" if status == 429 else f"http_{status}"
            # redacted before the cut: a key the cut went through would otherwise survive
            # as its first half, which no later replace of the whole key can find
            excerpt = self._redact(answer.text)[:_BODY_EXCERPT].strip()
            message = f"{where} answered HTTP {status}" + (f": {excerpt}" if excerpt else "")
            return _Failure(kind, message, is_retryable_status(status), retry_after)
        if not 200 <= status < 300:
            # a redirect (never followed) or a stray interim head: not an answer, whatever the
            # body holds
            return _Failure(
                f"http_{status}",
                f"{where} answered HTTP {status}, not a completion (redirects are not followed)",
                retryable=False,
            )
        try:
            return json.loads(answer.content)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _Failure(
                "malformed",
                f"{where} answered HTTP {status} with a body that is not JSON: "
                f"{self._redact(answer.text)[:_BODY_EXCERPT]!r}",
                retryable=False,
            )

    async def _wait_cooldown(self) -> float:
        pause = self._cooldown_until - time.monotonic()
        return await self._sleep(pause) if pause > 0 else 0.0

    async def _sleep(self, seconds: float) -> float:
        """Sleep and count it; returns the seconds actually slept (never less than asked)."""
        start = time.monotonic()
        # asyncio may wake a hair early; a Retry-After is a floor, so sleep out the remainder.
        while (remaining := seconds - (time.monotonic() - start)) > 0:
            await asyncio.sleep(remaining)
        slept = time.monotonic() - start
        self.stats.waits += 1
        self.stats.waited_s += slept
        return slept

    def _redact(self, text: str) -> str:
        """``text`` without any of this backend's secrets, whole, encoded or in fragments
        (a JSON body's escapes decoded first, so an escaped key is found too)."""
        return self._redactor.text(_unescaped(text))

    def _error(self, kind: str, message: str, retries: int, waited: float) -> BackendError:
        return BackendError(
            self._redact(f"{safe_spec(self.name)}: {message}"),
            kind=kind,
            retries=retries,
            waited_s=waited,
        )


def _unescaped(text: str) -> str:
    """A JSON body with its string escapes decoded (``\\u0073k-...`` -> ``sk-...``), so
    redaction sees what the escapes spell; any other text as it is."""
    if "\\" not in text:
        return text
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text
