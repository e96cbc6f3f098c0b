"""Model answers cached on disk, so a re-run with the same inputs costs no tokens and gives
the same rows.

A :class:`ResponseCache` is one SQLite file in a directory (the standard library's
``sqlite3``, in WAL mode: several processes and runs may share one directory, each write is a
transaction, and a reader never sees half an entry). The key of a call is the SHA-256 of the
backend's identity, the messages, tools, response format, sampling (seed included) and
whether logprobs were asked for. A call is cached only when its answer is reproducible: at
temperature 0, or with a seed (every rollout of ``simulate()`` carries one). Anything else
goes to the model every time and is counted as uncacheable.

An entry that cannot be read back (a torn or edited value, a file that is not a database) is
a miss, counted as corrupt, never a crash; the answer the model then gives replaces it.

:class:`CachingBackends` is what a registry applies to every backend it resolves
(``Registry.with_backend_wrapper``), so the agent, the simulated user, the situation writer
and a judge's model are all cached through one switch.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from whileai.backends import Backend, Completion, Sampling, ToolCall
from whileai.schema.files import user_path
from whileai.schema.wording import counted

#: Where a run finds its cache directory when ``cache=`` says nothing.
CACHE_ENV = "WHILEAI_CACHE"

#: The file a cache directory holds.
CACHE_FILE = "responses.sqlite3"
#: how long a process waits for the cache file another holds (seconds)
_PATIENCE = 30.0


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite said "busy" or "locked" (another connection holds the file)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


#: The version of the key and entry format: a change makes every old entry a miss.
FORMAT = 1


@attrs.define
class CacheStats:
    """What a cache did, in this process."""

    hits: int = 0
    misses: int = 0
    #: calls that were not cacheable (temperature above 0 and no seed)
    uncacheable: int = 0
    #: entries that could not be read back (counted as misses too)
    corrupt: int = 0
    input_tokens_saved: int = 0
    output_tokens_saved: int = 0

    def as_dict(self) -> dict[str, int]:
        return attrs.asdict(self)


class ResponseCache:
    """One cache directory: ``get`` and ``put`` answers by key, safe across threads and
    processes."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        # a directory named in an environment file reaches us with its ~ unread
        self.directory = user_path(directory)
        self.path = self.directory / CACHE_FILE
        self.stats = CacheStats()
        self._local = threading.local()
        self._lock = threading.Lock()
        self.broken: str | None = None

    def _db(self) -> sqlite3.Connection | None:
        if self.broken is not None:
            return None
        held: sqlite3.Connection | None = getattr(self._local, "db", None)
        if held is not None:
            return held
        deadline = time.monotonic() + _PATIENCE
        while True:
            try:
                db = self._open()
                break
            except sqlite3.OperationalError as exc:
                # processes that open a new cache at one instant all switch it to WAL: SQLite
                # answers some of them "database is locked" at once, without waiting (it
                # would deadlock otherwise). That is a wait, not a broken cache.
                if _busy(exc) and time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
                self.broken = f"{self.path}: {exc}"
                return None
            except (sqlite3.DatabaseError, OSError) as exc:
                # not a database, or not writable: the run goes on uncached and says why
                self.broken = f"{self.path}: {exc}"
                return None
        self._local.db = db
        return db

    def _open(self) -> sqlite3.Connection:
        self.directory.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=_PATIENCE, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS responses "
                "(key TEXT PRIMARY KEY, entry TEXT NOT NULL, created REAL NOT NULL)"
            )
        except BaseException:
            db.close()
            raise
        return db

    def get(self, key: str) -> Completion | None:
        db = self._db()
        if db is None:
            return None
        try:
            found = db.execute("SELECT entry FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError:
            self._count(corrupt=1)
            return None
        if found is None:
            return None
        try:
            return completion_from(json.loads(found[0]))
        except (ValueError, TypeError, KeyError):
            self._count(corrupt=1)
            return None

    def put(self, key: str, completion: Completion) -> None:
        db = self._db()
        if db is None:
            return
        # keys in the order the model gave them: a tool call's arguments read back in another
        # order would change the next call's messages, and so its key, and the row
        entry = json.dumps(completion_to(completion), ensure_ascii=False)
        try:
            db.execute(
                "INSERT OR REPLACE INTO responses (key, entry, created) VALUES (?, ?, ?)",
                (key, entry, time.time()),
            )
        except sqlite3.DatabaseError:
            self._count(corrupt=1)

    def _count(self, **changes: int) -> None:
        with self._lock:
            for name, value in changes.items():
                setattr(self.stats, name, getattr(self.stats, name) + value)

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


def completion_to(completion: Completion) -> dict[str, Any]:
    """An answer as the cache stores it (retries and waits are the first call's, not kept)."""
    return {
        "format": FORMAT,
        "text": completion.text,
        "model": completion.model,
        "sampling": dict(completion.sampling),
        "tool_calls": [
            {
                "id": c.id,
                "name": c.name,
                "arguments": dict(c.arguments),
                "raw_arguments": c.raw_arguments,
            }
            for c in completion.tool_calls
        ],
        "finish_reason": completion.finish_reason,
        "input_tokens": completion.input_tokens,
        "output_tokens": completion.output_tokens,
        "cached_input_tokens": completion.cached_input_tokens,
        "logprob": completion.logprob,
        "n_tokens": completion.n_tokens,
    }


def completion_from(entry: Mapping[str, Any]) -> Completion:
    """The answer an entry holds; TypeError, KeyError or ValueError when it is not one."""
    if entry.get("format") != FORMAT:
        raise ValueError(f"an entry of format {entry.get('format')!r}, not {FORMAT}")
    text, model = entry["text"], entry["model"]
    if not isinstance(text, str) or not isinstance(model, str):
        raise TypeError("text and model must be strings")
    calls = tuple(
        ToolCall(
            id=str(c["id"]),
            name=str(c["name"]),
            arguments=dict(c["arguments"]),
            raw_arguments=c.get("raw_arguments"),
        )
        for c in entry["tool_calls"]
    )
    return Completion(
        text,
        model,
        dict(entry["sampling"]),
        calls,
        str(entry["finish_reason"]),
        input_tokens=_count_or_none(entry.get("input_tokens")),
        output_tokens=_count_or_none(entry.get("output_tokens")),
        cached_input_tokens=_count_or_none(entry.get("cached_input_tokens")),
        logprob=entry.get("logprob"),
        n_tokens=_count_or_none(entry.get("n_tokens")),
    )


def _count_or_none(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a token count must be an integer, got {value!r}")
    return value


def backend_identity(backend: Any) -> str:
    """What names a backend's model in a key: its ``cache_identity()`` when it has one, else
    its class, name, model and endpoint."""
    own = getattr(backend, "cache_identity", None)
    if callable(own):
        return str(own())
    kind = type(backend)
    parts = [f"{kind.__module__}.{kind.__qualname__}"]
    for attribute in ("name", "model", "base_url"):
        value = getattr(backend, attribute, None)
        parts.append("" if value is None else str(value))
    return "|".join(parts)


def cacheable(sampling: Sampling) -> bool:
    """Whether an answer sampled so is reproducible: at temperature 0, or seeded."""
    return sampling.seed is not None or sampling.temperature == 0


def call_key(
    identity: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    sampling: Sampling,
    logprobs: bool,
    response_format: Mapping[str, Any] | None,
) -> str:
    payload = {
        "format": FORMAT,
        "backend": identity,
        "messages": list(messages),
        "tools": list(tools) if tools is not None else None,
        "sampling": attrs.asdict(sampling),
        "logprobs": bool(logprobs),
        "response_format": response_format,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedBackend:
    """A backend whose reproducible answers come from the cache when it holds them. Every
    other attribute (``stats``, ``secrets``, ``name``, ``model``...) is the backend's own."""

    def __init__(self, inner: Backend, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self._identity = backend_identity(inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
        *,
        logprobs: bool = False,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        asked = Sampling.coerce(sampling)
        call: dict[str, Any] = {}
        if logprobs:
            call["logprobs"] = True
        if response_format is not None:
            call["response_format"] = response_format
        if not cacheable(asked):
            self.cache._count(uncacheable=1)
            return await self.inner.complete(messages, tools, sampling, **call)
        key = call_key(self._identity, messages, tools, asked, logprobs, response_format)
        found = self.cache.get(key)
        if found is not None:
            self.cache._count(
                hits=1,
                input_tokens_saved=found.input_tokens or 0,
                output_tokens_saved=found.output_tokens or 0,
            )
            return found
        self.cache._count(misses=1)
        answer = await self.inner.complete(messages, tools, sampling, **call)
        if isinstance(answer, Completion):
            self.cache.put(key, answer)
        return answer

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


@attrs.define
class CachingBackends:
    """Wraps each backend a registry resolves in :class:`CachedBackend` over one cache
    directory. Picklable (a worker process opens the directory itself)."""

    directory: str
    _cache: ResponseCache | None = attrs.field(default=None, init=False, repr=False, eq=False)

    @property
    def cache(self) -> ResponseCache:
        if self._cache is None:
            self._cache = ResponseCache(self.directory)
        return self._cache

    def __call__(self, backend: Any) -> Any:
        if isinstance(backend, CachedBackend) or not isinstance(backend, Backend):
            return backend
        return CachedBackend(backend, self.cache)

    def report(self) -> dict[str, Any]:
        """What ``report()["cache"]`` says: where, and what the cache did."""
        out: dict[str, Any] = {"dir": self.directory, **self.cache.stats.as_dict()}
        if self.cache.broken is not None:
            out["unusable"] = self.cache.broken
        return out

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": self.directory, "_cache": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.directory = state["directory"]
        self._cache = None


def cache_line(report: Mapping[str, Any]) -> str:
    """A report's line for what the response cache did (:meth:`CachingBackends.report`)."""
    saved = report["input_tokens_saved"] + report["output_tokens_saved"]
    return (
        f"{counted(report['hits'], 'hit')}, {counted(report['misses'], 'miss')}, "
        f"{report['uncacheable']} uncacheable, {counted(saved, 'token')} saved ({report['dir']})"
    )


def caching(cache: Any, environ: Mapping[str, str] | None = None) -> CachingBackends | None:
    """The wrapper ``cache=`` asks for: a directory (a path), ``False`` for none, ``None`` for
    ``WHILEAI_CACHE`` (unset: none). Anything else is a clear error."""
    env = os.environ if environ is None else environ
    if cache is None:
        chosen = env.get(CACHE_ENV, "").strip()
        return CachingBackends(chosen) if chosen else None
    if cache is False:
        return None
    if isinstance(cache, str | os.PathLike) and str(cache).strip():
        return CachingBackends(os.fspath(cache))
    raise ValueError(
        f"cache= must be a directory path, False (no cache) or None ({CACHE_ENV}), got {cache!r}"
    )
