"""wai.grade on what simulate() returns and writes: the run in memory (privileged there for
the judge) and the file its output= and save() write."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import whileai as wai

# the engine's deterministic doubles (a mock shop world, fake agent and user backends)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulations"))
import sim_doubles as d


def simulate(**kwargs: Any) -> Any:
    return wai.simulate(registry=d.registry(), **{**d.BASE, "unique": 2, "repeats": 2, **kwargs})


def knows_the_hidden_state(row: dict[str, Any]) -> float:
    """A judge that reads what only the grader may see."""
    return float(bool(row["privileged"]["hidden_state"]))


def test_a_run_in_memory_is_graded_with_its_privileged_block() -> None:
    data = simulate()
    scored = wai.grade(data, knows_the_hidden_state, registry=d.registry())

    assert len(scored) == len(data.trajectories) == 4
    assert {r["judge_status"] for r in scored.rows} == {"ok"}
    assert [r["reward"] for r in scored.rows] == [1.0] * 4
    assert all("privileged" not in r for r in scored.rows)
    assert "hidden_state" in scored.trajectories[0]["privileged"]
    assert scored.metadata["run_id"] == data.metadata["run_id"]
    assert scored.report().source == f"run {data.metadata['run_id']}"
    # the run's own world labels were replaced, and the report says by which judge
    assert any("graded before by world:tinyshop" in n for n in scored.report().notes)


@pytest.mark.parametrize("how", ["output", "save"])
def test_a_saved_run_is_graded_from_its_file(tmp_path: Path, how: str) -> None:
    path = tmp_path / "run.jsonl"
    if how == "output":
        data = simulate(output=str(path))
    else:
        data = simulate()
        data.save(path)

    def says_shipped(prompt: str, completion: str) -> bool:
        return "shipped" in completion

    scored = wai.grade(path, says_shipped, registry=d.registry())

    assert len(scored) == len(data.rows)
    assert [r["scenario_id"] for r in scored.rows] == [r["scenario_id"] for r in data.rows]
    assert [r["reward"] for r in scored.rows] == [
        float("shipped" in r["final_text"]) for r in data.rows
    ]
    assert scored.metadata["run_id"] == data.metadata["run_id"]
    assert scored.pass_at.pass_at_1 == wai.pass_at(scored.rows).pass_at_1

    # a graded file is a run file too: its sidecar names the judge, and it grades again
    out = scored.save(tmp_path / "graded.jsonl")
    sidecar = json.loads((tmp_path / "graded.meta.json").read_text())
    assert sidecar["metadata"]["judge"] == scored.rows[0]["judge_name"]
    assert sidecar["report"]["n_rows"] == len(scored)
    again = wai.grade(out, says_shipped, registry=d.registry())
    assert [r["reward"] for r in again.rows] == [r["reward"] for r in scored.rows]


def test_a_streamed_run_is_graded_into_a_file_with_its_privileged_block(tmp_path: Path) -> None:
    # a long run streamed to disk, graded again by a judge that reads the hidden state: the
    # run's trajectories put each situation's privileged block back as they are read, and the
    # graded rows go to their own file, so neither side holds the run
    data = simulate(output=str(tmp_path / "run.jsonl"))
    scored = wai.grade(
        data, knows_the_hidden_state, registry=d.registry(), output=tmp_path / "graded.jsonl"
    )
    assert [r["reward"] for r in scored.rows] == [1.0] * len(data.rows)
    written = (tmp_path / "graded.jsonl").read_text()
    assert '"privileged"' not in written and '"hidden_state"' not in written
    assert [json.loads(line)["lineage"] for line in written.splitlines()] == [
        r["lineage"] for r in data.rows
    ]
    assert scored.metadata["run_id"] == data.metadata["run_id"]


def test_a_run_graded_again_in_memory_counts_its_rows_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = simulate()
    capsys.readouterr()  # the run's own progress line
    regraded = data.grade(knows_the_hidden_state)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("whileai: 4/4 rows graded, ") and line.endswith(", done, errors 0")
    assert [r["reward"] for r in regraded.trajectories] == [1.0] * 4
