"""Worker processes that answer one JSON request at a time, under a wall-clock deadline.

Why processes started with ``subprocess`` and not ``signal.alarm`` or ``multiprocessing``: an
alarm only fires in the main thread; a thread cannot be stopped; ``multiprocessing`` pools are
daemonic in some hosts (a verifier running inside one cannot start children) and fork a
threaded parent. A plain child process can be killed when its deadline passes, from any
thread of any process, and is replaced on the next request.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import select
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

STARTUP_SECONDS = 120.0


class WorkerTimeout(Exception):
    """The request did not finish before its deadline; its worker was killed."""


class WorkerCrashed(Exception):
    """The worker process died or broke the protocol while answering."""


class _Worker:
    """One child process speaking JSON lines."""

    def __init__(self, module: str) -> None:
        env = dict(os.environ)
        # The child imports what the parent can, wherever the parent found it.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env["WHILEAI_WORKER_PARENT"] = str(os.getpid())
        self.process = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self._buffer = b""
        #: the pool's slot this worker holds
        self.slot = 0
        self.hello = self.read(time.monotonic() + STARTUP_SECONDS)

    def request(self, payload: dict[str, Any], deadline: float) -> dict[str, Any]:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(payload).encode() + b"\n")
            self.process.stdin.flush()
        except OSError as exc:
            raise WorkerCrashed(f"worker stopped taking requests: {exc}") from None
        return self.read(deadline)

    def read(self, deadline: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerTimeout
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise WorkerTimeout
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                code = self.process.poll()
                raise WorkerCrashed(f"worker exited (status {code})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply: dict[str, Any] = json.loads(line)
        except ValueError as exc:
            raise WorkerCrashed(f"worker wrote {line[:200]!r}: {exc}") from None
        return reply

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def _shutdown(workers: list[_Worker], spawner: concurrent.futures.ThreadPoolExecutor) -> None:
    for worker in list(workers):
        worker.kill()
    workers.clear()
    spawner.shutdown(wait=False)


class WorkerPool:
    """Up to ``size`` workers, started on demand; a request waits for a free one.

    Each worker holds a slot (0 to ``size - 1``). A request may name the slot it wants
    (``slot=``): requests about one reference then go to one worker, which parsed that
    reference before and has warmed its parser on it; a request that names none takes any
    idle worker.

    Thread-safe. A worker that misses its deadline or crashes is killed and forgotten; the next
    request starts a fresh one in its slot. Every worker is killed by :meth:`close`, when the
    pool is garbage-collected, or at interpreter exit.
    """

    def __init__(self, module: str, size: int) -> None:
        if size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got size={size}")
        self.module = module
        self.size = size
        self._idle: list[_Worker] = []
        self._changed = threading.Condition()
        #: the live worker of each slot, idle or busy
        self._slots: dict[int, _Worker] = {}
        #: slots whose worker is being started
        self._starting: set[int] = set()
        self._all: list[_Worker] = []
        self._closed = False
        # Workers are started from this one thread, which lives as long as the pool: a worker
        # asks the kernel to kill it when the thread that started it ends (see _mathworker).
        self._spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="workers")
        self._finalizer = weakref.finalize(self, _shutdown, self._all, self._spawner)

    def _acquire(self, slot: int | None = None) -> _Worker:
        with self._changed:
            while True:
                if self._closed:
                    raise RuntimeError("the worker pool is closed")
                self._drop_dead_idle()
                if slot is None:
                    if self._idle:
                        return self._idle.pop()
                    free = self._free_slot()
                else:
                    worker = self._slots.get(slot)
                    if worker is not None and worker in self._idle:
                        self._idle.remove(worker)
                        return worker
                    free = slot if worker is None and slot not in self._starting else None
                if free is not None:
                    self._starting.add(free)
                    break
                self._changed.wait()
        assert free is not None
        try:
            worker = self._spawner.submit(_Worker, self.module).result()
        except BaseException:
            with self._changed:
                self._starting.discard(free)
                self._changed.notify_all()
            raise
        worker.slot = free
        with self._changed:
            self._starting.discard(free)
            self._slots[free] = worker
            self._all.append(worker)
        return worker

    def _free_slot(self) -> int | None:
        for candidate in range(self.size):
            if candidate not in self._slots and candidate not in self._starting:
                return candidate
        return None

    def _drop_dead_idle(self) -> None:
        """Workers that died while idle (the OOM killer, a stray signal) are replaced
        quietly: their slots are free again."""
        for worker in [w for w in self._idle if w.process.poll() is not None]:
            self._idle.remove(worker)
            self._unslot(worker)
            worker.kill()

    def _unslot(self, worker: _Worker) -> None:
        if self._slots.get(worker.slot) is worker:
            del self._slots[worker.slot]
        if worker in self._all:
            self._all.remove(worker)

    def _release(self, worker: _Worker) -> None:
        with self._changed:
            if self._closed:
                worker.kill()
                return
            self._idle.append(worker)
            self._changed.notify_all()

    def _forget(self, worker: _Worker) -> None:
        worker.kill()
        with self._changed:
            self._unslot(worker)
            self._changed.notify_all()

    def hello(self) -> dict[str, Any]:
        """The first line a worker wrote (what it runs); starts one if none is running."""
        worker = self._acquire()
        self._release(worker)
        return worker.hello

    def request(
        self, payload: dict[str, Any], timeout: float, *, slot: int | None = None
    ) -> dict[str, Any]:
        """The worker's reply to ``payload`` (from the worker of ``slot`` when given);
        WorkerTimeout after ``timeout`` seconds.

        A worker that dies without answering is replaced and the request sent once more (the
        requests are pure, so repeating one is safe); a second death raises WorkerCrashed.
        """
        if slot is not None and not 0 <= slot < self.size:
            raise ValueError(f"slot must be in 0..{self.size - 1}, got {slot}")
        for attempt in (1, 2):
            worker = self._acquire(slot)
            try:
                reply = worker.request(payload, time.monotonic() + timeout)
            except WorkerCrashed:
                self._forget(worker)
                if attempt == 2:
                    raise
                continue
            except BaseException:
                # A late reply would answer the next request: the worker cannot be reused.
                self._forget(worker)
                raise
            self._release(worker)
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def running(self) -> list[int]:
        """Process ids of the workers alive now."""
        with self._changed:
            return [w.process.pid for w in self._all if w.process.poll() is None]

    def close(self) -> None:
        """Kill every worker; requests after this raise."""
        with self._changed:
            self._closed = True
            self._idle.clear()
            self._changed.notify_all()
        self._finalizer()
