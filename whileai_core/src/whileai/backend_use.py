"""The model backends a run uses: which roles each serves, what each did during the run
(retries, waits, errors by kind, read off ``backend.stats``), and closing the ones the engine
opened.

A run that spent minutes waiting on rate limits should say so rather than look stuck, so the
report carries each backend's counters and ``data.warnings`` one sentence per backend that
retried or waited.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

#: Model calls in flight at once when nothing says otherwise: ``simulate()``'s rollouts
#: (``advanced={"max_concurrency": ...}``), the rows ``wai.grade`` judges at once, and the
#: ``concurrency=`` a backend built from a spec gets for its connection pool. 16 keeps two
#: cores busy with the embedded model off the event loop while an HTTP endpoint sees a
#: modest queue; convention, untested.
DEFAULT_MAX_CONCURRENCY = 16

#: BackendStats counters reported per run (the difference over the run, since a backend
#: shared by several runs of one call keeps counting).
_COUNTERS = (
    "calls",
    "succeeded",
    "failed",
    "requests",
    "retries",
    "waits",
    "waited_s",
    "rate_limited",
    "input_tokens",
    "output_tokens",
)
_BY_KIND = ("errors", "failures")


@attrs.define
class RunBackend:
    """One backend of a run and the roles it serves."""

    label: str
    backend: Any
    roles: list[str]
    #: built by the engine (from a spec), so the engine closes it; a backend object the
    #: caller passed in is theirs to close
    opened: bool


def add_backend(
    backends: list[RunBackend], label: str, backend: Any, role: str, *, opened: bool
) -> None:
    """Record that ``backend`` serves ``role`` (one entry per distinct backend object)."""
    for entry in backends:
        if entry.backend is backend:
            if role not in entry.roles:
                entry.roles.append(role)
            entry.opened = entry.opened or opened
            return
    backends.append(RunBackend(label, backend, [role], opened))


def _stats_of(backend: Any) -> dict[str, Any] | None:
    stats = getattr(backend, "stats", None)
    if stats is None:
        return None
    as_dict = getattr(stats, "as_dict", None)
    if callable(as_dict):
        data = as_dict()
    elif attrs.has(type(stats)):
        data = attrs.asdict(stats)
    elif isinstance(stats, Mapping):
        data = dict(stats)
    else:
        return None
    return data if isinstance(data, dict) else None


def snapshot(backends: Sequence[RunBackend]) -> dict[int, dict[str, Any] | None]:
    """Every backend's counters now, to subtract at the end of a run."""
    return {id(b.backend): _stats_of(b.backend) for b in backends}


def _delta(now: Mapping[str, Any], before: Mapping[str, Any] | None) -> dict[str, Any]:
    before = before or {}
    out: dict[str, Any] = {}
    for name in _COUNTERS:
        if isinstance(now.get(name), int | float):
            out[name] = now[name] - (before.get(name) or 0)
    if "waited_s" in out:
        out["waited_s"] = round(float(out["waited_s"]), 3)
    for name in _BY_KIND:
        kinds = now.get(name)
        if isinstance(kinds, Mapping):
            old = before.get(name) or {}
            out[name] = {k: v - old.get(k, 0) for k, v in kinds.items() if v - old.get(k, 0)}
    return out


def usage_report(
    backends: Sequence[RunBackend], before: Mapping[int, dict[str, Any] | None]
) -> dict[str, dict[str, Any]]:
    """``report()["backends"]``: per backend (by label), its roles and what it did this run;
    ``stats: None`` for a backend that keeps no ``stats``."""
    report: dict[str, dict[str, Any]] = {}
    for entry in backends:
        now = _stats_of(entry.backend)
        label = entry.label if entry.label not in report else f"{entry.label} ({entry.roles[0]})"
        report[label] = {
            "roles": list(entry.roles),
            "stats": None if now is None else _delta(now, before.get(id(entry.backend))),
        }
    return report


def retries_so_far(
    backends: Sequence[RunBackend], before: Mapping[int, dict[str, Any] | None]
) -> int:
    """Retries every backend has made since ``before`` (what the progress line shows)."""
    total = 0
    for entry in backends:
        now = _stats_of(entry.backend)
        if now is not None:
            old = before.get(id(entry.backend)) or {}
            total += int(now.get("retries") or 0) - int(old.get("retries") or 0)
    return total


def wait_warnings(report: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One sentence per backend that retried or waited, so a slow run says why."""
    out = []
    for label, entry in report.items():
        stats = entry.get("stats") or {}
        retries = int(stats.get("retries") or 0)
        waited = float(stats.get("waited_s") or 0.0)
        limited = int(stats.get("rate_limited") or 0)
        if not retries and not waited:
            continue
        roles = " and ".join(entry.get("roles") or ["model"])
        cause = "on rate limits" if limited else "backing off"
        errors = stats.get("errors") or {}
        kinds = f" ({', '.join(f'{k} {v}' for k, v in sorted(errors.items()))})" if errors else ""
        out.append(
            f"the {roles} backend {label} waited {waited:.1f} s {cause} over {retries} "
            f"retries{kinds}"
        )
    return out


async def close_backends(backends: Sequence[RunBackend]) -> list[str]:
    """Close every backend the engine opened (``aclose()``, else ``close()``); a backend that
    fails to close is a warning, never the run's error."""
    problems = []
    for entry in backends:
        if not entry.opened:
            continue
        backend = entry.backend
        try:
            aclose = getattr(backend, "aclose", None)
            close = getattr(backend, "close", None)
            if callable(aclose):
                result = aclose()
                if inspect.isawaitable(result):
                    await result
            elif callable(close):
                if inspect.iscoroutinefunction(close):
                    await close()
                else:
                    # a blocking close (worker threads joining) stays off the event loop
                    result = await asyncio.to_thread(close)
                    if inspect.isawaitable(result):
                        await result
        except Exception as exc:
            problems.append(
                f"the {' and '.join(entry.roles)} backend {entry.label} did not close: "
                f"{type(exc).__name__}: {exc}"
            )
    return problems
