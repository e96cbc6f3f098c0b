"""Chat messages in the shapes llama.cpp's chat templates can render.

Callers send OpenAI-format messages: ``tool`` results, assistant turns that carry ``tool_calls``
and no content, content as a list of text parts. SmolLM2's own template concatenates
``content`` as a string and knows no ``tool`` role, and llama.cpp's ``chatml-function-calling``
template renders only system, user and assistant turns (a ``tool`` turn would come out as an
empty, unterminated block) and lists the tools only inside a system message. So every message is
checked here, and tool results become user turns that say which function returned what.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

#: Given to the model when tools are offered and the caller sent no system message: the
#: function-calling template lists the tools inside the system message, and without one the
#: model never learns they exist.
TOOLS_SYSTEM_PROMPT = "You are a helpful assistant."

_ROLES = ("system", "user", "assistant", "tool")


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                raise ValueError(
                    f"{where}: the local model reads text only; got a content part {part!r}"
                )
        return "".join(parts)
    raise ValueError(f"{where}: content must be a string or a list of text parts, got {content!r}")


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def _tool_calls(message: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    calls = message.get("tool_calls") or []
    out = []
    for j, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ValueError(
                f"{where}.tool_calls[{j}]: expected {{'function': {{'name': ..., 'arguments': ...}}}}"
            )
        out.append(
            {
                "id": str(call.get("id", f"call_{j}")),
                "type": "function",
                "function": {
                    "name": function["name"],
                    "arguments": _arguments_text(function.get("arguments", {})),
                },
            }
        )
    return out


def normalize(messages: Sequence[Mapping[str, Any]], *, for_tools: bool) -> list[dict[str, Any]]:
    """Messages the template renders faithfully; ``ValueError`` naming the bad message.

    ``for_tools=True`` keeps assistant tool calls structured (the function-calling template
    renders them) and makes sure a system message exists to carry the tool list; otherwise a
    tool call is written into the assistant's text the way that template writes it.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of {{'role', 'content'}} dicts, got {messages!r}")
    if not messages:
        raise ValueError("messages is empty: the model needs at least one user message")
    names_by_call: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise TypeError(f"{where} must be a dict with 'role' and 'content', got {message!r}")
        role = message.get("role")
        if role not in _ROLES:
            raise ValueError(f"{where}: role must be one of {', '.join(_ROLES)}, got {role!r}")
        text = _text(message.get("content"), where)
        if role == "tool":
            call_id = message.get("tool_call_id")
            name = message.get("name") or names_by_call.get(str(call_id), "function")
            out.append({"role": "user", "content": f"functions.{name} returned:\n{text}"})
            continue
        if role == "assistant" and message.get("tool_calls"):
            calls = _tool_calls(message, where)
            names_by_call.update({c["id"]: c["function"]["name"] for c in calls})
            if for_tools:
                out.append({"role": "assistant", "content": text or None, "tool_calls": calls})
            else:
                written = "\n".join(
                    f"functions.{c['function']['name']}:\n{c['function']['arguments']}"
                    for c in calls
                )
                out.append({"role": "assistant", "content": f"{text}\n{written}".strip()})
            continue
        out.append({"role": role, "content": text})
    if for_tools and out[0]["role"] != "system":
        out.insert(0, {"role": "system", "content": TOOLS_SYSTEM_PROMPT})
    return out


def check_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-format tool definitions, checked; ``ValueError`` naming the bad one."""
    if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
        raise TypeError(f"tools must be a list of OpenAI tool definitions, got {tools!r}")
    out = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ValueError(
                f"tools[{i}]: expected {{'type': 'function', 'function': {{'name': ..., "
                f"'parameters': {{...}}}}}}, got {tool!r}"
            )
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        out.append(
            {
                "type": "function",
                "function": {
                    "name": function["name"],
                    "description": str(function.get("description", "")),
                    "parameters": dict(parameters),
                },
            }
        )
    return out
