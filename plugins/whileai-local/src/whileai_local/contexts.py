"""llama.cpp contexts, loaded once per process and lent to one thread at a time.

A ``Llama`` object holds a llama.cpp context, which is not thread-safe, and loading one costs
about 0.2 s and some memory. So each process keeps one pool of contexts per
(model file, ``logits_all``, ``chat_format``, ``n_ctx``): those are constructor options of
``Llama`` that no call can change. This module-level cache is deliberately process-wide state:
every backend resolved for the same model in a process (the agent, the simulated user, the
writer, each eval pass) shares the loaded weights instead of loading them again, and the pool
is what keeps two threads off one context. The only other process-wide state is
``STD_STREAMS_LOCK`` (below), which guards the process's stdout and stderr, themselves
process-wide.

A pool holds up to ``size`` contexts, each running llama.cpp on one thread. On 2 cores, two
contexts of one thread each generated 110 tokens/s where one context with two threads generated
63 (12 chat completions of 64 tokens, SmolLM2-135M Q4_1), so by default a pool has one context
per core and the backend runs as many generations side by side.
"""

from __future__ import annotations

import atexit
import functools
import os
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

#: Enough context for a multi-turn rollout with tool definitions; SmolLM2 was trained on 8k.
DEFAULT_N_CTX = 4096


def default_pool_size() -> int:
    """One single-threaded context per core (measured above), at most 4 to bound memory."""
    return max(1, min(4, os.cpu_count() or 1))


@attrs.frozen
class ContextKey:
    """What makes two ``Llama`` objects interchangeable."""

    path: Path
    logits_all: bool
    chat_format: str | None
    n_ctx: int


class ContextPool:
    """Up to ``size`` ``Llama`` objects for one key; each is used by one thread at a time."""

    def __init__(self, key: ContextKey, size: int) -> None:
        if size < 1:
            raise ValueError(f"contexts must be at least 1, got {size}")
        self.key = key
        self.size = size
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._created = 0
        self._lock = threading.Lock()
        self._free = threading.Semaphore(size)

    @property
    def loaded(self) -> int:
        """How many contexts this pool has loaded so far."""
        return self._created

    def _new(self) -> Any:
        with STD_STREAMS_LOCK:
            return llama_class()(
                model_path=str(self.key.path),
                n_ctx=self.key.n_ctx,
                n_threads=1,
                n_threads_batch=1,
                logits_all=self.key.logits_all,
                chat_format=self.key.chat_format,
                verbose=False,
            )

    @contextmanager
    def borrow(self) -> Iterator[Any]:
        """Lend one context to the calling thread, loading it on first need; blocks while all
        ``size`` contexts are in use."""
        self._free.acquire()
        try:
            try:
                llama = self._idle.get_nowait()
            except queue.Empty:
                with self._lock:
                    self._created += 1
                try:
                    llama = self._new()
                except BaseException:
                    with self._lock:
                        self._created -= 1
                    raise
            try:
                yield llama
            finally:
                self._idle.put(llama)
        finally:
            self._free.release()

    def close_idle(self) -> int:
        """Free every context not lent out now; returns how many were freed.

        Called at interpreter exit: a ``Llama`` left to its ``__del__`` during shutdown may
        find llama_cpp's module globals already torn down and print "Exception ignored in
        Llama.__del__ ... 'NoneType' object is not callable" on stderr.
        """
        closed = 0
        while True:
            try:
                llama = self._idle.get_nowait()
            except queue.Empty:
                return closed
            llama.close()  # frees memory only; llama.cpp prints nothing here
            with self._lock:
                self._created -= 1
            closed += 1


@functools.cache
def llama_class() -> type:
    """``Llama`` with a record of the completions one chat call makes (imported on first use,
    so loading the plugin does not load llama.cpp).

    llama.cpp's function-calling handler runs several raw completions per chat call (choose a
    tool, write its arguments, choose again), passes no token cap to them, asks none of them for
    log-probabilities, and counts only the argument-writing ones in its usage. While ``calls``
    is a list, every raw completion is appended to it, an unset cap becomes ``max_tokens_cap``
    and, on a ``logits_all`` context, log-probabilities are requested, so the backend can
    report the tokens, the cap and the logprobs of the whole turn. A context is used by one
    thread at a time (the pool sees to it), so this per-instance state is never shared.
    """
    from llama_cpp import Llama

    extra_buffers = loads_extra_buffers()

    class RecordingLlama(Llama):
        calls: list[Any] | None = None
        max_tokens_cap: int | None = None

        # Llama.__init__ makes its model parameters and loads the weights with them in one
        # call, with no option for extra buffer types: this setter is the one place between
        # the two (tests/test_amx.py fails if an upgrade stops assigning them here).
        @property
        def model_params(self) -> Any:
            try:
                return self.__dict__["model_params"]
            except KeyError:  # before __init__ set them, as for any attribute not yet set
                raise AttributeError("model_params") from None

        @model_params.setter
        def model_params(self, params: Any) -> None:
            if not extra_buffers:
                params.use_extra_bufts = False
            self.__dict__["model_params"] = params

        def create_completion(self, *args: Any, **kwargs: Any) -> Any:
            log = self.calls
            if log is not None:
                if kwargs.get("max_tokens") is None or kwargs["max_tokens"] <= 0:
                    kwargs["max_tokens"] = self.max_tokens_cap
                if self._logits_all and kwargs.get("logprobs") is None:
                    kwargs["logprobs"] = 1
            out = super().create_completion(*args, **kwargs)
            if log is not None:
                log.append(out)
            return out

    return RecordingLlama


def loads_extra_buffers() -> bool:
    """Whether contexts may put weights in llama.cpp's extra buffer types: not where llama.cpp
    would use AMX for them.

    llama.cpp built for a CPU with AMX (Intel Sapphire Rapids and later) moves the weights of
    most quantized types (Q4_0, Q4_1, Q8_0, the K types) into AMX buffers, and its AMX matrix
    multiply crashes the process with a segmentation fault on the first generation on some of
    these machines (seen here on 2-core cloud machines with SmolLM2-135M Q4_1, in the demo and
    in llama.cpp's own server; ggml-org/llama.cpp#20824, closed without a fix). Without extra
    buffer types the weights stay in plain CPU buffers: on such a machine that also gives up
    the repacking llama.cpp does for Q4_0, Q4_K, Q8_0 and IQ4_NL, never for Q4_1, the
    embedded model's type. Elsewhere nothing changes."""
    import llama_cpp

    return b"AMX_INT8 = 1" not in llama_cpp.llama_print_system_info()


#: Held around every llama-cpp-python call that may silence llama.cpp: with ``verbose=False``
#: its ``suppress_stdout_stderr`` points the process's file descriptors 1 and 2 (and
#: ``sys.stdout``/``sys.stderr``) at /dev/null and restores them afterwards. Two such calls in
#: two threads interleave the save and restore, and stdout stays on /dev/null for the rest of
#: the process (seen: a script printed nothing after its first concurrent batch). Because the
#: streams belong to the process, the lock guarding them must too: it is the one lock in the
#: plugin that is not per pool. In llama-cpp-python 0.3.36 the calls our backend makes that
#: redirect are context loads (``Llama(...)``, which also initialises the llama.cpp backend once)
#: and nothing else: grammars are built in Python and the ``chatml-function-calling`` handler
#: does not redirect (tests/test_std_streams.py checks every redirect happens under this lock,
#: so an upgrade that adds one elsewhere fails there). A load takes 0.2 s, once per context.
STD_STREAMS_LOCK = threading.Lock()

_POOLS: dict[ContextKey, ContextPool] = {}
_POOLS_LOCK = threading.Lock()


def context_pool(key: ContextKey, size: int | None = None) -> ContextPool:
    """The process's pool for ``key``, created on first use with ``size`` contexts at most.

    A later call with a different ``size`` gets the existing pool: the contexts are already
    shared, and a second pool would only load the weights again.
    """
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = ContextPool(key, default_pool_size() if size is None else size)
            if not _POOLS:
                atexit.register(close_idle_contexts)
            _POOLS[key] = pool
        return pool


def close_idle_contexts() -> int:
    """Free every cached context not in use (registered to run at interpreter exit, after the
    worker threads have been joined); returns how many were freed. A pool loads again on next
    use."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
    return sum(pool.close_idle() for pool in pools)
