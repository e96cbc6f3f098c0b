"""``whileai demo`` runs a real simulation offline on the embedded model and says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
@pytest.mark.plugins
def test_demo_runs_offline_on_the_embedded_model(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "whileai.cli",
            "demo",
            "--out",
            str(out),
            "--situations",
            "2",
            "--repeats",
            "2",
            "--max-turns",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    printed = result.stdout
    assert "templates" in printed  # the output says who wrote the situations
    assert "pass@1" in printed and "faults fired" in printed
    # one run per built-in world, each in a folder of its own
    assert "== shop ==" in printed and "== bank ==" in printed
    for world in ("shop", "bank"):
        rows = [json.loads(x) for x in (out / world / "rows.jsonl").read_text().splitlines()]
        assert len(rows) == 4
        assert {r["writer_model"] for r in rows} == {"template"}
        assert {r["world"] for r in rows} == {world}
        assert all(r["model_version"] for r in rows)
        assert all(r["judge_name"] == f"world:{world}" for r in rows if not r.get("error"))
        side = json.loads((out / world / "rows.meta.json").read_text())
        assert side["complete"] is True
        assert side["report"]["world"]["name"] == world
    # the README's next steps on the demo's output: report a run, compare two
    from whileai.cli import main

    assert main(["report", str(out / "bank" / "rows.jsonl"), "--json"]) == 0
    rows = str(out / "bank" / "rows.jsonl")
    assert main(["compare", rows, rows, "--json"]) == 0
