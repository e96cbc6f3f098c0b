"""The sync entry points inside a running event loop (a Jupyter notebook's): they run on a
loop of their own in a worker thread, and an interrupt of the notebook stops the run there."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from whileai.sync import run_sync

SIMULATIONS = Path(__file__).resolve().parent / "simulations"


def test_a_sync_call_inside_a_running_loop_runs_on_a_loop_of_its_own() -> None:
    import asyncio
    import threading

    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    async def notebook_cell() -> tuple[str, str]:
        # a cell runs inside the notebook's loop; run_sync cannot nest in it
        return run_sync(where()), threading.current_thread().name

    ran_in, cell_in = asyncio.run(notebook_cell())
    assert ran_in != cell_in
    assert asyncio.run(notebook_cell())[0] != cell_in  # and again, a fresh worker each time


def test_a_failure_on_the_worker_loop_reaches_the_cell() -> None:
    import asyncio

    async def fails() -> None:
        raise ValueError("the run's own error")

    async def notebook_cell() -> None:
        run_sync(fails())

    with pytest.raises(ValueError, match="the run's own error"):
        asyncio.run(notebook_cell())


NOTEBOOK = """
import asyncio, sys
sys.path.insert(0, sys.argv[2])
import sim_doubles as d
import whileai as wai

async def cell():
    # what a notebook cell does: a sync call while the kernel's loop runs
    return wai.simulate(registry=d.registry(), agent_model="fake:slow-agent",
        user_model="fake:user", simulator="template", unique=50, repeats=4,
        output=sys.argv[1], advanced={"world": "tinyshop", "max_concurrency": 2})

loop = asyncio.new_event_loop()  # a kernel's loop: an interrupt raises in the waiting cell
try:
    loop.run_until_complete(cell())
except KeyboardInterrupt:
    print("the cell was interrupted", flush=True)
"""


def test_interrupting_a_notebook_cell_stops_the_run_it_started(
    tmp_path: Path, interrupt: Any
) -> None:
    out = tmp_path / "run.jsonl"
    # SIGINT is what the notebook's stop button sends
    stopped = interrupt(
        [sys.executable, "-c", NOTEBOOK, str(out), str(SIMULATIONS)],
        lambda: out.exists() and len(out.read_bytes().splitlines()) >= 8,
    )
    assert stopped.stdout == "the cell was interrupted\n"
    err = stopped.stderr
    on_disk = len(out.read_bytes().splitlines())
    # the run stopped where it was (before, it played on to its 200th rollout), said so, and
    # its sidecar says it did not finish
    assert on_disk < 200
    said = [line for line in err.splitlines() if line.startswith("whileai: stopped")]
    assert said == [
        f"whileai: stopped at {on_disk}/200 rollouts: the {on_disk} finished are in "
        f"output={str(out)!r}; the same simulate() call with resume=True, or whileai run "
        "CONFIG.toml --resume, continues it with the rest"
    ]
    assert json.loads(out.with_suffix(".meta.json").read_text())["complete"] is False
