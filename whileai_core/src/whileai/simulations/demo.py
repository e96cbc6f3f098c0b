"""``whileai demo``: real simulate() runs, offline, on the embedded model.

The embedded model (SmolLM2-135M) plays both the agent and the simulated user in each built-in
world in turn (the shop, then the bank) with faults on; the worlds' templates write the
situations, because a 135M model writes poor ones. Every rollout is graded by its world's own
checks. Each run's report (pass@1 with its interval, pass^k, fault counts, warnings) is
printed, and its rows and sidecar are written to a folder of their own.
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

EMBEDDED = "local:smollm2"
#: Short replies and few tool rounds keep the demo to a few minutes on two cores; the
#: 135M model rambles and loops on tools when let.
DEMO_KNOBS = {"agent_max_tokens": 96, "user_max_tokens": 48, "max_tool_rounds": 1}
#: The built-in worlds, one run each: two domains of different shape under one engine.
DEMO_WORLDS = ("shop", "bank")


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
        help="folder for rows.jsonl and rows.meta.json (default runs/demo-<UTC timestamp>)",
    )
    parser.add_argument(
        "--situations", type=int, default=2, help="unique situations in each world (2)"
    )
    parser.add_argument("--repeats", type=int, default=4, help="rollouts per situation (4)")
    parser.add_argument("--fault-rate", type=float, default=0.2, help="tool fault rate (0.2)")
    parser.add_argument("--max-turns", type=int, default=2, help="agent turns per rollout (2)")
    parser.add_argument("--seed", type=int, default=0, help="run seed (0)")
    parser.add_argument("--model", default=EMBEDDED, help=f"agent and user model spec ({EMBEDDED})")
    parser.add_argument(
        "--worlds",
        default=",".join(DEMO_WORLDS),
        help=f"comma-separated worlds to run in, one run each ({','.join(DEMO_WORLDS)})",
    )


def run_demo(args: argparse.Namespace, *, registry: Any = None) -> int:
    from whileai.simulations.engine import simulate

    worlds = [w.strip() for w in str(args.worlds).split(",") if w.strip()]
    if not worlds:
        raise SystemExit("whileai demo: --worlds names no world")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = Path(args.out) if args.out else Path("runs") / f"demo-{stamp}"
    print(
        f"whileai demo: in each of {', '.join(worlds)}, {args.situations} situations x "
        f"{args.repeats} repeats, faults at {args.fault_rate}, agent and simulated user both "
        f"{args.model} (offline).\n"
        "Situations are written from each world's templates, not by a model: a 135M model "
        "writes poor ones.\n",
        flush=True,
    )
    for world in worlds:
        output = folder / world / "rows.jsonl"
        print(f"== {world} ==", flush=True)
        start = time.perf_counter()
        with kept_std_streams():
            data = simulate(
                agent_model=args.model,
                user_model=args.model,
                simulator="template",
                unique_situations=args.situations,
                rollouts_per_request=args.repeats,
                fault_rate=args.fault_rate,
                max_turns=args.max_turns,
                max_tool_calls=4,
                seed=args.seed,
                output=str(output),
                registry=registry,
                advanced={**DEMO_KNOBS, "world": world},
            )
        seconds = time.perf_counter() - start
        print(data.report())
        print(f"\n{len(data.rows)} rollouts in {seconds:.0f} s; rows: {output}")
        print(f"sidecar: {output.with_suffix('.meta.json')}\n")
    return 0
