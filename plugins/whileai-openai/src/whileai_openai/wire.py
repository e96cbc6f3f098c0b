"""The OpenAI chat-completions wire format: building a request body and reading an answer.

Pure functions over dicts, so the format is tested without a server. Reading raises
:class:`WireError` with a failure kind; the backend turns it into a ``BackendError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.backends import Completion, ToolCall

#: How the server's finish_reason maps onto the row's: a turn cut at the token cap is truncated.
FINISH_REASONS = {
    "stop": "stop",
    "length": "truncated",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
#: How a JSON-schema request is phrased: OpenAI's and vLLM's ``json_schema`` form, or
#: llama.cpp server's ``json_object`` with a ``schema`` (it rejects ``json_schema``).
JSON_SCHEMA_MODES = ("json_schema", "json_object")


class WireError(ValueError):
    """An answer that cannot be read as a chat completion; ``kind`` says how."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def tool_spec(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A tool in OpenAI's format. ``{"name", "description", "parameters"}`` is wrapped as a
    function; a tool already in ``{"type": "function", "function": {...}}`` form passes as is."""
    if not isinstance(tool, Mapping):
        raise TypeError(f"each tool must be a mapping, got {type(tool).__name__}")
    if "type" in tool:
        return dict(tool)
    if "name" not in tool:
        raise ValueError(f"a tool needs a 'name' (or OpenAI's 'type'/'function' form): {tool!r}")
    function = {"name": tool["name"], "parameters": tool.get("parameters", {"type": "object"})}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def tool_call_message(call: ToolCall | Mapping[str, Any]) -> dict[str, Any]:
    """A tool call as OpenAI expects it inside an assistant message (arguments as JSON text)."""
    if isinstance(call, ToolCall):
        arguments = (
            call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
        )
        return {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": arguments},
        }
    return dict(call)


def message_spec(message: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message for the wire: ToolCall objects in ``tool_calls`` become OpenAI dicts."""
    if not isinstance(message, Mapping) or "role" not in message:
        raise ValueError(f"each message must be a mapping with a 'role', got {message!r}")
    out = dict(message)
    if out.get("tool_calls"):
        out["tool_calls"] = [tool_call_message(c) for c in out["tool_calls"]]
    return out


def response_format_spec(response_format: Mapping[str, Any], mode: str) -> dict[str, Any]:
    """``response_format`` as the server understands it (see ``JSON_SCHEMA_MODES``)."""
    fmt = dict(response_format)
    if mode == "json_object" and fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        return {"type": "json_object", "schema": schema} if schema else {"type": "json_object"}
    return fmt


def read_completion(
    body: Any,
    *,
    requested_model: str,
    temperature: float | None,
    max_tokens: int | None,
    logprobs: bool,
) -> Completion:
    """A :class:`Completion` from a decoded chat-completions answer."""
    if not isinstance(body, Mapping):
        raise WireError(
            f"the answer is JSON but not an object (got {type(body).__name__})", kind="malformed"
        )
    choices = body.get("choices")
    if choices is None:
        raise WireError("the answer has no 'choices' field", kind="malformed")
    if not isinstance(choices, list):
        raise WireError("the answer's 'choices' is not a list", kind="malformed")
    if not choices:
        raise WireError("the server answered with an empty choice list", kind="empty")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        raise WireError("the first choice has no 'message' object", kind="malformed")
    model = body.get("model") or requested_model
    text = message.get("content") or ""
    if not isinstance(text, str):
        raise WireError("the message content is not a string", kind="malformed")
    calls = tuple(_read_tool_call(i, c) for i, c in enumerate(message.get("tool_calls") or ()))
    raw_finish = choice.get("finish_reason")
    finish = FINISH_REASONS.get(raw_finish, raw_finish) if raw_finish else "stop"
    if calls and finish == "stop":
        finish = "tool_calls"
    raw_usage = body.get("usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, Mapping) else {}
    logprob, n_tokens = _read_logprobs(choice.get("logprobs")) if logprobs else (None, None)
    return Completion(
        text=text,
        model=str(model),
        sampling={"temperature": temperature, "max_tokens": max_tokens, "model": str(model)},
        tool_calls=calls,
        finish_reason=str(finish),
        input_tokens=_int_or_none(usage.get("prompt_tokens")),
        output_tokens=_int_or_none(usage.get("completion_tokens")),
        cached_input_tokens=_cached_tokens(usage),
        logprob=logprob,
        n_tokens=n_tokens,
    )


def _cached_tokens(usage: Mapping[str, Any]) -> int | None:
    """The prompt tokens served from the server's cache: OpenAI's (and vLLM's, llama.cpp's)
    ``usage.prompt_tokens_details.cached_tokens``; None when the server does not say."""
    details = usage.get("prompt_tokens_details")
    if not isinstance(details, Mapping):
        return None
    return _int_or_none(details.get("cached_tokens"))


def _read_tool_call(index: int, call: Any) -> ToolCall:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise WireError(f"tool call {index} has no function name", kind="malformed")
    raw = function.get("arguments")
    call_id = str(call.get("id") or f"call_{index}")
    if isinstance(raw, Mapping):  # some servers send the arguments already decoded
        return ToolCall(id=call_id, name=function["name"], arguments=dict(raw))
    text = raw if isinstance(raw, str) else ""
    try:
        parsed = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        # Kept verbatim: a model that writes broken arguments is a behaviour worth seeing.
        return ToolCall(id=call_id, name=function["name"], arguments={}, raw_arguments=text)
    return ToolCall(id=call_id, name=function["name"], arguments=parsed)


def _read_logprobs(block: Any) -> tuple[float | None, int | None]:
    """Summed per-token log-probabilities and their count, from the chat format
    (``logprobs.content[].logprob``) or the legacy one (``logprobs.token_logprobs``)."""
    if not isinstance(block, Mapping):
        return None, None
    values: Sequence[Any] | None = None
    if isinstance(block.get("content"), list):
        values = [t.get("logprob") for t in block["content"] if isinstance(t, Mapping)]
    elif isinstance(block.get("token_logprobs"), list):
        values = block["token_logprobs"]
    if values is None:
        return None, None
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    if len(numbers) != len(values):
        raise WireError("a token logprob is missing or not a number", kind="malformed")
    return sum(numbers), len(numbers)


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
