"""Shared helpers for the side-by-side benchmarks: timing, peak memory, the ratio line."""

from __future__ import annotations

import gc
import resource
import time
import tracemalloc
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

T = TypeVar("T")


@attrs.frozen
class Timing:
    label: str
    seconds: float
    peak_bytes: int | None
    result: Any = attrs.field(repr=False)

    def rate(self, items: int) -> float:
        return items / self.seconds if self.seconds > 0 else float("inf")


def timed(label: str, fn: Callable[[], T], *, trace_memory: bool = False) -> Timing:
    """Run ``fn`` once; wall time, and with ``trace_memory`` the peak Python allocation."""
    gc.collect()
    if trace_memory:
        tracemalloc.start()
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    peak = None
    if trace_memory:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return Timing(label, seconds, peak, result)


def max_rss_bytes() -> int:
    """The process's peak resident set size so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def ratio_line(
    what: str,
    ours: float,
    peer: float,
    peer_name: str,
    *,
    target: float | None = None,
    unit: str = "/s",
) -> str:
    ratio = ours / peer if peer else float("inf")
    line = f"{what}: whileai {ours:,.1f}{unit}  {peer_name} {peer:,.1f}{unit}  ratio {ratio:.2f}x"
    if target is not None:
        line += f"  (target >= {target}x: {'met' if ratio >= target else 'NOT met'})"
    return line
