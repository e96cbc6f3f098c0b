"""``wai.grade(rows, judge, output=)``: a rows file of any length graded into another in
bounded memory, written whole or not at all, and read back as the same result the rows in
memory give."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import whileai as wai
from whileai.graders import AHEAD_PER_SLOT, grade_each, graded_in_order, resolve_grader


def rows_file(path: Path, n: int, padding: int, *, graded: bool = False) -> Path:
    with path.open("w") as f:
        for i in range(n):
            s, r = divmod(i, 4)
            row: dict[str, Any] = {
                "prompt": f"What is {s} + {r}? " + "context " * padding,
                "final_text": str(s + r) if i % 3 else "no idea " + "x" * padding,
                "scenario_id": f"s{s}",
                "lineage": {"repeat": r, "rollout_key": f"s{s}/r{r}"},
            }
            if graded:
                row.update(reward=1.0, judge_name="old", judge_status="ok")
            f.write(json.dumps(row) + "\n")
    return path


def says_a_number(prompt: str, completion: str) -> float:
    return float(completion.strip().isdigit())


def test_a_rows_file_is_graded_into_a_file_as_the_rows_in_memory_are(tmp_path: Path) -> None:
    source = rows_file(tmp_path / "answers.jsonl", 200, 5)
    held = wai.grade(source, says_a_number)
    out = tmp_path / "graded.jsonl"
    streamed = wai.grade(source, says_a_number, output=out)

    # the same rows, the same report, and the file is the one save() writes
    assert list(streamed.rows) == list(held.rows)
    assert list(streamed.trajectories) == list(held.rows)
    assert streamed.report().to_dict() == held.report().to_dict()
    assert streamed.pass_at == held.pass_at
    assert [r["reward"] for r in streamed.rows][:4] == [0.0, 1.0, 1.0, 0.0]
    saved = held.save(tmp_path / "saved.jsonl")
    assert out.read_bytes() == saved.read_bytes()
    sidecar = json.loads((tmp_path / "graded.meta.json").read_text())
    assert sidecar == json.loads((tmp_path / "saved.meta.json").read_text())
    assert sidecar["report"]["n_graded"] == 200
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob("*.lock"))


def test_the_report_of_rows_graded_into_a_file_does_not_read_the_file_again(
    tmp_path: Path,
) -> None:
    # the counts are taken as the rows are written, and the pass rates read once (for the
    # sidecar): a report, or the repr asyncio.run formats of what it returns, read a
    # million-row file once more each
    source = rows_file(tmp_path / "answers.jsonl", 40, 1)
    out = tmp_path / "graded.jsonl"
    scored = wai.grade(source, says_a_number, output=out)
    out.rename(tmp_path / "moved.jsonl")
    report = scored.report()
    assert (report.n_rows, report.n_graded, report.status_counts) == (40, 40, {"ok": 40})
    assert report.pass_at.pass_at_1 == pytest.approx(
        wai.grade(source, says_a_number).pass_at.pass_at_1
    )
    assert repr(scored) == "<ScoredData by says_a_number: 40 rows, 40 graded, 0 judge errors>"
    with pytest.raises(FileNotFoundError, match="which is gone"):
        list(scored.rows)  # the rows themselves are read from the file, as they always were


def test_a_long_rows_file_is_graded_a_row_at_a_time(tmp_path: Path) -> None:
    def peak(padding: int) -> tuple[int, int]:
        source = rows_file(tmp_path / f"in-{padding}.jsonl", 2400, padding)
        out = tmp_path / f"out-{padding}.jsonl"
        tracemalloc.start()
        try:
            scored = wai.grade(source, says_a_number, output=out)
            top = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert scored.report().n_graded == 2400
        return top, source.stat().st_size + out.stat().st_size

    # (the first grading into a file imports what it reports with)
    wai.grade(rows_file(tmp_path / "warm.jsonl", 8, 1), says_a_number, output=tmp_path / "w")
    (short, short_bytes), (long, long_bytes) = peak(10), peak(600)
    # rows 60 times as long, in and out: graded into a list and saved, the peak grows by half
    # the extra bytes; graded a row at a time, by under 2% (the rows read ahead)
    extra = long_bytes - short_bytes
    assert long - short < extra / 20, (short, long, extra)


def test_grading_reads_a_bounded_number_of_rows_ahead() -> None:
    # counted, not timed: how far the reading runs ahead of the row handed on
    read = 0

    def rows() -> Any:
        nonlocal read
        for i in range(500):
            read += 1
            yield {"prompt": f"q{i}", "final_text": str(i)}

    async def slow(row: dict[str, Any]) -> float:
        await asyncio.sleep(0)
        return 1.0

    grader = resolve_grader(slow, wai.registry.get_registry())
    furthest = 0

    async def walk() -> int:
        nonlocal furthest
        handed = 0
        async for given, graded in graded_in_order(rows(), grader, 8):
            assert graded["prompt"] == given["prompt"] == f"q{handed}"  # in order
            furthest = max(furthest, read - handed)
            handed += 1
        return handed

    assert asyncio.run(walk()) == 500
    assert furthest <= 8 * AHEAD_PER_SLOT


def test_a_grading_stopped_part_way_leaves_the_output_as_it_was(tmp_path: Path) -> None:
    source = rows_file(tmp_path / "answers.jsonl", 40, 1)
    out = tmp_path / "graded.jsonl"
    out.write_text("the rows graded yesterday\n")

    def breaks_on_the_thirtieth(row: dict[str, Any]) -> Any:
        return "not a score" if row["scenario_id"] == "s7" and row["lineage"]["repeat"] == 2 else 1

    with pytest.raises(wai.RowError, match="row 30"):
        wai.grade(source, breaks_on_the_thirtieth, output=out)
    assert out.read_text() == "the rows graded yesterday\n"
    assert not list(tmp_path.glob(".*.tmp"))
    # the 30 rows graded before it (rows 0-29) are kept; a pass told to go on with another
    # judge drops them, and the lock went with the stopped pass: it writes the file
    kept = tmp_path / ".graded.jsonl.grading"
    assert len(kept.read_text().splitlines()) == 30
    again = wai.grade(source, says_a_number, output=out, resume=True)
    assert len(again) == 40 and not kept.exists()


def test_a_rows_file_is_graded_in_place(tmp_path: Path) -> None:
    path = rows_file(tmp_path / "run.jsonl", 12, 1, graded=True)
    scored = wai.grade(path, says_a_number, output=path)
    rewards = [json.loads(line)["reward"] for line in path.read_text().splitlines()]
    assert rewards == [r["reward"] for r in scored.rows] and 0.0 in rewards
    # the labels it replaced are said, counted as the rows were graded
    assert any("12 rows were graded before by old" in n for n in scored.report().notes)
    assert json.loads(path.with_suffix(".meta.json").read_text())["report"]["n_rows"] == 12


def test_run_judge_writes_its_rows_too(tmp_path: Path) -> None:
    source = rows_file(tmp_path / "answers.jsonl", 8, 1)
    out = tmp_path / "judged.jsonl"
    scored = wai.run_judge(source, says_a_number, version="v1", output=out)
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written == list(scored.rows)
    assert {r["judge_meta"]["version"] for r in written} == {"v1"}


def test_a_bad_output_is_refused_before_any_row_is_read(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="output= must be a file path"):
        wai.grade(tmp_path / "none.jsonl", says_a_number, output=3)  # type: ignore[arg-type]


def test_a_grading_pass_counts_its_rows_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = rows_file(tmp_path / "answers.jsonl", 12, 1)

    def fails_on_the_fifth(prompt: str, completion: str) -> float:
        if prompt.startswith("What is 1 + 0?"):
            raise ConnectionError("the judge's server went away")
        return says_a_number(prompt, completion)

    wai.grade(source, fails_on_the_fifth, output=tmp_path / "graded.jsonl")
    (line,) = capsys.readouterr().err.splitlines()
    # off a terminal, a line now and then and one at the end; a judge's error counts as one
    assert line.startswith("whileai: 12/12 rows graded, ") and line.endswith(", done, errors 1")
    assert "tokens" not in line  # a rollout's counts, not a grading pass's


GRADE_SLOWLY = """
import asyncio, os, pathlib, sys
import whileai as wai

started, asked = pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4])

async def slow_judge(prompt, completion):
    with asked.open("a") as f:
        f.write(prompt.split("?")[0] + "\\n")
    started.touch()
    await asyncio.sleep(float(os.environ.get("JUDGE_SLEEP", "0.05")))
    return 1.0

data = wai.grade(
    sys.argv[1], slow_judge, output=sys.argv[2], concurrency=1, resume="RESUME" in os.environ
)
print("\\n".join(data.notes))
"""


def grade_slowly(source: Path, out: Path, tmp_path: Path) -> list[str]:
    """The command line of a grading pass whose judge notes each prompt it is asked."""
    import sys

    started, asked = tmp_path / "started", tmp_path / "asked"
    return [sys.executable, "-c", GRADE_SLOWLY, str(source), str(out), str(started), str(asked)]


def stopped_part_way(source: Path, out: Path, tmp_path: Path, interrupt: Any) -> Any:
    """A grading pass of ``source`` into ``out`` stopped by Ctrl-C a few rows in."""
    asked = tmp_path / "asked"
    return interrupt(
        grade_slowly(source, out, tmp_path),
        lambda: asked.exists() and len(asked.read_text().splitlines()) >= 5,
    )


def a_stopped_pass(tmp_path: Path, interrupt: Any) -> tuple[Path, Path, Path, int]:
    """120 rows, their grading into graded.jsonl stopped a few rows in: the rows, the output,
    the kept file and how many rows it holds."""
    source = rows_file(tmp_path / "answers.jsonl", 120, 1)
    out = tmp_path / "graded.jsonl"
    stopped_part_way(source, out, tmp_path, interrupt)
    kept = tmp_path / ".graded.jsonl.grading"
    return source, out, kept, len(kept.read_text().splitlines())


def test_ctrl_c_mid_grading_says_the_output_is_as_it_was_and_where_its_grades_are(
    tmp_path: Path, interrupt: Any
) -> None:
    source = rows_file(tmp_path / "answers.jsonl", 400, 1)
    out = tmp_path / "graded.jsonl"
    out.write_text("the rows graded yesterday\n")
    stopped = stopped_part_way(source, out, tmp_path, interrupt)
    assert stopped.returncode != 0
    (said,) = [x for x in stopped.stderr.splitlines() if x.startswith("whileai: stopped")]
    kept = tmp_path / ".graded.jsonl.grading"
    n = len(kept.read_text().splitlines())
    assert 1 <= n < 400
    assert said.endswith(
        f"/400 rows graded: output={str(out)!r} is left as it was; the {n} graded rows are "
        f"kept in {str(kept)!r}: grading the same rows into the same output with the same "
        "judge and resume=True (whileai grade --resume) goes on after them"
    )
    assert out.read_text() == "the rows graded yesterday\n"
    assert not list(tmp_path.glob(".*.tmp"))


def test_grading_again_after_a_stop_asks_the_judge_only_for_the_rows_left(
    tmp_path: Path, interrupt: Any
) -> None:
    import os
    import subprocess

    source, out, kept, n = a_stopped_pass(tmp_path, interrupt)
    asked = tmp_path / "asked"
    asked.unlink()
    again = subprocess.run(
        grade_slowly(source, out, tmp_path),
        env={**os.environ, "JUDGE_SLEEP": "0", "RESUME": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    prompts = [json.loads(line)["prompt"].split("?")[0] for line in source.open()]
    # the judge was asked for the rows after the kept ones, each once
    assert asked.read_text().splitlines() == prompts[n:]
    assert f"went on after the {n} rows a stopped pass graded with this judge" in again.stdout
    graded = [json.loads(line) for line in out.open()]
    assert [r["prompt"].split("?")[0] for r in graded] == prompts
    assert len({r["lineage"]["rollout_key"] for r in graded}) == 120
    assert all(r["reward"] == 1.0 and r["judge_status"] == "ok" for r in graded)
    # nothing is kept once the output is whole
    assert not kept.exists() and not (tmp_path / ".graded.jsonl.grading.json").exists()


def test_a_row_a_kill_cut_short_is_graded_again_and_another_judge_starts_afresh(
    tmp_path: Path, interrupt: Any
) -> None:
    source, out, kept, n = a_stopped_pass(tmp_path, interrupt)
    # a kill part way through writing a row leaves its first half
    with kept.open("a") as f:
        f.write('{"prompt": "What is')
    calls: list[str] = []

    def another_judge(prompt: str, completion: str) -> float:
        calls.append(prompt)
        return 0.0

    # not asked to go on, a pass refuses rather than throw the kept grades away
    with pytest.raises(FileExistsError) as refused:
        wai.grade(source, another_judge, output=out)
    assert str(refused.value) == (
        f"output={str(out)!r}: a stopped grading pass kept {n} graded rows in {str(kept)!r}; "
        "pass resume=True (whileai grade --resume) to go on after them with the same judge, "
        "or remove that file to grade every row afresh"
    )
    assert calls == []
    data = wai.grade(source, another_judge, output=out, resume=True)
    # the kept grades were another judge's: every row is asked of this one
    assert len(calls) == 120
    assert any(
        f"{n} graded rows a stopped pass kept were dropped: they were graded by another judge"
        == note
        for note in data.notes
    )
    assert [r["reward"] for r in data.rows] == [0.0] * 120


def test_a_grading_pass_in_memory_stopped_part_way_says_its_rows_are_gone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # wai.grade without output= and data.grade(judge=) grade in memory: a task cancelled part
    # way (the cell's interrupt, a timeout around it) says what it lost and what again costs
    rows = [{"prompt": f"q{i}", "final_text": str(i)} for i in range(200)]

    async def slow(prompt: str, completion: str) -> float:
        await asyncio.sleep(0.01)
        return 1.0

    async def stop_part_way() -> None:
        grading = asyncio.ensure_future(
            grade_each(rows, resolve_grader(slow, wai.Registry.from_plugins()), 4)
        )
        await asyncio.sleep(0.2)
        grading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await grading

    asyncio.run(stop_part_way())
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("whileai: stop")]
    assert line.startswith("whileai: stopped at ") and line.endswith(
        "/200 rows graded: the graded rows were held in memory and are gone; grading again "
        "asks the judge again, except what a response cache holds (cache=, or WHILEAI_CACHE)"
    )


def test_a_full_disk_part_way_keeps_the_rows_graded_so_far(tmp_path: Path) -> None:
    import subprocess
    import sys

    source = rows_file(tmp_path / "answers.jsonl", 200, 10)
    out = tmp_path / "graded.jsonl"
    out.write_text("the rows graded yesterday\n")
    # a file size limit stands in for a full disk (SIGXFSZ ignored: past the limit a write
    # fails with EFBIG rather than the signal killing the process)
    script = (
        "import resource, signal, sys\n"
        "import whileai as wai\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "if len(sys.argv) > 3:\n"
        "    resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))\n"
        "data = wai.grade(\n"
        "    sys.argv[1], lambda prompt, completion: 1.0, output=sys.argv[2], resume=True\n"
        ")\n"
        "print(data.notes[-1])\n"
    )
    full = subprocess.run(
        [sys.executable, "-c", script, str(source), str(out), "a full disk"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert full.returncode == 1
    kept = tmp_path / ".graded.jsonl.grading"
    # the rows written whole (the last one's write was cut short by the limit)
    n = kept.read_bytes().count(b"\n")
    assert 0 < n < 200
    assert full.stderr.strip().splitlines()[-1] == (
        f"OSError: [Errno 27] row {n + 1}: output={str(out)!r} is left as it was; the {n} "
        f"graded rows are kept in {str(kept)!r}: grading the same rows into the same output "
        "with the same judge and resume=True (whileai grade --resume) goes on after them: "
        "File too large"
    )
    assert out.read_text() == "the rows graded yesterday\n"
    # with room again, the same grading goes on after the rows kept, the cut one graded again
    again = subprocess.run(
        [sys.executable, "-c", script, str(source), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == (
        f"went on after the {n} rows a stopped pass graded with this judge: the judge was "
        "asked for the rest only"
    )
    graded = [json.loads(line) for line in out.open()]
    assert [r["lineage"]["rollout_key"] for r in graded] == [
        json.loads(line)["lineage"]["rollout_key"] for line in source.open()
    ]


def test_a_pass_stopped_before_its_first_row_leaves_nothing_in_the_way(tmp_path: Path) -> None:
    source = rows_file(tmp_path / "answers.jsonl", 8, 1)
    out = tmp_path / "graded.jsonl"

    def refuses_every_row(row: dict[str, Any]) -> Any:
        return "not a score"

    with pytest.raises(wai.RowError, match="row 0"):
        wai.grade(source, refuses_every_row, output=out)
    # no grade was kept, so nothing is asked about: the next pass grades every row
    assert len(wai.grade(source, says_a_number, output=out)) == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "answers.jsonl",
        "graded.jsonl",
        "graded.meta.json",
    ]


def test_a_kept_row_not_as_a_pass_writes_it_is_not_taken(tmp_path: Path) -> None:
    # the kept file is one anyone who can write beside the output could have written: a row
    # in it carrying a privileged block (or a reward no row may carry) is not taken on resume
    source = rows_file(tmp_path / "answers.jsonl", 40, 1)
    out = tmp_path / "graded.jsonl"
    stop = [True]

    def judge(row: dict[str, Any]) -> Any:
        return "not a score" if stop[0] and row["scenario_id"] == "s7" else 1

    with pytest.raises(wai.RowError):
        wai.grade(source, judge, output=out)
    kept = tmp_path / ".graded.jsonl.grading"
    lines = kept.read_text().splitlines()
    forged = {**json.loads(lines[0]), "privileged": {"reference": "leaked"}}
    kept.write_text("\n".join([json.dumps(forged), *lines[1:]]) + "\n")
    stop[0] = False
    data = wai.grade(source, judge, output=out, resume=True)
    assert any("row 0 is not a row as a grading pass writes one" in n for n in data.notes)
    assert "leaked" not in out.read_text()
    assert len(data.rows) == 40
