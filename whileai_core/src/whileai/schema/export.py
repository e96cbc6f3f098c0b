"""The one function every export path calls: drop what must never leave memory.

The privileged block (``privileged`` and the names of its fields: ``principle``,
``hidden_state``, ``reference``, ``rubric``) would put the answer key one step from a training
file; ``vector`` is the raw embedding the diversity search keeps for the length of a run. These
six keys are reserved: they are removed at any depth of a row, inside carried fields and inside
tool results, including tool results that arrive as JSON text. Everything else is kept as it
was. ``messages`` is then rebuilt from the cleaned steps, so a privileged value a tool returned
cannot survive in the chat transcript either. What a grader wrote (``reason``, ``judge_meta``)
has the row's reference, principle and rubric masked, since a verifier's reason quotes what
it compared ("41 != 42"); the agent's own words are left as they are.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

PRIVILEGED_KEYS: frozenset[str] = frozenset(
    {"privileged", "principle", "hidden_state", "reference", "rubric"}
)
MEMORY_ONLY_KEYS: frozenset[str] = frozenset({"vector"})
NEVER_EXPORTED: frozenset[str] = PRIVILEGED_KEYS | MEMORY_ONLY_KEYS


def strip_private(value: Any) -> Any:
    """A copy of ``value`` with every reserved key removed at any depth.

    Mappings and sequences are rebuilt (the input is never modified); a string that holds a
    JSON object or array is parsed, cleaned and re-serialised only when it held a reserved key.
    """
    if isinstance(value, Mapping):
        return {k: strip_private(v) for k, v in value.items() if k not in NEVER_EXPORTED}
    if isinstance(value, list | tuple):
        return [strip_private(v) for v in value]
    if isinstance(value, str):
        return _strip_json_text(value)
    return value


def _strip_json_text(text: str) -> str:
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[":
        return text
    if not any(f'"{key}"' in text for key in NEVER_EXPORTED):
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    return json.dumps(strip_private(parsed), ensure_ascii=False)


def step_messages(steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The OpenAI-format chat messages that a list of steps stands for.

    Steps are ``{"role": "assistant" | "user" | "tool" | "system", "content": ...}`` with
    ``tool_calls`` (``id``, ``name``, ``arguments``) on assistant steps and ``tool_call_id`` /
    ``name`` on tool steps; per-step accounting keys (tokens, logprobs) stay on the step.
    """
    messages: list[dict[str, Any]] = []
    for step in steps:
        role = step.get("role")
        if role not in ("assistant", "user", "tool", "system"):
            continue
        message: dict[str, Any] = {"role": role, "content": _content(step.get("content"))}
        if role == "assistant" and step.get("tool_calls"):
            message["tool_calls"] = [
                {
                    "id": call.get("id"),
                    "type": "function",
                    "function": {
                        "name": call.get("name"),
                        "arguments": _arguments(call.get("arguments")),
                    },
                }
                for call in step["tool_calls"]
            ]
        if role == "tool":
            message["tool_call_id"] = step.get("tool_call_id")
            if step.get("name") is not None:
                message["name"] = step["name"]
        messages.append(message)
    return messages


def _content(content: Any) -> Any:
    if content is None or isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def export_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row as it may leave memory: reserved keys gone at any depth, messages rebuilt.

    When ``messages`` ends with the transcript of ``steps`` (as every row the engine and
    ``wai.rows()`` write does), that tail is rebuilt from the cleaned steps; messages of any
    other shape are cleaned as they are.
    """
    cleaned: dict[str, Any] = strip_private(row)
    key = answer_key(row)
    if key:
        for field in JUDGE_FIELDS:
            if field in cleaned:
                cleaned[field] = _masked(cleaned[field], key)
    messages, steps = row.get("messages"), row.get("steps")
    if isinstance(messages, list) and isinstance(steps, list):
        tail = step_messages(steps)
        if tail and messages[-len(tail) :] == tail:
            prefix = strip_private(messages[: -len(tail)])
            cleaned["messages"] = [*prefix, *step_messages(cleaned["steps"])]
    return cleaned


#: The fields a grader writes: a verifier's reason quotes what it compared, so on export the
#: row's answer key is masked there (the in-memory row keeps it for the judge).
JUDGE_FIELDS: tuple[str, ...] = ("reason", "judge_meta", "llm_judge")

#: Lines of a multi-line reference (a test suite) shorter than this are not masked on their own.
_MIN_LINE = 8


def answer_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    """What of the row's privileged block a grader's words must not carry out of memory:
    the reference (whole, and each line of a multi-line one), the principle and the rubric;
    empty when the row holds none."""
    held = row.get("privileged")
    if not isinstance(held, Mapping):
        return ()
    values: set[str] = set()
    for name in ("reference", "principle", "rubric"):
        value = held.get(name)
        if isinstance(value, bool) or value is None:
            continue
        text = str(value).strip()
        if not text:
            continue
        values.add(text)
        if "\n" in text:
            values.update(
                line.strip() for line in text.splitlines() if len(line.strip()) >= _MIN_LINE
            )
    return tuple(sorted(values, key=len, reverse=True))


@functools.lru_cache(maxsize=1024)
def _key_pattern(values: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(v) for v in values)
    return re.compile(rf"(?<![\w.])(?:{alternatives})(?![\w])")


def _masked(value: Any, key: tuple[str, ...]) -> Any:
    """``value`` with the answer key masked as whole tokens; a string holding none of it is
    returned as it is, without building a pattern (most rows export on this path)."""
    if isinstance(value, str):
        if not any(v in value for v in key):
            return value
        return _key_pattern(key).sub("***", value)
    if isinstance(value, Mapping):
        return {k: _masked(v, key) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v, key) for v in value]
    return value


def export_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``export_row`` over a list."""
    return [export_row(row) for row in rows]
