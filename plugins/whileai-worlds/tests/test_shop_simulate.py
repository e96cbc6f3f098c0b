"""The shop world inside a real ``wai.simulate`` run, with a scripted support agent that does
the job right: rows carry the shop's final state, the faults that fired, and the shop's own
grade."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import whileai as wai
from whileai import hookimpl
from whileai.backends import Completion, Sampling, ToolCall
from whileai.hookspecs import Register
from whileai.registry import Registry

ORDER_ID = re.compile(r"\bA\d{4}\b")
ADDRESS = re.compile(r"\d+ [A-Z][a-z]+ (?:Street|Road|Lane|Avenue|Row), [A-Z][a-z]+")


class ScriptedSupportAgent:
    """Looks the order in the customer's message up, then refunds it, tells its tracking
    number, or changes its address; retries a call that failed loudly."""

    name = "support:scripted"

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        request = next(str(m["content"]) for m in messages if m["role"] == "user")
        order_id = ORDER_ID.search(request)
        assert order_id is not None, request
        last = messages[-1]
        if last["role"] == "user":
            return self._call("get_order", {"order_id": order_id.group()})
        if last["role"] == "tool":
            result = json.loads(last["content"]) if last["content"].startswith("{") else {}
            called = last.get("name")
            if "error" in result and result["error"] in (
                "timeout",
                "internal_error",
                "rate_limited",
            ):
                previous = next(m for m in reversed(messages) if m.get("tool_calls"))
                call = previous["tool_calls"][0]["function"]
                return self._call(call["name"], json.loads(call["arguments"]))
            if called == "get_order":
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


class DoublesPlugin:
    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        register("support", lambda argument=None, **_: ScriptedSupportAgent())
        register("customer", lambda argument=None, **_: PleasedCustomer())


def run(**params: Any) -> Any:
    return wai.simulate(
        registry=Registry.load(plugins=[DoublesPlugin()]),
        agent_model="support:scripted",
        user_model="customer:pleased",
        simulator="template",
        dimensions={
            "intent": ["refund", "track", "address_change"],
            "difficulty": ["easy"],
            "tone": ["polite", "angry"],
        },
        hard_share=0.0,
        strategy="grid",
        **params,
    )


def test_a_correct_agent_passes_every_shop_situation() -> None:
    data = run(unique=6, repeats=2, fault_rate=0.0, seed=3)
    rows = data.rows()
    assert len(rows) == 12
    assert {r["scenario_dimensions"]["intent"] for r in rows} == {
        "refund",
        "track",
        "address_change",
    }
    for row in rows:
        assert row["reward"] == 1.0, row["reason"]
        assert row["label_source"] == "world"
        assert row["world_state"]["changes"] or row["scenario_dimensions"]["intent"] == "track"
        assert row["faults"] == []
        assert row["markers"]["tool_errors"] == 0
        assert "privileged" not in row


def test_faults_land_on_the_rows_and_the_agent_recovers_from_loud_ones() -> None:
    data = run(
        unique=6,
        repeats=4,
        seed=4,
        fault_rate=0.3,
        advanced={"fault_kinds": ["timeout", "rate_limit"]},
    )
    rows = data.rows()
    faulted = [r for r in rows if r["faults"]]
    assert faulted, "at a 0.3 rate some of 24 rollouts meet a fault"
    for row in faulted:
        assert {f["kind"] for f in row["faults"]} <= {"timeout", "rate_limit"}
        assert row["markers"]["tool_errors"] == len(row["faults"])
    recovered = [r for r in faulted if r["reward"] == 1.0]
    assert recovered, [r["reason"] for r in faulted]
