"""A run with ``output=`` streams: each row goes to disk and is let go, and ``data.rows``,
``data.trajectories`` and every measurement read the file back, giving what a run held in
memory gives. Rows in memory are counted (``gc``), never timed."""

from __future__ import annotations

import gc
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import sim_doubles as d

import whileai as wai
from whileai import hookimpl
from whileai.schema.stored import StoredRows
from whileai.simulations.attribution import owner_shares


def live_rows() -> int:
    """Rollout rows alive in this process (trajectories and exported rows alike)."""
    return sum(
        1
        for o in gc.get_objects()
        if type(o) is dict and "steps" in o and "lineage" in o and "scenario_id" in o
    )


class RowCounter:
    """Counts the rows alive each time the 100th, 200th, ... rollout finishes."""

    def __init__(self) -> None:
        self.alive: list[int] = []

    @hookimpl
    def whileai_rollout_finished(
        self, run_id: str, row: Mapping[str, Any], done: int, total: int
    ) -> None:
        if done % 100 == 0:
            self.alive.append(live_rows())


def without_run(rows: Any) -> list[dict[str, Any]]:
    """Rows with the run id (which differs from run to run) taken out."""
    out = []
    for row in rows:
        row = {k: v for k, v in row.items() if k != "run_id"}
        row["lineage"] = {k: v for k, v in row["lineage"].items() if k != "run_id"}
        out.append(row)
    return out


def run(tmp_path: Path | None, *plugins: object, **params: Any) -> wai.Simulation:
    knobs = {**d.BASE, "seed": 3, **params}
    if tmp_path is not None:
        knobs["output"] = str(tmp_path / "rows.jsonl")
    return wai.simulate(registry=d.registry(*plugins), **knobs)


def test_a_streamed_run_keeps_a_bounded_number_of_rows_in_memory(tmp_path: Path) -> None:
    gc.collect()
    before = live_rows()
    kept, streamed = RowCounter(), RowCounter()
    run(None, kept, unique=50, repeats=12, advanced={**d.BASE["advanced"], "max_concurrency": 8})
    run(
        tmp_path,
        streamed,
        unique=50,
        repeats=12,
        advanced={**d.BASE["advanced"], "max_concurrency": 8},
    )
    # held in memory, a run keeps every row and its exported copy: the count grows with it
    assert kept.alive[-1] - before >= 2 * 600
    # streamed, it holds the rollouts in flight and the one being announced, however far on
    assert len(streamed.alive) == 6
    assert max(streamed.alive) - before <= 2 * 8 + 4, streamed.alive


def test_a_resumed_run_reads_the_rows_it_finds_one_at_a_time(tmp_path: Path) -> None:
    # a long run killed part way holds many rows; resuming it must not load them all: the
    # memory a resume takes grows with the rows it finds by their counts (a key, an offset, a
    # tally entry), not by the rows. Measured in bytes allocated (tracemalloc), not timed.
    import shutil
    import tracemalloc

    run(tmp_path, unique=400, repeats=4)
    whole = tmp_path / "rows.jsonl"
    lines = whole.read_bytes().splitlines(keepends=True)
    row_bytes = len(b"".join(lines)) / len(lines)

    def resumed_peak(kept: int) -> int:
        """Bytes at the peak of resuming the run killed after ``kept`` rows."""
        folder = tmp_path / f"killed-{kept}"
        folder.mkdir()
        shutil.copy(tmp_path / "rows.meta.json", folder / "rows.meta.json")
        (folder / "rows.jsonl").write_bytes(b"".join(lines[:kept]) + lines[kept][:40])
        gc.collect()
        tracemalloc.start()
        try:
            data = run(folder, unique=400, repeats=4, resume=True)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert len(data.rows) == 1600
        assert len({r["lineage"]["rollout_key"] for r in data.rows}) == 1600
        return peak

    few, many = resumed_peak(200), resumed_peak(1400)
    per_row = (many - few) / 1200
    # a row read and held costs several times its line; one counted and let go, a fraction
    assert per_row < row_bytes / 2, (per_row, row_bytes)


def test_rows_trajectories_and_the_report_match_a_run_held_in_memory(tmp_path: Path) -> None:
    params: dict[str, Any] = {"unique": 6, "repeats": 4, "phrasings": 2, "max_turns": 3}
    memory, streamed = run(None, **params), run(tmp_path, **params)
    assert isinstance(streamed.rows, StoredRows) and streamed.rows() is streamed.rows
    assert len(streamed) == len(memory) == 48
    assert without_run(streamed.rows) == without_run(memory.rows)
    # in plan order, as memory's are; the file holds the same rows in the order they ended
    on_disk = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert sorted(json.dumps(r, sort_keys=True) for r in on_disk) == sorted(
        json.dumps(r, sort_keys=True) for r in streamed.rows
    )
    # trajectories are the rows with the privileged block (and vector) put back
    for mem, back in zip(memory.trajectories, streamed.trajectories, strict=True):
        assert back["privileged"] == mem["privileged"]
        assert back["vector"] == mem["vector"]
        assert back["reward"] == mem["reward"] and back["steps"] == mem["steps"]
    ours, theirs = streamed.report().to_dict(), memory.report().to_dict()
    for changes in ("run_id", "output"):
        ours.pop(changes), theirs.pop(changes)
    assert ours == theirs


def test_every_measurement_reads_a_streamed_run_as_it_reads_one_in_memory(
    tmp_path: Path,
) -> None:
    params: dict[str, Any] = {"unique": 8, "repeats": 4, "phrasings": 2}
    memory, streamed = run(None, **params), run(tmp_path, **params)
    same = [
        lambda data: wai.pass_at(data).to_dict(),
        lambda data: wai.pass_at(data, k=2).to_dict(),
        lambda data: wai.group_signal(data).to_dict(),
        lambda data: wai.metric_summary(data).to_dict(),
        lambda data: wai.marker_summary(data).to_dict(),
        lambda data: data.pass_at.to_dict(),
    ]
    for measure in same:
        assert measure(streamed) == measure(memory)
    assert wai.compare(streamed, memory).to_dict()["delta"] == 0.0


def test_the_checks_and_the_two_run_comparisons_read_a_streamed_run_as_one_in_memory(
    tmp_path: Path,
) -> None:
    params: dict[str, Any] = {"unique": 8, "repeats": 4, "phrasings": 2}
    first = {"memory": run(None, **params), "streamed": run(tmp_path / "a", **params)}
    # the same situations played by an agent that fails more: the comparisons pair them
    other = {**params, "agent_model": "fake:flaky-agent"}
    second = {"memory": run(None, **other), "streamed": run(tmp_path / "b", **other)}
    prompts = [r["prompt"] for r in first["memory"].rows][::5]

    def measured(kind: str) -> dict[str, Any]:
        a, b = first[kind], second[kind]
        kept = wai.select(a)
        clean = wai.decontaminate(a, prompts, n=4)
        return {
            "compare_runs": wai.compare_runs(a, b).to_dict(),
            "delta_report": wai.delta_report(a, b).to_dict(),
            "eval_variance": wai.eval_variance(a, b).to_dict(),
            "judge_trust": wai.judge_trust(a).to_dict(),
            "logprob_report": wai.logprob_report(a).to_dict(),
            "staleness_report": wai.staleness_report(a, "fake-agent-1").to_dict(),
            "refusal_report": wai.refusal_report(a).to_dict(),
            "trace_flag_report": wai.trace_flag_report(a).to_dict(),
            "select": (kept.to_dict(without=("rows",)), without_run(kept.rows)),
            "decontaminate": (
                clean.to_dict(without=("clean", "contaminated")),
                without_run(clean.clean),
            ),
            "export": wai.export(a),
        }

    in_memory, streamed = measured("memory"), measured("streamed")
    # each has something to say about these runs
    assert in_memory["compare_runs"]["metrics"]["reward"]["n_paired"] == 16
    assert in_memory["eval_variance"]["n_runs"] == 2
    assert in_memory["staleness_report"]["n_current"] == 64
    assert in_memory["select"][1] and in_memory["decontaminate"][0]["n_contaminated"] > 0
    for name, value in in_memory.items():
        assert streamed[name] == value, name


def test_the_report_counts_what_the_measurements_count(tmp_path: Path) -> None:
    streamed = run(tmp_path, unique=5, repeats=4, phrasings=3, repeat_policy="rl")
    report = streamed.report()
    assert (
        report.pass_at.to_dict() == wai.pass_at(list(streamed.rows), repeat_policy="rl").to_dict()
    )
    assert report.failures == owner_shares(list(streamed.rows))
    assert report.n_traces == len(list(streamed.trajectories))


def test_stored_rows_read_like_a_list_and_say_when_their_file_is_gone(tmp_path: Path) -> None:
    streamed = run(tmp_path, unique=2, repeats=3)
    rows = streamed.rows
    assert rows[-1] == list(rows)[-1] and rows[1:3] == list(rows)[1:3]
    assert rows + [rows[0]] == [*rows, rows[0]]  # noqa: RUF005 (the sequence's own +)
    assert [rows[0]] + rows == [rows[0], *rows]  # noqa: RUF005 (a list of earlier rows first)
    with pytest.raises(TypeError):
        "rows: " + rows
    # each read is a fresh dict: changing one changes nothing
    rows[0]["reward"] = "changed"
    assert rows[0]["reward"] != "changed"
    with pytest.raises(IndexError, match="row 6 of 6"):
        rows[6]
    (tmp_path / "rows.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="read from its output"):
        list(rows)


def test_the_tally_gives_the_measurements_numbers_whatever_order_rows_finish_in() -> None:
    import random

    from whileai.simulations.tally import RunTally

    rows = [dict(r) for r in run(None, unique=6, repeats=4, phrasings=2).rows]
    # partial rewards, a judge that errored and one that skipped, an owner on every failure
    for i, row in enumerate(rows):
        if i % 7 == 0:
            row["reward"] = 0.5
        if i % 11 == 0:
            row["judge_status"] = "error"
        if i % 13 == 0:
            row["judge_status"] = "skipped"
        if row["reward"] == 0:
            row["failure_owner"] = {"owner": ("agent", "world")[i % 2], "source": "rules"}
    shuffled = random.Random(4).sample(rows, len(rows))
    tally = RunTally.of(shuffled)
    assert tally.pass_at("fixed").to_dict() == wai.pass_at(rows, repeat_policy="fixed").to_dict()
    shares = tally.owner_shares()
    assert shares is not None and shares["failed"] > 0
    assert shares == owner_shares(rows)
    by_task: dict[str, list[float]] = {}
    for row in rows:
        if row["reward"] in (0, 1):
            by_task.setdefault(row["scenario_id"], []).append(row["reward"])
    split = {k: sum(v) / len(v) for k, v in by_task.items() if 0 < sum(v) < len(v)}
    assert split and tally.split_groups() == split
    assert [shuffled[i] for i in tally.plan_order()] == rows


def test_a_run_whose_strategy_reads_no_vectors_takes_them_only_when_trajectories_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from whileai.simulations import behavior

    taken: list[str] = []
    real = behavior.situation_vector

    def counted(text: str) -> list[float]:
        taken.append(text)
        return real(text)

    monkeypatch.setattr(behavior, "situation_vector", counted)
    streamed = run(tmp_path, unique=5, repeats=3)
    # the even spread neither filters nor learns: nothing read a vector while it played
    assert taken == []
    trajectories = list(streamed.trajectories)
    # a situation's rollouts are read one after another, and the vector taken for the first
    # serves the rest (only the last one is kept): 15 rows, 5 vectors
    assert len(taken) == 5
    for row in trajectories:
        text = behavior.situation_text(row["prompt"], row["scenario_dimensions"])
        assert row["vector"] == real(text)
    # read backwards, each row still gets its own situation's vector: the last situation's
    # is the one kept, and the other four are taken again
    taken.clear()
    backwards = [streamed.trajectories[i] for i in reversed(range(15))]
    assert [r["vector"] for r in backwards] == [r["vector"] for r in reversed(trajectories)]
    assert len(taken) == 4
    # and a vector a reader changes is its own copy
    backwards[0]["vector"][0] = 99.0
    assert streamed.trajectories[14]["vector"] == trajectories[14]["vector"]
    taken.clear()
    # held in memory, the run takes no vector either, not for its report nor its repr
    memory = run(None, unique=5, repeats=3)
    assert memory.report().n_traces == 15 and "15 rollouts" in repr(memory)
    assert taken == []
    # reading the trajectories takes each situation's vector once, one list shared by the
    # situation's rows, and reading them again takes none
    assert [r["vector"] for r in memory.trajectories] == [r["vector"] for r in trajectories]
    assert len(taken) == 5
    held = list(memory.trajectories)
    assert held[0]["vector"] is held[1]["vector"] is held[2]["vector"]
    assert held[2]["vector"] is not held[3]["vector"]
    assert memory.trajectories[-1] is held[-1] and memory.trajectories[3:5] == held[3:5]
    with pytest.raises(IndexError, match="trajectory 15 of 15"):
        memory.trajectories[15]
    assert len(taken) == 5
    # a change to a trajectory held in memory stays: it is the same dict on every read
    del held[0]["vector"]
    assert "vector" not in memory.trajectories[0]


def test_a_path_that_starts_with_a_tilde_is_read_as_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as a shell reads it: Python's own file functions would make a folder named "~" in the
    # working directory
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    data = run(None, output="~/runs/first.jsonl")
    written = home / "runs" / "first.jsonl"
    assert data.output == str(written)
    assert len(written.read_text().splitlines()) == len(data.rows) > 0
    assert wai.pass_at("~/runs/first.jsonl").pass_at_1 == data.pass_at.pass_at_1
    assert wai.load("~/runs/first.jsonl") == list(data.rows)
    assert data.save("~/saved.jsonl") == home / "saved.jsonl"
    assert wai.export("~/saved.jsonl", path="~/train.jsonl").path == home / "train.jsonl"
    assert wai.html_report("~/runs/first.jsonl", "~/page.html") == home / "page.html"
    graded = wai.grade(data, lambda row: 1.0, output="~/graded.jsonl")
    assert len((home / "graded.jsonl").read_text().splitlines()) == len(graded.rows)
    from whileai.cli import main

    assert main(["report", "~/runs/first.jsonl", "--json"]) == 0  # quoted, so no shell expands it
    assert list(work.iterdir()) == []
