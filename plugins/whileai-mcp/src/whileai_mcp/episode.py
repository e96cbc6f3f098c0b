"""One rollout against an MCP server: its own server process (or a reset shared one), the
run's faults injected between the agent and the server, the server's state and checks read
when the conversation is over."""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from typing import IO, Any

import attrs
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from whileai.faults import BLOCKING_KINDS, blocked_result, degrade, draw_fault
from whileai.scoring import Verdict
from whileai.worlds import FaultPlan, Situation, ToolResult
from whileai_mcp.convert import result_content, result_text, tool_schema
from whileai_mcp.seeds import PythonCheck, ToolCheck, checks_of, contains, python_verdict
from whileai_mcp.target import Target

#: How much of a dead server's stderr an error quotes.
STDERR_TAIL_CHARS = 600


class McpServerGone(RuntimeError):
    """The server stopped answering: its process exited or its connection closed."""


class ServerSlots:
    """Lets at most ``limit`` episodes at a time hold a server: one for a server every
    episode shares (a URL target), whose reset tool gives each a clean store only if no
    other episode is writing to it meanwhile; ``max_servers`` for started processes, so a run
    with many rollouts in flight does not start as many server processes at once. Counted
    per event loop (one run's rollouts share one; each process of a distributed run has its
    own)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._slots: dict[int, asyncio.Semaphore] = {}

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        await self._slots.setdefault(id(loop), asyncio.Semaphore(self.limit)).acquire()

    def release(self) -> None:
        slots = self._slots.get(id(asyncio.get_running_loop()))
        if slots is not None:
            slots.release()


@attrs.frozen
class Settings:
    """What every episode of one MCP world shares."""

    target: Target
    #: tools the agent is not offered (the state and reset tools, a user's check-only tools)
    hidden_tools: frozenset[str]
    state_tool: str | None
    reset_tool: str | None
    call_timeout_s: float
    #: how many episodes may hold a server at once: one for a server they share (a URL),
    #: ``max_servers`` for started ones; None: one server per rollout in flight
    slots: ServerSlots | None = attrs.field(default=None, eq=False)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside an anyio task group's exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _id_fields(content: Any) -> frozenset[str]:
    """Every key in ``content`` that is an id, which a partial answer keeps."""
    found: set[str] = set()
    stack = [content]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            found.update(k for k in item if isinstance(k, str) and (k == "id" or k.endswith("_id")))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return frozenset(found)


@attrs.define
class McpEpisode:
    settings: Settings
    situation: Situation
    rng: random.Random
    plan: FaultPlan
    rate: float
    _stack: AsyncExitStack | None = None
    _client: Client | None = None
    _errlog: IO[str] | None = None
    _tools: list[dict[str, Any]] = attrs.field(factory=list)
    _faults: list[dict[str, Any]] = attrs.field(factory=list)
    #: the first answer each call (tool and arguments) got: what a stale fault shows again
    _answers: dict[tuple[str, str], Any] = attrs.field(factory=dict)
    _calls: int = 0
    _state: dict[str, Any] | None = None
    _tool_checks: list[tuple[ToolCheck, Any, bool]] = attrs.field(factory=list)
    _finished: bool = False
    _holds_server: bool = False

    # -- life ---------------------------------------------------------------------------
    async def start(self, reset: bool = True) -> None:
        """Start (or reach) the server and list its tools; ``reset=False`` leaves a shared
        server's store as it is (the world's probe only lists)."""
        target = self.settings.target
        if self.settings.slots is not None:
            # (the wait for a slot is before the server starts: no call timeout runs yet)
            await self.settings.slots.acquire()
            self._holds_server = True
        self._stack = AsyncExitStack()
        transport: Any
        if target.starts_a_process:
            # the server's log goes to a file, so a server that dies can be quoted on its row
            self._errlog = self._stack.enter_context(
                tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by the stack
            )
            params = StdioServerParameters(
                command=str(target.command),
                args=list(target.args),
                env=dict(target.env) or None,
                cwd=target.cwd,
            )
            transport = stdio_client(params, errlog=self._errlog)
        else:
            transport = target.url
        client = Client(transport, read_timeout_seconds=self.settings.call_timeout_s)
        try:
            self._client = await self._stack.enter_async_context(client)
            listed = await self._client.list_tools()
        except Exception as exc:  # an exception group from the SDK's task groups, too
            raise McpServerGone(self._failure("did not start", exc)) from None
        self._tools = [
            tool_schema(t) for t in listed.tools if t.name not in self.settings.hidden_tools
        ]
        if not self._tools:
            hidden = sorted(self.settings.hidden_tools & {t.name for t in listed.tools})
            raise LookupError(
                f"MCP server {target.spec!r} lists no tools"
                + (f" the agent may use (hidden: {hidden})" if hidden else "")
            )
        if reset and self.settings.reset_tool is not None:
            result = await self._server_call(self.settings.reset_tool, {}, "resetting")
            if result.is_error:
                raise RuntimeError(
                    f"MCP server {target.spec!r}: reset tool {self.settings.reset_tool!r} "
                    f"failed: {result_text(result)}"
                )

    def tools(self) -> list[dict[str, Any]]:
        return list(self._tools)

    async def finish(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> None:
        """Read the server's final state and run its tool checks, while it is still up."""
        if self._client is None:
            return
        if self.settings.state_tool is not None:
            result = await self._server_call(self.settings.state_tool, {}, "reading its state")
            if result.is_error:
                raise RuntimeError(
                    f"state tool {self.settings.state_tool!r} failed: {result_text(result)}"
                )
            state = result_content(result)
            self._state = dict(state) if isinstance(state, Mapping) else {"state": state}
        for check in checks_of(self.situation.goal):
            if isinstance(check, ToolCheck):
                result = await self._server_call(check.tool, check.arguments, "running a check")
                self._tool_checks.append((check, result_content(result), bool(result.is_error)))
        self._finished = True

    async def close(self) -> None:
        stack, self._stack, self._client, self._errlog = self._stack, None, None, None
        try:
            if stack is not None:
                await stack.aclose()  # stops the server's process, then closes its log
        finally:
            if self._holds_server and self.settings.slots is not None:
                self._holds_server = False
                self.settings.slots.release()

    # -- the agent's calls --------------------------------------------------------------
    async def call(
        self, name: str, arguments: Mapping[str, Any], step: int | None = None
    ) -> ToolResult:
        index = self._calls if step is None else step
        self._calls += 1
        kind = draw_fault(self.plan, self.rate, self.rng) if self.rate > 0 else None
        if kind in BLOCKING_KINDS:
            self._faults.append({"step": index, "tool": name, "kind": kind})
            return blocked_result(str(kind), name, self.rng, "the MCP server")
        offered = {t["function"]["name"] for t in self._tools}
        if name not in offered:
            message = f"unknown tool {name!r}; tools are {sorted(offered)}"
            return ToolResult({"error": message}, error=message)
        try:
            result = await self._server_call(name, arguments, f"answering {name!r}")
        except McpServerGone:
            raise
        except MCPError as exc:
            # the server is up but did not answer this call in time, or refused it
            message = f"{name}: {exc.error.message}"
            return ToolResult({"error": "server_error", "message": message}, error=message)
        content = result_content(result)
        error = result_text(result) if result.is_error else None
        if error is not None:
            content = {"error": error}
        key = (name, json.dumps(dict(arguments), sort_keys=True, default=str))
        earlier = self._answers.get(key)
        seen_before = key in self._answers
        self._answers.setdefault(key, content)
        # a lagging replica can only serve a read it served before: stale fires on a repeat
        if kind is None or (kind == "stale" and not seen_before):
            return ToolResult(content, error=error)
        self._faults.append({"step": index, "tool": name, "kind": kind})
        degraded = degrade(kind, content, lambda: earlier, _id_fields(content))
        return ToolResult(degraded.content, fault=kind, error=error)

    async def _server_call(self, name: str, arguments: Mapping[str, Any], doing: str) -> Any:
        if self._client is None:
            raise McpServerGone(f"MCP server {self.settings.target.spec!r} is not running")
        try:
            return await self._client.call_tool(name, dict(arguments))
        except MCPError as exc:
            if exc.error.code != CONNECTION_CLOSED:
                raise
            raise McpServerGone(self._failure(f"stopped while {doing}", exc)) from None
        except Exception as exc:  # a broken pipe, a closed stream: the server is gone
            raise McpServerGone(self._failure(f"stopped while {doing}", exc)) from None

    def _failure(self, what: str, exc: BaseException) -> str:
        leaf = _leaf(exc)
        message = f"MCP server {self.settings.target.spec!r} {what}: {type(leaf).__name__}: {leaf}"
        if self._errlog is not None:
            self._errlog.flush()
            self._errlog.seek(0)
            tail = self._errlog.read()[-STDERR_TAIL_CHARS:].strip()
            if tail:
                message += f"; its stderr ended: {tail}"
        return message

    # -- what the row gets --------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return dict(self._state) if self._state is not None else {}

    def faults(self) -> list[dict[str, Any]]:
        return [dict(f) for f in self._faults]

    def check(self, final_text: str, steps: Sequence[Mapping[str, Any]]) -> Verdict:
        """All of the situation's checks, each run to its end: 1.0 when every one passed."""
        checks = checks_of(self.situation.goal)
        if not checks:
            return Verdict.error(
                f"situation {self.situation.situation_id!r} has no checks: give it checks in "
                "the situations file, or grade with judge="
            )
        if not self._finished:
            return Verdict.error("the server's checks did not run: the episode never finished")
        verdicts: list[Verdict] = []
        tool_results = iter(self._tool_checks)
        for number, check in enumerate(checks, start=1):
            if isinstance(check, PythonCheck):
                verdict = python_verdict(
                    check,
                    final_text=final_text,
                    steps=steps,
                    state=self.state(),
                    situation=self.situation,
                )
            else:
                ran, answer, failed = next(tool_results)
                if failed:
                    verdict = Verdict(0.0, f"{ran.describe()} failed: {answer}")
                elif contains(answer, ran.expect):
                    verdict = Verdict(1.0, f"{ran.describe()}: as the goal expects")
                else:
                    verdict = Verdict(
                        0.0, f"{ran.describe()} answered {answer!r}, not what the goal expects"
                    )
            # numbered, so a reason whose goal values an export masks still says which failed
            verdicts.append(attrs.evolve(verdict, reason=f"check {number}: {verdict.reason}"))
        reason = "; ".join(v.reason or "" for v in verdicts)
        if any(v.status != "ok" or v.reward is None for v in verdicts):
            return Verdict.error(reason)
        return Verdict(min(float(v.reward) for v in verdicts if v.reward is not None), reason)
