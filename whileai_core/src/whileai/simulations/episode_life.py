"""The optional parts of an episode's life, for worlds that live outside this process.

The shop keeps its state in a dict, so its episodes only answer ``call``, ``state``,
``faults`` and ``check``. A world in front of a live service (an MCP server, an HTTP app)
needs more: to start the service and list its tools, to read the final state and run the
service's own checks before the episode ends, to stop the service afterwards, and to wait on
it without holding up the other rollouts. Each of these is an optional method of the episode
(see ``whileai.worlds.Episode``); the engine calls the ones an episode has:

1. ``start()``, once, before the agent's first turn;
2. ``tools()``, the tools this episode offers (instead of ``world.tools()``);
3. ``call(...)``, which may be a coroutine function;
4. ``finish(final_text, steps)``, once, after the last turn, before ``state()``, ``faults()``
   and ``check()`` are read;
5. ``close()``, exactly once, whatever happened, after the rollout is graded.

Any of ``start``, ``finish`` and ``close`` may be plain or coroutine functions.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.worlds import Episode, ToolResult, World


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def start(episode: Episode) -> None:
    """Run the episode's ``start()`` when it has one."""
    method = getattr(episode, "start", None)
    if callable(method):
        await _settle(method())


def tools(episode: Episode, world: World) -> list[dict[str, Any]]:
    """The tools to offer: the episode's own list when it keeps one, else the world's."""
    method = getattr(episode, "tools", None)
    listed = method() if callable(method) else world.tools()
    return list(listed)


async def call(episode: Episode, name: str, arguments: Mapping[str, Any], **where: Any) -> Any:
    """One tool call, awaited when the episode's ``call`` is a coroutine function."""
    result: ToolResult = await _settle(episode.call(name, arguments, **where))
    return result


async def finish(episode: Episode, final_text: str, steps: Sequence[Mapping[str, Any]]) -> None:
    """Run the episode's ``finish(final_text, steps)`` when it has one."""
    method = getattr(episode, "finish", None)
    if callable(method):
        await _settle(method(final_text, steps))


async def close(episode: Episode | None) -> str | None:
    """Run the episode's ``close()`` when it has one; a readable problem if it raised (the
    rollout's row is already made, so a failed close is the run's warning, not the row's)."""
    method = getattr(episode, "close", None) if episode is not None else None
    if not callable(method):
        return None
    try:
        await _settle(method())
    except Exception as exc:
        return f"an episode did not close cleanly: {type(exc).__name__}: {exc}"
    return None
