"""Test doubles for whileai and its plugins: model backends that answer from a script instead
of a model, for tests that need speed rather than a model.

They are ordinary backends, registered through the same hook as a real plugin's, so a test
that uses them drives the engine exactly as a user's run does::

    from whileai.testing import BackendsPlugin, PleasedUser, ScriptedBackend, say

    agent = ScriptedBackend("agent:polite", lambda messages, tools: say("Happy to help."))
    registry = wai.Registry.from_plugins(
        BackendsPlugin(agent=lambda argument=None, **_: agent, user=lambda **_: PleasedUser())
    )
    data = wai.simulate(agent_model="agent", user_model="user", registry=registry)
    agent.calls[0]  # the messages of the agent's first call, as the engine sent them

Doubles that know a world's tools (a support agent that looks orders up in the shop) live with
that world's plugin, as ``whileai_worlds.testing`` does.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from whileai.backends import Completion, Sampling, ToolCall
from whileai.hookspecs import Register, hookimpl

#: What a script returns: a reply's text, or a whole Completion (tool calls, token counts).
Reply = str | Completion
Script = Callable[
    [Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]] | None], Reply | Awaitable[Reply]
]


def say(text: str, model: str = "double-1") -> Completion:
    """A plain answer."""
    return Completion(text, model, {"model": model})


def call_tool(
    name: str, arguments: Mapping[str, Any], model: str = "double-1", call_id: str | None = None
) -> Completion:
    """An answer that calls one tool."""
    call = ToolCall(id=call_id or f"call-{name}", name=name, arguments=dict(arguments))
    return Completion("", model, {"model": model}, (call,), "tool_calls")


class ScriptedBackend:
    """A backend whose every answer is ``script(messages, tools)`` (sync or async, text or a
    Completion). It keeps what it was sent, so a test can read what the engine asked; with
    ``record=False`` it keeps nothing, for long runs (a benchmark, a pipeline's smoke run of
    100,000 rollouts), where a copy of every call's messages would grow without bound."""

    def __init__(self, name: str, script: Script, *, record: bool = True) -> None:
        self.name = name
        self.script = script
        self.record = record
        #: the messages of every call, in order, as sent
        self.calls: list[list[dict[str, Any]]] = []
        #: the tools offered on every call (None when none were)
        self.tools: list[list[dict[str, Any]] | None] = []
        #: the sampling every call asked for
        self.sampling: list[Sampling] = []
        self.closed = 0

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        if self.record:
            self.calls.append([dict(m) for m in messages])
            self.tools.append([dict(t) for t in tools] if tools is not None else None)
            self.sampling.append(Sampling.coerce(sampling))
        reply = self.script(messages, tools)
        if inspect.isawaitable(reply):
            reply = await reply
        return say(reply, self.name) if isinstance(reply, str) else reply

    async def aclose(self) -> None:
        self.closed += 1


class PleasedUser(ScriptedBackend):
    """A simulated user satisfied by whatever the agent said first."""

    def __init__(self, name: str = "user:pleased", *, record: bool = True) -> None:
        super().__init__(name, lambda messages, tools: "Thanks! [DONE]", record=record)


class BackendsPlugin:
    """A plugin registering backend factories by name, as a backend plugin would:
    ``BackendsPlugin(agent=factory)`` makes ``agent_model="agent"`` (and ``"agent:x"``,
    the factory then getting ``"x"`` first) resolve to what ``factory`` builds."""

    def __init__(self, **factories: Callable[..., Any]) -> None:
        self.factories = factories

    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        for name, factory in self.factories.items():
            register(name, factory, description="test double")
