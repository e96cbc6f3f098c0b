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

    Thread-safe. A worker that misses its deadline or crashes is killed and forgotten; the next
    request starts a fresh one. Every worker is killed by :meth:`close`, when the pool is
    garbage-collected, or at interpreter exit.
    """

    def __init__(self, module: str, size: int) -> None:
        if size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got size={size}")
        self.module = module
        self.size = size
        self._idle: list[_Worker] = []
        self._changed = threading.Condition()
        self._started = 0
        self._all: list[_Worker] = []
        self._closed = False
        # Workers are started from this one thread, which lives as long as the pool: a worker
        # asks the kernel to kill it when the thread that started it ends (see _mathworker).
        self._spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="workers")
        self._finalizer = weakref.finalize(self, _shutdown, self._all, self._spawner)

    def _acquire(self) -> _Worker:
        with self._changed:
            while True:
                if self._closed:
                    raise RuntimeError("the worker pool is closed")
                while self._idle:
                    worker = self._idle.pop()
                    if worker.process.poll() is None:
                        return worker
                    # Died while idle (the OOM killer, a stray signal): replace it quietly.
                    self._started -= 1
                    if worker in self._all:
                        self._all.remove(worker)
                    worker.kill()
                if self._started < self.size:
                    self._started += 1
                    break
                self._changed.wait()
        try:
            worker = self._spawner.submit(_Worker, self.module).result()
        except BaseException:
            with self._changed:
                self._started -= 1
                self._changed.notify()
            raise
        with self._changed:
            self._all.append(worker)
        return worker

    def _release(self, worker: _Worker) -> None:
        with self._changed:
            if self._closed:
                worker.kill()
                return
            self._idle.append(worker)
            self._changed.notify()

    def _forget(self, worker: _Worker) -> None:
        worker.kill()
        with self._changed:
            self._started -= 1
            if worker in self._all:
                self._all.remove(worker)
            self._changed.notify()

    def hello(self) -> dict[str, Any]:
        """The first line a worker wrote (what it runs); starts one if none is running."""
        worker = self._acquire()
        self._release(worker)
        return worker.hello

    def request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The worker's reply to ``payload``; WorkerTimeout after ``timeout`` seconds.

        A worker that dies without answering is replaced and the request sent once more (the
        requests are pure, so repeating one is safe); a second death raises WorkerCrashed.
        """
        for attempt in (1, 2):
            worker = self._acquire()
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
