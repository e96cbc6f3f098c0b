"""Test doubles that know the shop: a support agent that does the job right, for tests of the
shop world inside real runs (here, and in other plugins' tests, such as the Ray executor's).

Generic doubles (a pleased user, a plugin registering backends) are in ``whileai.testing``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.backends import Completion, Sampling
from whileai.testing import call_tool, say

ORDER_ID = re.compile(r"\bA\d{4}\b")
ADDRESS = re.compile(r"\d+ [A-Z][a-z]+ (?:Street|Road|Lane|Avenue|Row), [A-Z][a-z]+")

#: What the scripted agent's answers say they came from.
MODEL = "scripted-support-1"

#: Tool errors the agent retries, as a careful agent would.
RETRIED = ("timeout", "internal_error", "rate_limited")


class ScriptedSupportAgent:
    """Looks the order in the customer's message up, then refunds it, tells its tracking
    number or changes its address; retries a call that failed loudly. With ``delay`` it
    waits that many seconds before each answer (``support:slow``)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.name = "support:slow" if delay else "support:scripted"
        self.delay = delay

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        if self.delay:
            await asyncio.sleep(self.delay)
        request = next(str(m["content"]) for m in messages if m["role"] == "user")
        order_id = ORDER_ID.search(request)
        if order_id is None:
            return say("Which order is it?", MODEL)
        last = messages[-1]
        if last["role"] == "user":
            return call_tool("get_order", {"order_id": order_id.group()}, MODEL)
        if last["role"] != "tool":
            return say("Anything else?", MODEL)
        result = json.loads(last["content"]) if str(last["content"]).startswith("{") else {}
        if result.get("error") in RETRIED:
            previous = next(m for m in reversed(messages) if m.get("tool_calls"))
            call = previous["tool_calls"][0]["function"]
            return call_tool(call["name"], json.loads(call["arguments"]), MODEL)
        if last.get("name") != "get_order":
            return say("All done.", MODEL)
        if "refund" in request.lower():
            return call_tool(
                "refund_order", {"order_id": order_id.group(), "reason": "broken"}, MODEL
            )
        address = ADDRESS.search(request)
        if address is not None:
            return call_tool(
                "update_address", {"order_id": order_id.group(), "address": address.group()}, MODEL
            )
        return say(f"Order {order_id.group()} has tracking number {result.get('tracking')}.", MODEL)
