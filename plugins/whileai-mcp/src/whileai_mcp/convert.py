"""MCP's records to what the engine speaks: tool listings to OpenAI tool schemas, tool results
to JSON-able content."""

from __future__ import annotations

import json
from typing import Any


def tool_schema(tool: Any) -> dict[str, Any]:
    """An MCP ``Tool`` as an OpenAI-format function schema."""
    parameters = dict(getattr(tool, "input_schema", None) or {"type": "object", "properties": {}})
    parameters.pop("title", None)  # the SDK's generated model name says nothing to the agent
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description or tool.name,
            "parameters": parameters,
        },
    }


def _block(block: Any) -> Any:
    kind = getattr(block, "type", None)
    if kind == "text":
        text = block.text
        try:
            return json.loads(text)
        except (ValueError, TypeError):
            return text
    if kind in ("image", "audio"):
        # the bytes would cost the agent thousands of tokens and mean nothing to a text model
        return {"type": kind, "mime_type": getattr(block, "mime_type", None)}
    if kind == "resource_link":
        return {"type": kind, "uri": str(getattr(block, "uri", ""))}
    dumped = block.model_dump(mode="json") if hasattr(block, "model_dump") else str(block)
    return dumped


def result_content(result: Any) -> Any:
    """What a ``CallToolResult`` says: its structured content when it has one, else its
    blocks (one block alone, unwrapped; text that is JSON, parsed)."""
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return structured
    blocks = [_block(b) for b in getattr(result, "content", None) or []]
    if len(blocks) == 1:
        return blocks[0]
    return blocks


def result_text(result: Any) -> str:
    """A failed result's message, for ``ToolResult.error``."""
    content = result_content(result)
    return content if isinstance(content, str) else json.dumps(content, default=str)
