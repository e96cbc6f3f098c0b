"""A simulation killed with SIGKILL mid-run resumes without duplicating or losing a row."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "resume_script.py"
PLANNED = 40


def keys_in(path: Path) -> list[str]:
    return [json.loads(line)["lineage"]["rollout_key"] for line in path.read_text().splitlines()]


def test_sigkill_mid_run_then_resume(tmp_path: Path) -> None:
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
    if before is not None:
        assert keys[: len(before)] == before  # rows written before the kill are kept as they were
    side = json.loads((tmp_path / "run.meta.json").read_text())
    assert side["complete"] is True and side["report"]["n_traces"] == PLANNED
