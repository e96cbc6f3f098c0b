"""wai.rank on what simulate() produced: the run object, and the file a run streamed to."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sim_doubles as d

import whileai as wai


class ReadsTheRubric:
    """A ranking judge that records whether the privileged block reached it."""

    name = "reads-rubric"
    version = "reads-rubric@1"

    def __init__(self) -> None:
        self.saw_privileged: list[bool] = []

    def compare(self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]) -> str:
        self.saw_privileged.append("privileged" in row_a and "privileged" in row_b)
        return "A" if len(row_a["final_text"]) > len(row_b["final_text"]) else "tie"


def test_rank_a_run_and_the_file_it_wrote(tmp_path: Path) -> None:
    output = tmp_path / "run.jsonl"
    data = wai.simulate(registry=d.registry(), unique=2, repeats=3, seed=4, output=output, **d.BASE)
    rewards = [row["reward"] for row in data.rows]

    # the run object: its trajectories are compared, privileged block and all
    judge = ReadsTheRubric()
    report = wai.rank(data, judge=judge, output=tmp_path / "ranked.jsonl")
    assert judge.saw_privileged and all(judge.saw_privileged)
    assert report.n_rows == 6 and report.n_groups == 2 and report.n_ranked == 6
    written = [json.loads(line) for line in (tmp_path / "ranked.jsonl").read_text().splitlines()]
    assert all("privileged" not in row for row in written)  # the file went through export_row
    sidecar = json.loads((tmp_path / "ranked.meta.json").read_text())
    assert sidecar["metadata"]["run_id"] == data.metadata["run_id"]
    assert sidecar["ranking"]["ranker"] == "reads-rubric"

    # the file the run streamed: rewritten in place, reward untouched, sidecar kept
    report = wai.rank(output, judge=ReadsTheRubric())
    on_disk = [json.loads(line) for line in output.read_text().splitlines()]
    assert [row["reward"] for row in on_disk] == rewards
    assert all(0 <= row["quality"] <= 1 for row in on_disk)
    side = json.loads(output.with_suffix(".meta.json").read_text())
    assert side["complete"] is True and side["ranking"]["n_ranked"] == 6
    assert side["metadata"]["run_id"] == data.metadata["run_id"]
