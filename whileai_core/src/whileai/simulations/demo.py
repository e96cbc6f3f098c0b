"""``whileai demo``: real simulate() runs, offline, on the embedded model, measuring faults.

The embedded model (SmolLM2-135M) plays both the agent and the simulated user in each built-in
world in turn (the shop, then the bank); the worlds' templates write the situations, because a
135M model writes poor ones. In each world the same situations run twice, with the mock world's
faults off and then on, every rollout graded by the world's own checks. The demo prints each
run's report, then the paired comparison of the two on the tool-error marker (and every other
marker and the reward) with intervals over situations, and writes the HTML report of the
comparison. A 135M model seldom passes and its own tool calls already fail, so the reward and
the tool errors barely move; ``faults_met``, the tool results the faults shaped, does.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from whileai.schema.wording import counted

EMBEDDED = "local:smollm2"
#: Short replies and few tool rounds keep the demo to a few minutes on two cores; the
#: 135M model rambles and loops on tools when let.
DEMO_KNOBS = {"agent_max_tokens": 96, "user_max_tokens": 48, "max_tool_rounds": 1}
#: The built-in worlds, one comparison each: two domains of different shape under one engine.
DEMO_WORLDS = ("shop", "bank")
#: The comparison's headline: whether the faults make the agent's tool calls fail more often.
DEMO_PROXY = "marker:tool_errors"


@contextlib.contextmanager
def kept_std_streams() -> Iterator[None]:
    """Put file descriptors 1 and 2 back as they were after the run.

    llama-cpp-python silences llama.cpp by pointing fd 1 and 2 at /dev/null around each call
    and restoring them afterwards; two calls in two threads can interleave so the one that
    restores last restores /dev/null (and its /dev/null file objects as sys.stdout and
    sys.stderr), and the demo's report would vanish.
    """
    streams = (sys.stdout, sys.stderr)
    for stream in streams:
        stream.flush()
    saved = (os.dup(1), os.dup(2))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = streams
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        default=None,
        help="folder for the runs and reports (default runs/demo-<UTC timestamp>)",
    )
    parser.add_argument(
        "--situations", type=int, default=4, help="unique situations in each world (4)"
    )
    parser.add_argument("--repeats", type=int, default=2, help="rollouts per situation (2)")
    parser.add_argument(
        "--fault-rate", type=float, default=0.5, help="tool fault rate of the faults-on run (0.5)"
    )
    parser.add_argument("--max-turns", type=int, default=1, help="agent turns per rollout (1)")
    parser.add_argument("--seed", type=int, default=0, help="run seed (0)")
    parser.add_argument("--model", default=EMBEDDED, help=f"agent and user model spec ({EMBEDDED})")
    parser.add_argument(
        "--worlds",
        default=",".join(DEMO_WORLDS),
        help=f"comma-separated worlds to run in, one run each ({','.join(DEMO_WORLDS)})",
    )


def run_demo(args: argparse.Namespace, *, registry: Any = None) -> int:
    worlds = [w.strip() for w in str(args.worlds).split(",") if w.strip()]
    if not worlds:
        raise SystemExit("whileai demo: --worlds names no world")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = Path(args.out) if args.out else Path("runs") / f"demo-{stamp}"
    print(
        f"whileai demo: in each of {', '.join(worlds)}, {counted(args.situations, 'situation')} "
        f"x {counted(args.repeats, 'repeat')} with faults off, then the same situations with "
        "faults at "
        f"{args.fault_rate}; agent and simulated user both {args.model} (offline).\n"
        "Situations are written from each world's templates, not by a model: a 135M model "
        "writes poor ones.\n",
        flush=True,
    )
    for world in worlds:
        runs = {}
        for label, rate in (("faults-off", 0.0), ("faults-on", args.fault_rate)):
            print(f"== {world}, {label} ==", flush=True)
            runs[label] = _run(args, world, rate, folder / world / label / "rows.jsonl", registry)
        _compare(world, runs["faults-off"], runs["faults-on"], folder / world / "report.html")
    return 0


def _run(args: argparse.Namespace, world: str, rate: float, output: Path, registry: Any) -> Any:
    from whileai.simulations.engine import simulate

    start = time.perf_counter()
    with kept_std_streams():
        data = simulate(
            agent_model=args.model,
            user_model=args.model,
            simulator="template",
            unique_situations=args.situations,
            rollouts_per_request=args.repeats,
            fault_rate=rate,
            max_turns=args.max_turns,
            max_tool_calls=4,
            seed=args.seed,
            output=str(output),
            registry=registry,
            advanced={**DEMO_KNOBS, "world": world},
        )
    seconds = time.perf_counter() - start
    print(data.report())
    print(
        f"\n{counted(len(data.rows), 'rollout')} in {seconds:.0f} s; rows: {output}\n", flush=True
    )
    return data


def _compare(world: str, off: Any, on: Any, page: Path) -> None:
    from whileai.measure.compare import compare_runs
    from whileai.viewing import html_report

    print(f"== {world}: faults on against faults off, paired by situation ==")
    # the runs, not their rows alone: their metadata holds the markers' bounds
    print(compare_runs(off, on, proxy=DEMO_PROXY))
    written = html_report(
        on, page, baseline=off, proxy=DEMO_PROXY, title=f"whileai demo: {world}, faults on vs off"
    )
    print(f"\nHTML report: {written}\n", flush=True)
