"""pass_at with its three intervals against scipy.stats.bootstrap computing the pass@1 interval alone.

    python3 dev.py bench bench_pass_at            # 100,000 tasks x 8 repeats, 10,000 resamples
    python3 dev.py bench bench_pass_at --quick    # 10,000 tasks x 8 repeats

Both work on the same rows: whileai reads them itself (validation, grouping, pass@1, pass^k,
pass@k and their three intervals over tasks, analytic since they were made to cover at small
sizes: docs/measure-rates.md); scipy is handed the per-task pass rates already computed, and
bootstraps the pass@1 interval alone (percentile method, the same
number of resamples, vectorised in batches so its memory stays bounded). At this many tasks the
two pass@1 intervals must agree within Monte Carlo error before the speed ratio is printed. Then the peak
memory of pass_at on 1,000,000 rows (traced Python allocations, and the process RSS growth).
"""

from __future__ import annotations

import argparse
import gc
import math
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Timing, max_rss_bytes, ratio_line, timed

import whileai as wai

REPEATS = 8
RESAMPLES = 10_000


def make_rows(n_tasks: int, repeats: int, seed: int) -> list[dict[str, Any]]:
    """Rows the shape a run writes: a task id, the prompt, the reply, a binary reward."""
    rng = np.random.default_rng(seed)
    rates = rng.beta(2.0, 3.0, size=n_tasks)
    passes = (rng.random((n_tasks, repeats)) < rates[:, None]).astype(int).tolist()
    return [
        {"task_id": f"task-{i}", "prompt": f"question {i}", "final_text": "answer", "reward": r}
        for i, group in enumerate(passes)
        for r in group
    ]


def scipy_pass_at_1_interval(rates: np.ndarray, batch: int) -> tuple[float, float]:
    from scipy import stats

    res = stats.bootstrap(
        (rates,),
        np.mean,
        method="percentile",
        n_resamples=RESAMPLES,
        batch=batch,
        vectorized=True,
        random_state=1,
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 tasks; 100,000-row memory run")
    parser.add_argument("--memory", type=int, metavar="ROWS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory:
        memory(args.memory)
        return
    n_tasks = 10_000 if args.quick else 100_000
    memory_rows = 100_000 if args.quick else 1_000_000

    rows = make_rows(n_tasks, REPEATS, seed=0)
    print(f"{n_tasks:,} tasks x {REPEATS} repeats = {len(rows):,} rows, {RESAMPLES:,} resamples")

    wai.pass_at(rows[:64])  # import whileai.measure (numpy, scipy.special) outside the timing
    ours = cpu_timed("whileai pass_at", lambda: wai.pass_at(rows, n_resamples=RESAMPLES, seed=0))
    report = ours.timing.result
    print(report)

    rates = np.fromiter(report.per_task.values(), dtype=np.float64, count=len(report.per_task))
    # 200 resamples per batch: 200 x 100,000 float64 indices and values stay under half a GB.
    peer = cpu_timed("scipy.stats.bootstrap", lambda: scipy_pass_at_1_interval(rates, batch=200))
    low, high = peer.timing.result
    print(
        f"pass@1 interval  whileai [{report.ci95[0]:.5f}, {report.ci95[1]:.5f}]  "
        f"scipy [{low:.5f}, {high:.5f}]"
    )
    # Monte Carlo error of a 2.5% bootstrap quantile: sqrt(q (1 - q) / B) / density, the bootstrap
    # distribution being close to normal with sd = sd(rates) / sqrt(n). Allow four of them.
    sd = float(rates.std()) / math.sqrt(rates.size)
    density = math.exp(-(1.959964**2) / 2) / math.sqrt(2 * math.pi) / sd
    tolerance = 4 * math.sqrt(2) * math.sqrt(0.025 * 0.975 / RESAMPLES) / density
    agree = abs(report.ci95[0] - low) <= tolerance and abs(report.ci95[1] - high) <= tolerance
    print(
        f"intervals agree within Monte Carlo error (+/-{tolerance:.5f}): {'yes' if agree else 'NO'}"
    )
    if not agree:
        sys.exit("the two pass@1 intervals disagree; a speed ratio would mean nothing")
    print(
        f"whileai: {ours.timing.seconds:.2f} s wall, {ours.cpu:.2f} s CPU for rows -> pass@1, "
        "pass^k, pass@k and three intervals"
    )
    print(
        f"scipy:   {peer.timing.seconds:.2f} s wall, {peer.cpu:.2f} s CPU for the pass@1 interval "
        "alone, from precomputed rates"
    )
    for what, ours_s, peer_s in (
        ("wall time", ours.timing.seconds, peer.timing.seconds),
        # On a shared machine CPU time is the steadier figure: it does not count waiting for a core.
        ("CPU time", ours.cpu, peer.cpu),
    ):
        print(
            ratio_line(
                f"pass_at vs pass@1 interval ({what})",
                n_tasks / ours_s,
                n_tasks / peer_s,
                "scipy.stats.bootstrap",
                target=20,
                unit=" tasks/s",
            )
        )

    # Memory in a fresh process, so the peak RSS scipy's batches left behind does not hide ours.
    subprocess.run([sys.executable, __file__, "--memory", str(memory_rows)], check=True)


@attrs.frozen
class CpuTiming:
    timing: Timing
    cpu: float


def cpu_timed(label: str, fn: Callable[[], Any]) -> CpuTiming:
    """``timed`` plus the process CPU time the call used."""
    start = time.process_time()
    timing = timed(label, fn)
    return CpuTiming(timing, time.process_time() - start)


def peak_rss() -> int:
    """The process's peak resident set size (VmHWM) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return max_rss_bytes()


def reset_peak_rss() -> int:
    """Reset the peak RSS to the current RSS (Linux clear_refs 5) and return it."""
    Path("/proc/self/clear_refs").write_text("5")
    return peak_rss()


def memory(n_rows: int) -> None:
    """Peak memory of pass_at on ``n_rows`` rows already in memory: RSS growth, then traced."""
    big = make_rows(n_rows // REPEATS, REPEATS, seed=1)
    wai.pass_at(big[:64])
    gc.collect()
    rss_before = reset_peak_rss()
    seconds = timed("pass_at", lambda: wai.pass_at(big, n_resamples=RESAMPLES, seed=0)).seconds
    rss_growth = peak_rss() - rss_before
    traced = timed(
        "pass_at, traced",
        lambda: wai.pass_at(big, n_resamples=RESAMPLES, seed=0),
        trace_memory=True,
    )
    peak = traced.peak_bytes or 0
    print(
        f"pass_at on {len(big):,} rows: {seconds:.2f} s; peak RSS growth "
        f"{rss_growth / 2**20:,.1f} MiB, peak traced allocation {peak / 2**20:,.1f} MiB "
        f"(target < 1024 MiB: {'met' if max(peak, rss_growth) < 2**30 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
