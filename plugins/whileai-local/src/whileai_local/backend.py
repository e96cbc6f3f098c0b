"""The embedded backend: ``local:smollm2`` (or ``local:<path>.gguf``) served in-process.

Generation is CPU-bound C code, so it runs on the backend's worker threads and the event loop
stays free: many rollouts interleave, up to one generation per pooled context at a time.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs

from whileai.backends import BackendError, Completion, Sampling, ToolCall
from whileai_local.contexts import DEFAULT_N_CTX, ContextKey, ContextPool, context_pool
from whileai_local.messages import check_tools, normalize
from whileai_local.model_file import ModelFile

#: llama-cpp-python's own chat default, kept so a call without sampling behaves as there.
DEFAULT_TEMPERATURE = 0.2
#: A bound on an unset max_tokens, so a rambling small model cannot fill the context.
DEFAULT_MAX_TOKENS = 512
_FUNCTION_CALLING = "chatml-function-calling"
_FINISH = {"length": "truncated", "stop": "stop", "tool_calls": "tool_calls"}


def json_schema_of(response_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema a ``response_format`` asks for: ``{}`` for any JSON object, ``None``
    for free text. Accepts ``{"type": "json_object", "schema": ...}`` and OpenAI's
    ``{"type": "json_schema", "json_schema": {"schema": ...}}``."""
    if response_format is None:
        return None
    if not isinstance(response_format, Mapping):
        raise TypeError(f"response_format must be a dict, got {response_format!r}")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        schema = response_format.get("schema", {})
    elif kind == "json_schema":
        inner = response_format.get("json_schema")
        if not isinstance(inner, Mapping) or "schema" not in inner:
            raise ValueError(
                "response_format type 'json_schema' needs {'json_schema': {'schema': {...}}}"
            )
        schema = inner["schema"]
    else:
        raise ValueError(
            f"response_format type must be 'text', 'json_object' or 'json_schema', got {kind!r}"
        )
    if not isinstance(schema, Mapping):
        raise ValueError(f"response_format schema must be a dict, got {schema!r}")
    return dict(schema)


def _grammar(schema: dict[str, Any]) -> Any:
    from llama_cpp.llama_grammar import LlamaGrammar

    if not schema:
        return LlamaGrammar.from_json_schema(json.dumps({"type": "object"}), verbose=False)
    try:
        return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    except Exception as exc:  # llama.cpp would quietly fall back to any JSON; say so instead
        raise ValueError(f"response_format schema cannot be turned into a grammar: {exc}") from exc


@attrs.frozen
class _Request:
    messages: Sequence[Mapping[str, Any]]
    tools: list[dict[str, Any]] | None
    temperature: float
    max_tokens: int
    top_p: float | None
    seed: int
    stop: list[str] | None
    logprobs: bool
    schema: dict[str, Any] | None


def _resolve_sampling(sampling: Sampling) -> tuple[float, int]:
    temperature = DEFAULT_TEMPERATURE if sampling.temperature is None else sampling.temperature
    max_tokens = DEFAULT_MAX_TOKENS if sampling.max_tokens is None else sampling.max_tokens
    if not 0 <= temperature <= 2:
        raise ValueError(f"sampling.temperature must be in [0, 2], got {temperature}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"sampling.max_tokens must be a positive integer, got {max_tokens!r}")
    if sampling.top_p is not None and not 0 < sampling.top_p <= 1:
        raise ValueError(f"sampling.top_p must be in (0, 1], got {sampling.top_p}")
    return float(temperature), max_tokens


@attrs.define(eq=False)
class LocalBackend:
    """A backend running a GGUF model in this process through llama-cpp-python."""

    name: str
    model_file: ModelFile
    #: how many llama.cpp contexts generate side by side (one thread each)
    contexts: int
    n_ctx: int = DEFAULT_N_CTX
    _executor: ThreadPoolExecutor | None = attrs.field(default=None, init=False, repr=False)

    @property
    def model(self) -> str:
        return self.model_file.model_name

    def _pool(self, *, logits_all: bool, chat_format: str | None) -> ContextPool:
        key = ContextKey(self.model_file.path, logits_all, chat_format, self.n_ctx)
        return context_pool(key, self.contexts)

    def _workers(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self.contexts, thread_name_prefix="whileai-local"
            )
        return self._executor

    def close(self) -> None:
        """Stop the worker threads (the loaded model stays cached for the process)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One chat completion; see ``whileai.backends.Backend``.

        With ``tools`` the model first chooses between answering and calling one (a grammar
        restricts it to ``message:`` or ``functions.<name>:``), then writes the arguments under
        the tool's JSON schema. A fixed ``sampling.seed`` makes the answer reproducible at any
        temperature; without one each call draws a fresh seed.
        """
        resolved = Sampling.coerce(sampling)
        temperature, max_tokens = _resolve_sampling(resolved)
        request = _Request(
            messages=messages,
            tools=check_tools(tools) if tools else None,
            temperature=temperature,
            max_tokens=max_tokens,
            top_p=resolved.top_p,
            # an unseeded call draws from the OS, leaving the caller's `random` stream untouched
            seed=resolved.seed if resolved.seed is not None else secrets.randbits(31),
            stop=list(resolved.stop) if resolved.stop else None,
            logprobs=bool(logprobs),
            schema=json_schema_of(response_format),
        )
        # Checked here, on the caller's side, so a malformed message fails before any thread.
        normalize(messages, for_tools=request.tools is not None)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._workers(), self._generate, request)

    def _generate(self, request: _Request) -> Completion:
        try:
            if request.tools is not None:
                return self._with_tools(request)
            return self._chat(request, spent=(0, 0))
        except ValueError as exc:
            if "exceed context window" in str(exc):
                raise BackendError(
                    f"{self.name}: the conversation does not fit the {self.n_ctx}-token "
                    f"context: {exc}",
                    kind="context_length",
                ) from exc
            raise

    def _options(self, request: _Request) -> dict[str, Any]:
        options: dict[str, Any] = {
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "stop": request.stop,
            "seed": request.seed,
        }
        if request.top_p is not None:
            options["top_p"] = request.top_p
        return options

    def _with_tools(self, request: _Request) -> Completion:
        pool = self._pool(logits_all=request.logprobs, chat_format=_FUNCTION_CALLING)
        calls: list[Any] = []
        with pool.borrow() as llama:
            # Start from an empty cache so the answer depends on the seed alone, not on what
            # this context generated before (a reused prefix is evaluated in other batches).
            llama.reset()
            # The function-calling handler does not pass the seed on to sampling; it reseeds
            # each step from the context's current seed, so setting that makes it reproducible.
            llama.set_seed(request.seed)
            llama.calls, llama.max_tokens_cap = calls, request.max_tokens
            try:
                out = llama.create_chat_completion(
                    messages=normalize(request.messages, for_tools=True),
                    tools=request.tools,
                    tool_choice="auto",
                    **self._options(request),
                )
            finally:
                llama.calls = None
        message = out["choices"][0]["message"]
        tool_calls = message.get("tool_calls") or []
        # the handler's own usage leaves out the steps that chose the tool; count every step
        spent = (
            int(calls[0]["usage"]["prompt_tokens"]) if calls else 0,
            sum(int(call["usage"]["completion_tokens"]) for call in calls),
        )
        if not tool_calls:
            # The model chose to answer in text. llama-cpp-python's handler then generates
            # under a grammar that allows only another function name or the end of the turn,
            # so its text is always empty; the answer is written by the plain chat template.
            return self._chat(request, spent=spent)
        cut = any(call["choices"][0]["finish_reason"] == "length" for call in calls)
        logprob = n_tokens = None
        if request.logprobs:
            tokens = [
                float(value)
                for call in calls
                for value in (call["choices"][0]["logprobs"] or {}).get("token_logprobs") or []
            ]
            logprob, n_tokens = float(sum(tokens)), len(tokens)
        return Completion(
            text=message.get("content") or "",
            model=self.model,
            sampling=self._sampling(request),
            tool_calls=tuple(_tool_call(call) for call in tool_calls),
            finish_reason="truncated" if cut else "tool_calls",
            input_tokens=spent[0],
            output_tokens=spent[1],
            # every token the model chose this turn: the tool's name and its arguments
            logprob=logprob,
            n_tokens=n_tokens,
        )

    def _chat(self, request: _Request, *, spent: tuple[int, int]) -> Completion:
        pool = self._pool(logits_all=request.logprobs, chat_format=None)
        options = self._options(request)
        if request.schema is not None:
            options["grammar"] = _grammar(request.schema)
        if request.logprobs:
            options.update(logprobs=True, top_logprobs=1)
        with pool.borrow() as llama:
            llama.reset()
            out = llama.create_chat_completion(
                messages=normalize(request.messages, for_tools=False), **options
            )
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        logprob = n_tokens = None
        if request.logprobs:
            tokens = (choice.get("logprobs") or {}).get("content") or []
            logprob = float(sum(float(t["logprob"]) for t in tokens))
            n_tokens = len(tokens)
        return Completion(
            text=choice["message"].get("content") or "",
            model=self.model,
            sampling=self._sampling(request),
            finish_reason=_FINISH.get(choice.get("finish_reason") or "stop", "stop"),
            # `spent` is what the tool choice cost before the model chose to answer in text:
            # counted in usage, while logprob and n_tokens cover the text's tokens only.
            input_tokens=spent[0] + int(usage.get("prompt_tokens", 0)),
            output_tokens=spent[1] + int(usage.get("completion_tokens", 0)),
            logprob=logprob,
            n_tokens=n_tokens,
        )

    def _sampling(self, request: _Request) -> dict[str, Any]:
        return {
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "model": self.model,
        }


def _tool_call(call: Mapping[str, Any]) -> ToolCall:
    function = call["function"]
    raw = function.get("arguments") or "{}"
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError:
        return ToolCall(id=str(call["id"]), name=function["name"], raw_arguments=raw)
    if not isinstance(arguments, dict):
        return ToolCall(id=str(call["id"]), name=function["name"], raw_arguments=raw)
    return ToolCall(id=str(call["id"]), name=function["name"], arguments=arguments)
