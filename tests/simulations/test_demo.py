"""``whileai demo`` runs a real simulation offline on the embedded model and says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
@pytest.mark.plugins
def test_demo_measures_faults_off_against_on_offline_on_the_embedded_model(
    tmp_path: Path,
) -> None:
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
            "3",
            "--repeats",
            "1",
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
    for world in ("shop", "bank"):
        # the same situations, faults off then on, each run in a folder of its own
        assert f"== {world}, faults-off ==" in printed and f"== {world}, faults-on ==" in printed
        runs = {}
        for label in ("faults-off", "faults-on"):
            rows_file = out / world / label / "rows.jsonl"
            rows = [json.loads(x) for x in rows_file.read_text().splitlines()]
            assert len(rows) == 3
            assert {r["writer_model"] for r in rows} == {"template"}
            assert {r["world"] for r in rows} == {world}
            assert all(r["model_version"] for r in rows)
            assert all(r["judge_name"] == f"world:{world}" for r in rows if not r.get("error"))
            side = json.loads(rows_file.with_suffix(".meta.json").read_text())
            assert side["complete"] is True
            assert side["report"]["world"]["name"] == world
            runs[label] = rows
        assert not any(r["faults"] for r in runs["faults-off"])
        assert {r["task_id"] for r in runs["faults-off"]} == {
            r["task_id"] for r in runs["faults-on"]
        }
        # the comparison, paired by situation, with the markers and their intervals
        assert f"== {world}: faults on against faults off, paired by situation ==" in printed
        page = out / world / "report.html"
        assert f"HTML report: {page}" in printed
        html = page.read_text(encoding="utf-8")
        assert "<section id='compare'" in html and "faults_met" in html
    assert printed.count("headline (tool_errors*)") == 2
    assert "3 paired" in printed
    # the README's next steps on the demo's output: report a run, view it, compare two
    from whileai.cli import main

    on, off = (str(out / "bank" / label / "rows.jsonl") for label in ("faults-on", "faults-off"))
    assert main(["report", on, "--json"]) == 0
    assert main(["view", on, "--baseline", off, "--json"]) == 0
    assert (out / "bank" / "faults-on" / "rows.report.html").is_file()
    assert main(["compare", off, on, "--proxy", "marker:tool_errors", "--json"]) == 0
