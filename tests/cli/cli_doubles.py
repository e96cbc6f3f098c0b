"""Backends a CLI test's config names through ``plugins = ["cli_doubles:Doubles"]``: the
scripted support agent (``support``, and ``slow-support``, 50 ms a call), a pleased customer
(``customer``), and an agent whose calls fail while ``FAILING`` is set (``flaky``), as a
server that was down would."""

from __future__ import annotations

from typing import Any

from whileai import hookimpl
from whileai.backends import BackendError
from whileai.testing import PleasedUser
from whileai_worlds.testing import ScriptedSupportAgent

#: the flaky agent's server is down while this is set
FAILING = {"on": False}


class Flaky(ScriptedSupportAgent):
    async def complete(self, messages: Any, tools: Any = None, sampling: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
        if FAILING["on"] and "refund" in str(messages[1]["content"]).lower():
            raise BackendError("the agent's server answered 503", kind="http_503")
        return await super().complete(messages, tools, sampling, **kw)


class LongerReply:
    """A ranking judge that prefers the longer reply."""

    name = "longer"
    version = "longer@1"
    model = "rule:length"

    def compare(self, row_a: Any, row_b: Any) -> str:
        a, b = len(row_a["final_text"]), len(row_b["final_text"])
        return "A" if a > b else "B" if b > a else "tie"


class Doubles:
    @hookimpl
    def whileai_register_judges(self, register: Any) -> None:
        register("longer", LongerReply, description="prefers the longer reply")

    @hookimpl
    def whileai_register_backends(self, register: Any) -> None:
        register("support", lambda argument=None, **_: ScriptedSupportAgent())
        register("slow-support", lambda argument=None, **_: ScriptedSupportAgent(0.05))
        register("flaky", lambda argument=None, **_: Flaky())
        register("customer", lambda argument=None, **_: PleasedUser("customer:pleased"))
