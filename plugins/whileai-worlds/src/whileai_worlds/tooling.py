"""What the built-in worlds share: tool schemas, seeded draws, argument checks, and one tool
call answered with the episode's fault plan applied."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from whileai.faults import BLOCKING_KINDS, blocked_result, degrade, draw_fault
from whileai.worlds import FaultPlan, ToolResult

#: A tool's work: ``handler(arguments, action)`` returns the answer and notes on ``action``
#: what it did (the ground truth a check reads).
Handler = Callable[[Mapping[str, Any], dict[str, Any]], Any]


class Refused(Exception):
    """A call the world refuses (an unknown id, a rule it enforces), answered as an error."""


def rate_in_unit_interval(instance: Any, attribute: Any, value: float) -> None:
    """An attrs validator: a world's ``default_fault_rate`` lies in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"{attribute.name} must lie in [0, 1], got {value!r}")


def function_tool(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-format tool whose every property is required and nothing else allowed."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


def seed_of(situation_id: str) -> int:
    """A seed from a situation's id, so every rollout of a situation sees the same records."""
    return int(hashlib.sha256(situation_id.encode("utf-8")).hexdigest()[:12], 16)


def choose(
    world: str, spec: Mapping[str, Any], key: str, values: Sequence[str], rng: random.Random
) -> str:
    """``spec[key]`` when given (and one of ``values``), else a draw from ``rng``."""
    value = spec.get(key)
    if value is None:
        return rng.choice(list(values))
    if value not in values:
        raise ValueError(
            f"{world} world: dimension {key!r} has no value {value!r}; values are {list(values)}"
        )
    return str(value)


def required_text(arguments: Mapping[str, Any], key: str) -> str:
    value = arguments.get(key)
    if not isinstance(value, str) or not value.strip():
        raise Refused(f"argument {key!r} is required and must be a non-empty string")
    return value.strip()


def answer_call(
    name: str,
    arguments: Mapping[str, Any],
    index: int,
    *,
    handlers: Mapping[str, Handler],
    stale: Callable[[Any], Any],
    rng: random.Random,
    plan: FaultPlan,
    rate: float,
    service: str,
    keep: frozenset[str],
    actions: list[dict[str, Any]],
    faults: list[dict[str, Any]],
) -> ToolResult:
    """One call: the fault drawn first (a loud one stops the call, a silent one spoils the
    answer of a call that ran; ``stale(fresh)`` gives the lagging answer), the action logged on ``actions`` with whether it reached the
    world (``ok``), and a refusal answered as an error result, never raised."""
    kind = draw_fault(plan, rate, rng) if rate > 0 else None
    action: dict[str, Any] = {"step": index, "tool": name, "arguments": dict(arguments)}
    actions.append(action)
    if kind is not None:
        faults.append({"step": index, "tool": name, "kind": kind})
        action["fault"] = kind
    if kind in BLOCKING_KINDS:
        action["ok"] = False
        return blocked_result(str(kind), name, rng, service)
    handler = handlers.get(name)
    try:
        if handler is None:
            raise Refused(f"unknown tool {name!r}; tools are {sorted(handlers)}")
        content = handler(arguments, action)
    except Refused as exc:
        action["ok"] = False
        error = {"error": str(exc)}
        if kind is None:
            return ToolResult(content=error, error=str(exc))
        spoiled = degrade(kind, error, lambda: error, keep)
        return ToolResult(content=spoiled.content, fault=kind, error=str(exc))
    action["ok"] = True
    if kind is None:
        return ToolResult(content=content)
    return degrade(kind, content, lambda: stale(content), keep)
