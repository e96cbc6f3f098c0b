"""Deterministic backends for the Ray tests, registered through the real hooks.

Ray workers import this module by name (the test cluster puts this folder on their
``PYTHONPATH``), as they would a third-party plugin package."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import ray

from whileai import hookimpl
from whileai.backends import Completion, Sampling, ToolCall
from whileai.hookspecs import Register
from whileai_ray.executor import actor_name

ORDER_ID = re.compile(r"\bA\d{4}\b")
ADDRESS = re.compile(r"\d+ [A-Z][a-z]+ (?:Street|Road|Lane|Avenue|Row), [A-Z][a-z]+")


class ScriptedSupportAgent:
    """Looks the order up, then refunds it, tells its tracking number or changes its address;
    retries a call that failed loudly. ``support:slow`` waits a little before each answer."""

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
            return self._say("Which order is it?")
        last = messages[-1]
        if last["role"] == "user":
            return self._call("get_order", {"order_id": order_id.group()})
        if last["role"] == "tool":
            result = json.loads(last["content"]) if last["content"].startswith("{") else {}
            if result.get("error") in ("timeout", "internal_error", "rate_limited"):
                previous = next(m for m in reversed(messages) if m.get("tool_calls"))
                call = previous["tool_calls"][0]["function"]
                return self._call(call["name"], json.loads(call["arguments"]))
            if last.get("name") == "get_order":
                if "refund" in request.lower():
                    return self._call(
                        "refund_order", {"order_id": order_id.group(), "reason": "broken"}
                    )
                address = ADDRESS.search(request)
                if address is not None:
                    return self._call(
                        "update_address", {"order_id": order_id.group(), "address": address.group()}
                    )
                return self._say(
                    f"Order {order_id.group()} has tracking number {result.get('tracking')}."
                )
            return self._say("All done.")
        return self._say("Anything else?")

    def _call(self, name: str, arguments: Mapping[str, Any]) -> Completion:
        call = ToolCall(id=f"call-{name}", name=name, arguments=dict(arguments))
        return Completion(
            "", "scripted-support-1", {"model": "scripted-support-1"}, (call,), "tool_calls"
        )

    def _say(self, text: str) -> Completion:
        return Completion(text, "scripted-support-1", {"model": "scripted-support-1"})


class PleasedCustomer:
    name = "customer:pleased"

    async def complete(
        self, messages: Any, tools: Any = None, sampling: Any = None, **_: Any
    ) -> Completion:
        return Completion("Thanks! [DONE]", "pleased-1", {"model": "pleased-1"})


class RayDoubles:
    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        register(
            "support",
            lambda argument=None, **_: ScriptedSupportAgent(0.3 if argument == "slow" else 0.0),
        )
        register("customer", lambda argument=None, **_: PleasedCustomer())


class KillFirstActor:
    """Kills the run's first actor when the first row comes back: the jobs it held must
    come back as error rows."""

    def __init__(self) -> None:
        self.killed: list[str] = []

    @hookimpl
    def whileai_rollout_finished(
        self, run_id: str, row: Mapping[str, Any], done: int, total: int
    ) -> None:
        if not self.killed:
            name = actor_name(run_id, 0)
            ray.kill(ray.get_actor(name))
            self.killed.append(name)
