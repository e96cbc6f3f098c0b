"""A simulation killed with SIGKILL mid-run, or stopped by a full disk, resumes without
duplicating or losing a row."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parent / "resume_script.py"
PLANNED = 40


def keys_in(path: Path) -> list[str]:
    return [json.loads(line)["lineage"]["rollout_key"] for line in path.read_text().splitlines()]


def resumed(out: Path) -> list[str]:
    """Resume the run at ``out`` to its end; its rollout keys, each planned one there once."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--resume"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert done.stdout.strip() == str(PLANNED)
    keys = keys_in(out)
    assert len(keys) == len(set(keys)) == PLANNED
    side = json.loads(out.with_suffix(".meta.json").read_text())
    assert side["complete"] is True and side["report"]["n_traces"] == PLANNED
    return keys


def test_sigkill_mid_run_then_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.jsonl"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(out)], stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_bytes().splitlines()) >= 8:
                break
            if proc.poll() is not None:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    before = keys_in(out) if out.read_text().endswith("\n") else None
    cut = len(out.read_bytes().splitlines())
    assert 8 <= cut < PLANNED
    side = json.loads((tmp_path / "run.meta.json").read_text())
    assert side["complete"] is False
    if before is not None:
        # (a line cut by the kill is an error the report names: test_cli covers that)
        from whileai.cli import main

        assert main(["report", str(out)]) == 0
        assert (
            "  (the run did not finish: the same simulate() call with resume=True, or whileai "
            "run CONFIG.toml --resume, continues it)"
        ) in capsys.readouterr().out.splitlines()
        page = tmp_path / "killed.html"
        assert main(["view", str(out), "--out", str(page)]) == 0
        assert (
            "The run did not finish: the same <code>simulate()</code> call with "
            "<code>resume=True</code>, or <code>whileai run CONFIG.toml --resume</code>, "
            "continues it."
        ) in page.read_text(encoding="utf-8")
        page.unlink()

    keys = resumed(out)
    if before is not None:
        assert keys[: len(before)] == before  # rows written before the kill are kept as they were


def test_ctrl_c_mid_run_says_what_is_on_disk_and_how_to_go_on(
    tmp_path: Path, interrupt: Any
) -> None:
    out = tmp_path / "run.jsonl"
    # SIGINT is what Ctrl-C sends
    stopped = interrupt(
        [sys.executable, str(SCRIPT), str(out)],
        lambda: out.exists() and len(out.read_bytes().splitlines()) >= 8,
    )
    assert stopped.returncode != 0
    on_disk = len(out.read_bytes().splitlines())
    assert 8 <= on_disk < PLANNED and out.read_bytes().endswith(b"\n")
    err = stopped.stderr
    said = [line for line in err.splitlines() if line.startswith("whileai: stopped")]
    assert said == [
        f"whileai: stopped at {on_disk}/{PLANNED} rollouts: the {on_disk} finished are in "
        f"output={str(out)!r}; the same simulate() call with resume=True, or whileai run "
        "CONFIG.toml --resume, continues it with the rest"
    ]
    assert err.rstrip().endswith("KeyboardInterrupt")
    assert json.loads((tmp_path / "run.meta.json").read_text())["complete"] is False
    resumed(out)


def test_a_run_held_in_memory_says_its_rows_are_gone_when_stopped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import asyncio

    import sim_doubles as d

    import whileai as wai

    async def stop_part_way() -> None:
        run = asyncio.ensure_future(
            wai.asimulate(
                registry=d.registry(),
                agent_model="fake:slow-agent",
                user_model="fake:user",
                unique=10,
                advanced={"world": "tinyshop", "max_concurrency": 1},
            )
        )
        await asyncio.sleep(0.3)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(stop_part_way())
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("whileai: stopped")]
    assert line.endswith(
        "rollouts: its rows were held in memory only (no output=) and are gone; a run given "
        "output= keeps each row on disk as it finishes"
    )


def test_a_disk_that_fills_mid_run_names_the_output_and_resume_plays_the_rest(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run.jsonl"
    limit = 24_000  # the sidecar and a few rows fit; the run's 40 rows do not

    def small_disk() -> None:
        # a file size limit stands in for a full disk: past it, a write fails with EFBIG
        # (SIGXFSZ ignored, as the default would kill the run instead of failing the write)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    stopped = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=small_disk,
    )
    assert stopped.returncode != 0
    last = stopped.stderr.strip().splitlines()[-1]
    on_disk = len(out.read_bytes().split(b"\n")) - 1  # whole lines; the cut one has no newline
    assert 0 < on_disk < PLANNED
    assert last == (
        f"OSError: [Errno 27] output={str(out)!r}: row {on_disk + 1} could not be written "
        f"(the {on_disk} before it are on disk; once the cause is fixed, the same call with "
        "resume=True plays the rest): File too large"
    )
    assert not out.read_bytes().endswith(b"\n")  # the row that did not fit, cut short
    assert json.loads((tmp_path / "run.meta.json").read_text())["complete"] is False

    resumed(out)


def test_an_output_inside_a_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    import sim_doubles as d

    import whileai as wai

    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a folder\n")
    out = blocker / "run.jsonl"
    with pytest.raises(FileExistsError) as caught:
        wai.simulate(
            registry=d.registry(),
            agent_model="fake:agent",
            user_model="fake:user",
            unique=1,
            output=str(out),
            advanced={"world": "tinyshop"},
        )
    assert str(caught.value) == (
        f"[Errno 17] output={str(out)!r} cannot be written: {str(blocker)!r} is a file, "
        "not a folder"
    )


def test_a_folder_given_for_the_rows_file_is_named_with_the_files_in_it(tmp_path: Path) -> None:
    import sim_doubles as d

    import whileai as wai

    wai.simulate(
        registry=d.registry(), **d.BASE, unique=1, repeats=1, output=str(tmp_path / "a.jsonl")
    )
    said = f"{str(tmp_path)!r} is a folder, not a file of rows: name the JSONL file itself"
    with pytest.raises(IsADirectoryError) as caught:
        wai.simulate(registry=d.registry(), **d.BASE, unique=1, output=str(tmp_path))
    assert str(caught.value) == f"output: {said} (it holds a.jsonl)"
    with pytest.raises(IsADirectoryError) as caught:
        wai.pass_at(str(tmp_path))
    assert str(caught.value) == f"rows: {said} (it holds a.jsonl)"
