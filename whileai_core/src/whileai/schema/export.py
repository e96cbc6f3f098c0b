"""The one function every export path calls: drop what must never leave memory.

Two rules, one for each kind of field (docs/rows.md, "What never leaves memory"):

- **By provenance.** ``privileged`` is the block the writer and the run mark as the answer key
  (its fields ``principle``, ``hidden_state``, ``reference``, ``rubric``), and ``vector`` the raw
  embedding the diversity search keeps for the length of a run. Outside the episode these six
  names are removed at any depth, in every encoding :mod:`whileai.schema.reserved` reads (JSON
  text, JSON inside JSON, ``\\u`` escapes, Python reprs, case and spacing variants, truncated
  text). Inside the episode (``prompt``, ``steps``, ``messages``, ``final_text``) only a
  ``privileged`` block is removed: a tool argument or result field called ``reference`` or
  ``rubric`` there is the agent's own data (a payment reference), not the run's answer key.
- **By value.** Everything the run wrote about the episode (a grader's ``reason`` and
  ``judge_meta``, ``llm_judge``, the world's ``world_state``, an ``error``, carried fields) has
  every value of the row's answer key masked, whatever the encoding
  (:mod:`whileai.schema.answer_key`); the fields that name and count a row (ids, models,
  sampling, usage, rewards, markers) carry none of it and are left as they are, and so is what
  the agent saw and said.

``messages`` is then rebuilt from the cleaned steps, so nothing removed from a tool result can
survive in the chat transcript either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.schema.answer_key import AnswerKey, answer_key
from whileai.schema.jsonline import STDLIB, dumps_exact, line_of, line_of_loaded
from whileai.schema.reserved import Stripper

PRIVILEGED_KEYS: frozenset[str] = frozenset(
    {"privileged", "principle", "hidden_state", "reference", "rubric"}
)
MEMORY_ONLY_KEYS: frozenset[str] = frozenset({"vector"})
NEVER_EXPORTED: frozenset[str] = PRIVILEGED_KEYS | MEMORY_ONLY_KEYS

#: What the agent saw and said: only the ``privileged`` block is removed from it.
EPISODE_FIELDS: frozenset[str] = frozenset({"prompt", "steps", "messages", "final_text"})

#: Fields that name, count and score a row: the run writes them from ids, model names and
#: numbers, never from the answer key, and readers join and group on them, so they are not
#: searched for its values.
ACCOUNTING_FIELDS: frozenset[str] = frozenset(
    {
        "schema_version", "task_id", "scenario_id", "scenario_dimensions", "seed", "arm",
        "selection_reason", "behavior_signature", "writer_model", "user_model",
        "model_version", "policy_version", "sampling", "lineage", "run_id", "usage", "reward",
        "llm_reward", "gold_reward", "quality", "label_source", "judge_name", "judge_status",
        "stop_reason", "world", "markers", "faults", "logprobs", "logprob", "ref_logprob",
        "n_tokens", "calibration", "truncated", "group_id",
    }
)  # fmt: skip

_OUTSIDE = Stripper(NEVER_EXPORTED)
_INSIDE = Stripper({"privileged"})


def strip_private(value: Any) -> Any:
    """A copy of ``value`` with every reserved key removed at any depth, in every encoding
    :class:`~whileai.schema.reserved.Stripper` reads (``value`` itself when it held none)."""
    return _OUTSIDE.value(value)


def strip_episode(value: Any) -> Any:
    """``value`` as the export cleans a field of the episode (``prompt``, ``steps``,
    ``messages``, ``final_text``): only a ``privileged`` block removed, at any depth."""
    return _INSIDE.value(value)


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


#: json.dumps(..., ensure_ascii=False, sort_keys=True, default=str), built once (dumps with
#: options builds an encoder per call, and a transcript is rebuilt for every row)
_SORTED = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)


def _content(content: Any) -> Any:
    if content is None or isinstance(content, str):
        return content
    return _SORTED.encode(content)


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return STDLIB.encode(arguments if arguments is not None else {})


def export_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row as it may leave memory (the module's two rules), messages rebuilt; a copy (no
    dict or list in it is one of ``row``'s).

    When ``messages`` ends with the transcript of ``steps`` (as every row the engine and
    ``wai.rows()`` write does) and cleaning changed the steps, that tail is rebuilt from the
    cleaned steps; messages of any other shape are cleaned as they are.
    """
    key = answer_key(row)
    cleaned: dict[str, Any] = {}
    # the fields masked by value are masked together, as one mapping: one search of one text,
    # and two names masked alike stay two fields (one per field, the later overwrote the
    # earlier)
    by_value: dict[str, Any] = {}
    for name, value in row.items():
        if _OUTSIDE.reserved(name):
            continue
        if name in EPISODE_FIELDS:
            cleaned[name] = _INSIDE.value(value)
        elif name in ACCOUNTING_FIELDS:
            cleaned[name] = _OUTSIDE.value(value)
        else:
            by_value[name] = value
            cleaned[name] = _BY_VALUE
    if by_value:
        masked = _masked_fields(by_value, key)
        cleaned = _in_row_order(cleaned, masked)
    messages, steps = row.get("messages"), row.get("steps")
    if (
        isinstance(messages, list)
        and isinstance(steps, list)
        # steps that cleaning left as they were have a transcript that needs nothing more
        and cleaned.get("steps") != steps
    ):
        tail = step_messages(steps)
        if tail and messages[-len(tail) :] == tail:
            prefix = _INSIDE.value(messages[: -len(tail)])
            cleaned["messages"] = [*prefix, *step_messages(cleaned["steps"])]
    return cleaned


def export_line(row: Mapping[str, Any]) -> tuple[dict[str, Any], bytes]:
    """``export_row(row)`` and the JSONL line a run writes for it (UTF-8, newline ended).

    A row whose JSON text holds no reserved name in any spelling or escape (the test of
    :meth:`~whileai.schema.reserved.Stripper.holds_none`) has nothing for either stripper
    to remove, and steps left as they were keep their messages: its export is the row
    without its top-level reserved fields, masked by value, and one encoding gives both the
    line and (read back) the copy. Any other row takes :func:`export_row`'s walk.
    """
    body = _OUTSIDE.unreserved(row)
    exact = dumps_exact(body)
    if exact is None or not _OUTSIDE.holds_none_encoded(exact[0]):
        exported = export_row(row)
        return exported, line_of(exported)
    text, copy = exact
    key = answer_key(row)
    if key:
        by_value = {
            name: value
            for name, value in copy.items()
            if name not in EPISODE_FIELDS and name not in ACCOUNTING_FIELDS
        }
        if by_value:
            masked = key.mask_strings(by_value)
            if masked is not by_value:
                placed = {n: _BY_VALUE if n in by_value else v for n, v in copy.items()}
                # made of the copy's values and masked strings: orjson writes it exactly
                exported = _in_row_order(placed, dict(masked))
                return exported, line_of_loaded(exported)
    return copy, text + b"\n"


#: Where a field masked by value stands in the row until its masked name and value are known.
_BY_VALUE = object()


def _masked_fields(fields: dict[str, Any], key: AnswerKey) -> dict[Any, Any]:
    """``fields`` (name to value) stripped of reserved keys and masked by ``key``, names too,
    in their order; two names masked alike stay two entries."""
    if not key:
        return dict(_OUTSIDE.value(fields))
    try:
        written = json.dumps(fields, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        written = None
    if written is not None and _OUTSIDE.holds_none(written):
        # nothing to strip: the masking reads the text as it is, and what it reads back is
        # the copy (the walk would only have copied it first)
        masked = key.mask(fields, written=written)
        if masked is not fields:
            return dict(masked)
        copy = json.loads(written)
        # (not equal when JSON changed it: a tuple, a key that is not a string, NaN)
        if copy == fields:
            return dict(copy)
    return dict(key.mask(_OUTSIDE.value(fields)))


def _in_row_order(cleaned: dict[str, Any], masked: dict[Any, Any]) -> dict[str, Any]:
    """``cleaned`` with each field masked by value put back where it stood (the strip drops
    no field here and the masking keeps names apart, so ``masked`` holds one per field)."""
    pending = iter(masked.items())
    out: dict[str, Any] = {}
    for name, value in cleaned.items():
        if value is _BY_VALUE:
            shown, out_value = next(pending)
            out[shown] = out_value
        else:
            out[name] = value
    return out


def export_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``export_row`` over a list."""
    return [export_row(row) for row in rows]
