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
from whileai.testing import ScriptedBackend, call_tool, say

ORDER_ID = re.compile(r"\bA\d{4}\b")
ADDRESS = re.compile(r"\d+ [A-Z][a-z]+ (?:Street|Road|Lane|Avenue|Row), [A-Z][a-z]+")

#: What the scripted agent's answers say they came from.
MODEL = "scripted-support-1"

#: Tool errors the agent retries, as a careful agent would.
RETRIED = ("timeout", "internal_error", "rate_limited")


class ScriptedSupportAgent:
    """Looks the order in the customer's message up, then refunds it, tells its tracking
    number or changes its address; retries a call that failed loudly or came back garbled and
    tells the customer why the shop refused one. With ``delay`` it waits that many seconds
    before each answer (``support:slow``)."""

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
        try:
            result = json.loads(last["content"]) if str(last["content"]).startswith("{") else {}
        except ValueError:
            # a garbled answer (the malformed fault) is read as one that failed loudly
            result = {"error": "timeout"}
        if result.get("error") in RETRIED:
            previous = next(m for m in reversed(messages) if m.get("tool_calls"))
            call = previous["tool_calls"][0]["function"]
            return call_tool(call["name"], json.loads(call["arguments"]), MODEL)
        if result.get("error"):
            return say(f"Sorry, I can't: {result['error']}.", MODEL)
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


# -- the bank ------------------------------------------------------------------------------

PHONE = re.compile(r"\+44 7\d{3} \d{6}")
ANSWER = re.compile(r"(?:first pet was|security answer(?: is)?)\s+([A-Z][a-z]+)")
AMOUNT = re.compile(r"\d{1,3}(?:,\d{3})*\.\d{2}")
LAST4 = re.compile(r"ending (?:in )?(\d{4})")
#: What the bank agent's answers say they came from.
BANK_MODEL = "scripted-teller-1"


def _said_by_customer(messages: Sequence[Mapping[str, Any]]) -> str:
    return " ".join(str(m["content"]) for m in messages if m["role"] == "user")


def _results(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The last readable, error-free answer of each tool so far."""
    out: dict[str, Any] = {}
    for message in messages:
        if message["role"] != "tool":
            continue
        try:
            content = json.loads(message["content"])
        except ValueError:
            continue
        if isinstance(content, dict) and "error" not in content:
            out[str(message.get("name"))] = content
    return out


class ScriptedBankAgent(ScriptedBackend):
    """A teller that keeps the bank's policy: asks for the phone number and security answer
    when the customer has not given them, finds and verifies the customer before anything
    else, checks the daily limit before a transfer, and retries a call whose answer was an
    error or unreadable."""

    def __init__(self) -> None:
        super().__init__("teller:scripted", self._next)

    @staticmethod
    def _next(messages: Sequence[Mapping[str, Any]], tools: Any) -> Any:
        said = _said_by_customer(messages)
        phone, answer = PHONE.search(said), ANSWER.search(said)
        if phone is None or answer is None:
            return say("Could you give me your phone number and your security answer?", BANK_MODEL)
        last = messages[-1]
        if last["role"] == "tool" and last.get("name") not in _results(messages[-1:]):
            previous = next(m for m in reversed(messages) if m.get("tool_calls"))
            call = previous["tool_calls"][0]["function"]
            return call_tool(call["name"], json.loads(call["arguments"]), BANK_MODEL)
        done = _results(messages)
        if "find_customer" not in done:
            return call_tool("find_customer", {"phone": phone.group()}, BANK_MODEL)
        customer = done["find_customer"].get("customer_id")
        if "verify_identity" not in done:
            args = {"customer_id": customer, "security_answer": answer.group(1)}
            return call_tool("verify_identity", args, BANK_MODEL)
        request = next(str(m["content"]) for m in messages if m["role"] == "user")
        if "card" in request:
            return ScriptedBankAgent._freeze(request, done, customer)
        if "nickname" not in str(done.get("list_accounts", {})) and "list_accounts" not in done:
            if "transfer" in request or "move" in request:
                if "get_limits" not in done:
                    return call_tool("get_limits", {"customer_id": customer}, BANK_MODEL)
                amount = float(AMOUNT.findall(request)[0].replace(",", ""))
                left = done["get_limits"].get("left_today", 0.0)
                if amount > left:
                    return say(
                        f"I can't move {amount:,.2f}: it passes your daily limit "
                        f"({left:,.2f} left today).",
                        BANK_MODEL,
                    )
            return call_tool("list_accounts", {"customer_id": customer}, BANK_MODEL)
        accounts = done["list_accounts"].get("accounts", [])
        savings = next((a for a in accounts if a.get("nickname", "") in request), None)
        checking = next((a for a in accounts if a.get("type") == "checking"), None)
        if savings is None or checking is None:
            return say("I could not find that account.", BANK_MODEL)
        if "transfer" not in request and "move" not in request:
            return say(
                f"Your {savings['nickname']} savings holds {savings['balance']:,.2f}.", BANK_MODEL
            )
        if "transfer" in done:
            return say(f"Done: moved {done['transfer']['amount']:,.2f}.", BANK_MODEL)
        amount = float(AMOUNT.findall(request)[0].replace(",", ""))
        args = {
            "from_account": checking["account_id"],
            "to_account": savings["account_id"],
            "amount": amount,
        }
        return call_tool("transfer", args, BANK_MODEL)

    @staticmethod
    def _freeze(request: str, done: Mapping[str, Any], customer: str) -> Any:
        if "list_cards" not in done:
            return call_tool("list_cards", {"customer_id": customer}, BANK_MODEL)
        if "freeze_card" in done:
            return say(f"Card {done['freeze_card']['card_id']} is frozen.", BANK_MODEL)
        last4 = LAST4.search(request)
        card = next(
            (
                c
                for c in done["list_cards"].get("cards", [])
                if last4 and c.get("last4") == last4.group(1)
            ),
            None,
        )
        if card is None:
            return say("I could not find that card.", BANK_MODEL)
        return call_tool("freeze_card", {"card_id": card["card_id"]}, BANK_MODEL)


class ForthcomingCustomer(ScriptedBackend):
    """A simulated customer who gives what they know when the agent asks for it, and is
    satisfied by anything else."""

    def __init__(self) -> None:
        super().__init__("customer:forthcoming", self._reply)

    @staticmethod
    def _reply(messages: Sequence[Mapping[str, Any]], tools: Any) -> str:
        system = str(messages[0]["content"])
        known = json.loads(system.split("(give it when asked): ", 1)[1].split("\n", 1)[0])
        asked = str(messages[-1]["content"]).lower()
        if "phone" in asked or "security" in asked:
            return f"My phone is {known['phone']} and my first pet was {known['security_answer']}."
        return "Thanks! [DONE]"
