"""Fault injection for any world: whether a tool call fails, and what the agent sees when it does.

Every world that injects faults draws and shapes them here, so a fault kind looks the same to
the agent whichever world it meets (the shop, the bank, an MCP server behind the MCP world).

Each call draws once from the episode's rng: with probability ``rate`` a fault fires, and its
kind is drawn uniformly from the plan's kinds. What each kind looks like to the agent:

- ``timeout``: ``{"error": "timeout", ...}``; the call had no effect.
- ``error``: an HTTP-500-style ``{"error": "internal_error", "status": 500}``; no effect.
- ``rate_limit``: ``{"error": "rate_limited", "status": 429, "retry_after_s": ...}``; no effect.
- ``stale``: the call ran, but the answer shows the record as it was when the episode began,
  one status step behind (a read replica that lags). Silent: nothing says it is stale.
- ``partial``: the call ran, but the answer lost fields (and, for lists, its second half).
  Silent as well.
- ``malformed``: the call ran, but the answer is JSON text cut in the middle.

The first three fail loudly (``ToolResult.error`` set) and change nothing, so retrying is
safe; the last three succeed with a wrong or unreadable answer, which is what tests whether an
agent double-checks before acting.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from whileai.schema.wording import named_with_close
from whileai.worlds import FAULT_KINDS, FaultPlan, ToolResult

#: Kinds that stop the call before it does anything.
BLOCKING_KINDS: frozenset[str] = frozenset({"timeout", "error", "rate_limit"})


def draw_fault(plan: FaultPlan, rate: float, rng: random.Random) -> str | None:
    """The kind of fault that fires on one call, or None. Always consumes exactly one draw
    for the decision (and one more when a fault fires), so fault-free runs stay aligned."""
    if rng.random() >= rate:
        return None
    return plan.kinds[rng.randrange(len(plan.kinds))]


def blocked_result(
    kind: str, tool: str, rng: random.Random, service: str = "the service"
) -> ToolResult:
    """What a loud fault returns in place of the tool's answer; ``service`` names what did not
    answer, as the agent would read it in a timeout."""
    if kind == "timeout":
        content: dict[str, Any] = {
            "error": "timeout",
            "message": f"{tool}: {service} did not answer within 10 s",
        }
    elif kind == "error":
        content = {"error": "internal_error", "status": 500, "message": f"{tool}: server error"}
    elif kind == "rate_limit":
        content = {
            "error": "rate_limited",
            "status": 429,
            "retry_after_s": rng.choice((1, 2, 5)),
            "message": f"{tool}: too many requests",
        }
    else:
        raise ValueError(f"fault kind {kind!r} does not block a call")
    return ToolResult(content=content, fault=kind, error=f"{kind}: {content['message']}")


def partial_content(content: Any, keep: frozenset[str] = frozenset()) -> Any:
    """Drop the second half of every list and every other plain field of every record; the
    fields named in ``keep`` (a world's ids) survive, so the answer still looks whole."""
    if isinstance(content, dict):
        kept = [
            k
            for i, k in enumerate(content)
            if i % 2 == 0 or k in keep or isinstance(content[k], dict | list)
        ]
        return {k: partial_content(content[k], keep) for k in kept}
    if isinstance(content, list):
        return [partial_content(v, keep) for v in content[: max(1, len(content) // 2)]]
    return content


def malformed_content(content: Any) -> str:
    """The answer's JSON text cut in the middle, so it does not parse."""
    text = json.dumps(content, sort_keys=True)
    return text[: max(1, len(text) // 2)]


def degrade(
    kind: str, fresh: Any, stale: Callable[[], Any], keep: frozenset[str] = frozenset()
) -> ToolResult:
    """A silent fault applied to a call that ran: ``fresh`` is the true answer, ``stale``
    builds the lagging one, ``keep`` names the fields a partial answer keeps."""
    if kind == "stale":
        return ToolResult(content=stale(), fault=kind)
    if kind == "partial":
        return ToolResult(content=partial_content(fresh, keep), fault=kind)
    if kind == "malformed":
        return ToolResult(content=malformed_content(fresh), fault=kind)
    raise ValueError(f"fault kind {kind!r} is not a silent fault")


def coerce_fault_plan(
    value: FaultPlan | Mapping[str, Any] | str | Sequence[str] | None,
) -> FaultPlan | None:
    """A fault plan from what a user may write: a FaultPlan, ``{"kinds": [...], "rate": r}``,
    a comma-separated string of kinds (``"timeout,rate_limit"``), ``"all"``, or a list of kinds."""
    if value is None or isinstance(value, FaultPlan):
        return value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"kinds", "rate"})
        if unknown:
            raise ValueError(
                f"fault_plan has unknown keys {named_with_close(unknown, ('kinds', 'rate'))}; "
                "keys are kinds, rate"
            )
        kinds = value.get("kinds", FAULT_KINDS)
        kinds = kinds.split(",") if isinstance(kinds, str) else kinds
        return FaultPlan(tuple(k.strip() for k in kinds), value.get("rate"))
    if isinstance(value, str):
        if value.strip() in ("", "all"):
            return FaultPlan()
        return FaultPlan(tuple(k.strip() for k in value.split(",") if k.strip()))
    return FaultPlan(tuple(value))
