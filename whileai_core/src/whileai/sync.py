"""Run a coroutine from synchronous code: the bridge every sync entry point (``simulate``,
``grade``, ``rank``, ``evaluate``) crosses to reach the async engine."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion, also when an event loop is already running in this thread
    (Jupyter): then it runs on a fresh loop in a worker thread, and an interrupt of this
    thread (the notebook's stop button, Ctrl-C) cancels it there and waits for it to wind
    down (what it kept said, what it opened closed) before it is raised here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    return _on_a_worker_loop(coro)


def _on_a_worker_loop(coro: Coroutine[Any, Any, T]) -> T:
    stop = threading.Event()
    running: dict[str, Any] = {}

    async def cancellable() -> T:
        # the task is known before the stop is read: an interrupt that comes before this
        # line is seen here, one that comes after it finds the task to cancel
        running["task"] = asyncio.current_task()
        running["loop"] = asyncio.get_running_loop()
        if stop.is_set():
            coro.close()
            raise asyncio.CancelledError
        return await coro

    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(asyncio.run, cancellable())
    try:
        return future.result()
    except KeyboardInterrupt:
        stop.set()
        task, loop = running.get("task"), running.get("loop")
        if task is not None and loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed: it had ended
                loop.call_soon_threadsafe(task.cancel)
        # the run winds down on its loop; a second interrupt stops waiting for it
        concurrent.futures.wait([future])
        raise
    finally:
        pool.shutdown(wait=False)
