"""Deterministic test doubles for the engine, registered through the real hooks.

``FakeBackend`` plays the agent or the user from a script; ``TinyShop`` is a one-tool world
with faults and programmatic checks. Both are fast, so the engine's own behaviour (planning,
concurrency, grading, persistence, resume) is what the tests measure.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from whileai import hookimpl
from whileai.backends import BackendError, BackendStats, Completion, Sampling, ToolCall
from whileai.registry import Registry
from whileai.scoring import Verdict
from whileai.worlds import FaultPlan, Situation, ToolResult

ORDER = re.compile(r"\bA\d{4}\b")


class FakeBackend:
    """``fake:agent`` looks the order up and reports its status, except when its seed says to
    slip (a third of rollouts), so groups split; ``fake:user`` is satisfied by an answer that
    names a status; ``fake:slow-agent`` waits ``delay`` seconds per call; ``fake:flaky-agent``
    fails for good on every fifth seed; ``fake:silent-user`` never ends the chat;
    ``fake:quitter-user`` gives up at once; ``fake:judge`` answers the rubric judge;
    ``fake:throttled-agent`` waits out one rate limit per call, counted on ``stats``."""

    def __init__(
        self, role: str = "agent", delay: float = 0.0, concurrency: int | None = None
    ) -> None:
        self.role = role
        self.name = f"fake:{role}"
        self.delay = delay if delay else (0.02 if role.startswith("slow") else 0.0)
        self.calls = 0
        #: what the engine passed as concurrency=, and how often it closed this backend
        self.concurrency = concurrency
        self.closed = 0
        self.stats = BackendStats()

    async def aclose(self) -> None:
        self.closed += 1

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        self.calls += 1
        self.stats.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        throttled = self.role == "throttled-agent"
        if throttled:
            # every call is answered 429 with Retry-After: 0.5 once, then served
            self.stats.retries += 1
            self.stats.waits += 1
            self.stats.waited_s += 0.5
            self.stats.rate_limited += 1
            self.stats.count_error("rate_limited")
        sampling = Sampling.coerce(sampling)
        seed = sampling.seed or 0
        if self.role == "flaky-agent" and seed % 5 == 0:
            raise BackendError("server kept answering 503", kind="http_503", retries=3)
        if self.role == "quitter-user":
            text, calls = "This is going nowhere. [GIVE UP]", ()
        elif self.role.endswith("user"):
            text = self._user(messages)
            calls: tuple[ToolCall, ...] = ()
        elif self.role == "judge":
            text, calls = self._judge(messages), ()
        else:
            text, calls = self._agent(messages, tools, seed)
        n_in = sum(len(str(m.get("content") or "").split()) for m in messages)
        n_out = max(1, len(text.split()))
        cap = sampling.max_tokens
        finish = "tool_calls" if calls else "stop"
        if cap is not None and n_out > cap:
            text = " ".join(text.split()[:cap])
            n_out = cap
            finish = "truncated"
        return Completion(
            text=text,
            model=f"fake-{self.role}-1",
            sampling={
                "temperature": sampling.temperature,
                "max_tokens": cap,
                "model": f"fake-{self.role}-1",
            },
            tool_calls=calls,
            finish_reason=finish,
            input_tokens=n_in,
            output_tokens=n_out,
            logprob=-0.25 * n_out if logprobs else None,
            n_tokens=n_out if logprobs else None,
            retries=1 if throttled or seed % 7 == 0 else 0,
            waited_s=0.5 if throttled else 0.0,
        )

    def _agent(
        self, messages: Sequence[Mapping[str, Any]], tools: Any, seed: int
    ) -> tuple[str, tuple[ToolCall, ...]]:
        tool_results = [m for m in messages if m.get("role") == "tool"]
        prompt = next(str(m["content"]) for m in messages if m.get("role") == "user")
        found = ORDER.search(prompt)
        if tools and not tool_results and found:
            return "", (
                ToolCall(id="call_1", name="lookup_order", arguments={"order_id": found.group(0)}),
            )
        if seed % 3 == 0:
            return "I am not sure what happened to your order.", ()
        if tool_results:
            try:
                content = json.loads(str(tool_results[-1]["content"]))
            except ValueError:
                return "The order service sent something I cannot read.", ()
            if isinstance(content, dict) and "status" in content:
                return f"Your order is {content['status']}.", ()
            return "The order service failed; please try again later.", ()
        return "Could you give me your order id?", ()

    @staticmethod
    def _judge(messages: Sequence[Mapping[str, Any]]) -> str:
        """The rubric judge's JSON verdict: a pass when the transcript names a status."""
        passed = "Your order is" in str(messages[-1].get("content") or "")
        reason = "the agent named the status" if passed else "no status named"
        return json.dumps({"reason": reason, "score": 1 if passed else 0})

    @staticmethod
    def _user(messages: Sequence[Mapping[str, Any]]) -> str:
        if "silent" in str(messages[0].get("content", "")):
            return "Hmm."
        last = str(messages[-1].get("content") or "")
        if "Your order is" in last:
            return "Great, thanks. [DONE]"
        return "That does not help, please look again."


@attrs.define
class TinyEpisode:
    situation: Situation
    rng: random.Random
    rate: float
    kinds: tuple[str, ...]
    log: list[dict[str, Any]] = attrs.Factory(list)
    fired: list[dict[str, Any]] = attrs.Factory(list)

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        step = len(self.log)
        self.log.append({"tool": name, "arguments": dict(arguments)})
        if name == "explode":
            raise RuntimeError("the order database is on fire")
        if name != "lookup_order":
            return ToolResult(None, error=f"unknown tool {name!r}")
        if self.rng.random() < self.rate:
            kind = self.kinds[self.rng.randrange(len(self.kinds))]
            self.fired.append({"step": step, "tool": name, "kind": kind})
            return ToolResult({"error": kind}, fault=kind, error=f"{kind} fault")
        if arguments.get("order_id") != self.situation.hidden_state["order_id"]:
            return ToolResult({"error": "not_found"}, error="no such order")
        return ToolResult(
            {"order_id": arguments["order_id"], "status": self.situation.hidden_state["status"]}
        )

    def state(self) -> dict[str, Any]:
        return {"lookups": len(self.log)}

    def faults(self) -> list[dict[str, Any]]:
        return list(self.fired)

    def check(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> Verdict:
        status = self.situation.hidden_state["status"]
        ok = status in final_text
        return Verdict(1.0 if ok else 0.0, f"status {status!r} {'named' if ok else 'missing'}")


@attrs.define
class TinyShop:
    name: str = "tinyshop"
    version: str = "1"
    default_fault_rate: float = 0.2
    extra_tools: tuple[str, ...] = ()

    def tools(self) -> list[dict[str, Any]]:
        names = ("lookup_order", *self.extra_tools)
        return [
            {
                "type": "function",
                "function": {
                    "name": n,
                    "description": n,
                    "parameters": {"type": "object", "properties": {}},
                },
            }
            for n in names
        ]

    def dimensions(self) -> dict[str, list[Any]]:
        return {"status": ["shipped", "delivered", "processing"], "difficulty": ["easy", "hard"]}

    def template_situation(
        self, spec: Mapping[str, Any], rng: random.Random, phrasing: int = 0
    ) -> Situation:
        order_id = f"A{rng.randint(1000, 9999)}"
        words = [
            "Where is my order {o}?",
            "Can you check order {o} for me?",
            "What is the status of {o}?",
        ][phrasing % 3]
        status = str(spec.get("status", "shipped"))
        return Situation(
            situation_id=f"tiny-{order_id}",
            prompt=words.format(o=order_id),
            persona="a hurried customer",
            patience=1 if spec.get("difficulty") == "hard" else 2,
            dimensions=dict(spec),
            hidden_state={"order_id": order_id, "status": status},
            goal={"status": status},
            reference=status,
        )

    def new_episode(
        self, situation: Situation, rng: random.Random, fault_plan: FaultPlan | None = None
    ) -> TinyEpisode:
        if "order_id" not in situation.hidden_state:
            raise KeyError("order_id: the situation carries no hidden order to build")
        plan = fault_plan or FaultPlan()
        return TinyEpisode(situation, rng, plan.effective_rate(self.default_fault_rate), plan.kinds)


class TinyStrategy:
    """Arms "a" and "b" alternately, each spec naming why it was chosen."""

    name = "alternate"

    def choose(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        n: int,
        rng: random.Random,
        arm_weights: Mapping[str, float] | None,
    ) -> list[dict[str, Any]]:
        statuses = list(dimensions["status"])
        return [
            {
                "status": statuses[i % len(statuses)],
                "arm": "ab"[i % 2],
                "selection_reason": f"arm {'ab'[i % 2]} turn {i}",
            }
            for i in range(n)
        ]


class DoublesPlugin:
    @hookimpl
    def whileai_register_backends(self, register: Any) -> None:
        register("fake", lambda role=None, **options: FakeBackend(role or "agent", **options))

    @hookimpl
    def whileai_register_worlds(self, register: Any) -> None:
        register("tinyshop", lambda **options: TinyShop(**options))
        register("boomshop", lambda **options: TinyShop(name="boomshop", extra_tools=("explode",)))

    @hookimpl
    def whileai_register_strategies(self, register: Any) -> None:
        register("alternate", TinyStrategy)

    @hookimpl
    def whileai_register_markers(self, register: Any) -> None:
        register("n_steps", lambda: lambda row: len(row["steps"]))


class SpyBackends:
    """``spy:<role>`` is a FakeBackend; every one built is kept, to look at after the run."""

    def __init__(self) -> None:
        self.built: list[FakeBackend] = []

    @hookimpl
    def whileai_register_backends(self, register: Any) -> None:
        def spy(role: str = "agent", **options: Any) -> FakeBackend:
            backend = FakeBackend(role, **options)
            self.built.append(backend)
            return backend

        register("spy", spy)


class Observer:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    @hookimpl
    def whileai_run_started(self, run_id: str, knobs: Mapping[str, Any], total: int) -> None:
        self.events.append(("started", total))

    @hookimpl
    def whileai_rollout_finished(
        self, run_id: str, row: Mapping[str, Any], done: int, total: int
    ) -> None:
        self.events.append(("rollout", done))

    @hookimpl
    def whileai_run_finished(self, run_id: str, report: Mapping[str, Any]) -> None:
        self.events.append(("finished", report["n_traces"]))


class BrokenObserver:
    @hookimpl
    def whileai_rollout_finished(
        self, run_id: str, row: Mapping[str, Any], done: int, total: int
    ) -> None:
        raise RuntimeError("dashboard is down")


def registry(*extra: object) -> Registry:
    return Registry.from_plugins(DoublesPlugin(), *extra)


#: The arguments every engine test shares: the doubles as agent, user and world.
BASE: dict[str, Any] = {
    "agent_model": "fake:agent",
    "user_model": "fake:user",
    "simulator": "template",
    "advanced": {"world": "tinyshop"},
}
