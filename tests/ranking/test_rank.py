"""wai.rank: quality within each task's group from a pairwise judge, reward untouched.

The judges here are registered through ``whileai_register_judges``, as a third-party ranking
judge would be; each implements the ranking protocol, ``compare(row_a, row_b)``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

import whileai as wai
from whileai import hookimpl
from whileai.hookspecs import Register
from whileai.ranking import Preference
from whileai.registry import Registry


class LongerReply:
    """Prefers the longer reply: the row marked best in each group below is the longest."""

    name = "longer"
    version = "longer@1"
    model = "rule:length"

    def __init__(self) -> None:
        self.calls = 0

    def compare(self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]) -> str:
        self.calls += 1
        a, b = len(row_a["final_text"]), len(row_b["final_text"])
        return "A" if a > b else "B" if b > a else "tie"


class AlwaysA:
    """Prefers whichever reply it reads first: pure position bias."""

    name = "first-read"
    version = "first-read@1"

    def compare(self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]) -> str:
        return "A"


class Fragile(LongerReply):
    """Like LongerReply, but its model call fails whenever a reply says 'boom'."""

    name = "fragile"

    def compare(self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]) -> str:
        if "boom" in row_a["final_text"] + row_b["final_text"]:
            raise ConnectionError("judge model unreachable")
        return super().compare(row_a, row_b)


class BothOrders:
    """An async judge that asks both orders itself and says so (``both_orders``)."""

    name = "both"
    version = "both@1"
    both_orders = True

    async def compare(self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]) -> Preference:
        await asyncio.sleep(0)
        longer = "A" if len(row_a["final_text"]) >= len(row_b["final_text"]) else "B"
        return Preference(longer, "longer is better", flipped=False, meta={"version": "both@2"})


class RankingJudges:
    @hookimpl
    def whileai_register_judges(self, register: Register) -> None:
        register("longer", LongerReply, description="prefers the longer reply")
        register("first-read", AlwaysA, description="always prefers reply A")
        register("fragile", Fragile, description="fails on 'boom'")
        register("both", BothOrders, description="asks both orders itself")
        register("grader", lambda: lambda row: wai.Verdict(1.0), description="grades one row")


@pytest.fixture
def registry() -> Registry:
    return Registry.from_plugins(RankingJudges(), names=["ranking-doubles"])


def _row(task: str, text: str, reward: float, **extra: Any) -> dict[str, Any]:
    return {
        "schema_version": "1",
        "task_id": task,
        "prompt": f"question {task}",
        "final_text": text,
        "steps": [{"role": "assistant", "content": text}],
        "reward": reward,
        "judge_name": "MathEqual",
        "judge_status": "ok",
        "judge_meta": {"name": "MathEqual", "version": "0.1"},
        **extra,
    }


ROWS: list[dict[str, Any]] = [
    _row("t1", "5", 1.0),
    _row("t1", "The answer is 5 because 2 + 3 = 5.", 1.0, best=True),
    _row("t1", "It is 5.", 1.0),
    _row("t1", "4", 0.0),
    _row("t2", "42, since 6 * 7 = 42.", 1.0, best=True),
    _row("t2", "42", 1.0),
    _row("t2", "", 0.0),  # no reply: not ranked
    _row("t2", "partial", 0.0, error="agent backend failed (timeout)"),  # failed rollout
    _row("t3", "6", 1.0),  # the only row of its task
]


def _write(path: Path, rows: list[dict[str, Any]]) -> list[str]:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    path.write_text("".join(line + "\n" for line in lines))
    path.with_suffix(".meta.json").write_text(json.dumps({"metadata": {"run_id": "r1"}}))
    return lines


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rank_a_file_adds_quality_and_leaves_everything_else_as_it_was(
    tmp_path: Path, registry: Registry
) -> None:
    path = tmp_path / "run.jsonl"
    before = _write(path, ROWS)
    report = wai.rank(str(path), judge="longer", registry=registry)
    after = _read(path)
    assert report.path == str(path) and len(after) == len(ROWS)
    for line, row in zip(before, after, strict=True):
        # every key but the two rank adds is byte-for-byte what it was, in the same order
        rest = {k: v for k, v in row.items() if k not in ("quality", "quality_meta")}
        assert json.dumps(rest, ensure_ascii=False) == line
    for task in ("t1", "t2"):
        group = [r for r in after if r["task_id"] == task and r["quality"] is not None]
        best = max(group, key=lambda r: r["quality"])
        assert best.get("best") is True
        assert all(0 <= r["quality"] <= 1 for r in group)
    assert after == report.rows
    first = after[1]["quality_meta"]
    assert first["status"] == "ok" and first["method"] == "bradley-terry"
    assert (first["ranker"], first["model"], first["version"]) == (
        "longer",
        "rule:length",
        "longer@1",
    )
    assert (first["group_size"], first["comparisons"], first["wins"]) == (4, 3, 3)


def test_unranked_rows_say_why_and_the_report_counts_them(
    tmp_path: Path, registry: Registry
) -> None:
    path = tmp_path / "run.jsonl"
    _write(path, ROWS)
    report = wai.rank(path, judge="longer", registry=registry)
    rows = _read(path)
    reasons = {i: rows[i]["quality_meta"] for i in (6, 7, 8)}
    assert all(rows[i]["quality"] is None for i in reasons)
    assert reasons[6]["skipped"] == "empty final_text"
    assert reasons[7]["skipped"] == "rollout error"
    assert "agent backend failed (timeout)" in reasons[7]["reason"]
    assert reasons[8]["skipped"] == "only rankable row of its group"
    assert reasons[8]["reason"] == "the only rankable row of its group: nothing to compare it with"
    assert (report.n_rows, report.n_groups, report.n_ranked, report.n_skipped) == (9, 3, 6, 3)
    assert report["skipped"] == {
        "empty final_text": 1,
        "rollout error": 1,
        "only rankable row of its group": 1,
    }
    assert (report.comparisons, report.failed_comparisons) == (6 + 1, 0)
    assert report.position_bias == 0.0
    printed = str(report)
    assert "not ranked" in printed and "position bias" in printed and str(path) in printed


def test_the_same_seed_gives_the_same_numbers_and_the_sidecar_records_the_ranking(
    tmp_path: Path, registry: Registry
) -> None:
    path = tmp_path / "run.jsonl"
    _write(path, ROWS)
    wai.rank(path, judge="longer", registry=registry, seed=3)
    first = [r["quality"] for r in _read(path)]
    again = wai.rank(path, judge="longer", registry=registry, seed=3)
    assert [r["quality"] for r in _read(path)] == first == [r["quality"] for r in again.rows]
    sidecar = json.loads(path.with_suffix(".meta.json").read_text())
    assert sidecar["metadata"] == {"run_id": "r1"}  # what the run wrote is kept
    ranking = sidecar["ranking"]
    assert (ranking["ranker"], ranking["version"], ranking["seed"]) == ("longer", "longer@1", 3)
    assert ranking["n_ranked"] == 6 and ranking["source"] == str(path)
    assert "Bradley-Terry" in ranking["method"]


def test_output_writes_elsewhere_and_leaves_the_source_alone(
    tmp_path: Path, registry: Registry
) -> None:
    source = tmp_path / "run.jsonl"
    _write(source, ROWS)
    before = source.read_text()
    out = tmp_path / "ranked" / "run.jsonl"
    report = wai.rank(source, judge="longer", registry=registry, output=out)
    assert source.read_text() == before
    assert report.path == str(out) and len(_read(out)) == len(ROWS)
    assert json.loads(out.with_suffix(".meta.json").read_text())["metadata"] == {"run_id": "r1"}


def test_a_long_rows_file_is_ranked_a_group_at_a_time(tmp_path: Path) -> None:
    # ranked in a list, the rows and their ranked copies were all held (20,000 shop rows took
    # 568 MB); a group's rows are read when its turn comes, and the ranked rows are written
    # as they are made and read back from the file
    import tracemalloc

    class LongerAsync(LongerReply):
        async def compare(  # type: ignore[override]
            self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]
        ) -> str:
            return super().compare(row_a, row_b)

    def peak(padding: int) -> tuple[int, int]:
        path = tmp_path / f"run-{padding}.jsonl"
        rows = [
            _row(f"t{i // 4}", f"reply {'x' * (i % 4)} " + "y" * padding, 1.0) for i in range(800)
        ]
        _write(path, rows)
        out = tmp_path / f"ranked-{padding}.jsonl"
        tracemalloc.start()
        try:
            report = wai.rank(path, judge=LongerAsync(), output=out)
            top = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert (report.n_rows, report.n_ranked, report.comparisons) == (800, 800, 1200)
        assert list(report.rows) == _read(out)
        assert report.rows[3]["quality"] > report.rows[0]["quality"]
        return top, path.stat().st_size + out.stat().st_size

    peak(1)  # (the first ranking imports what it fits with)
    (short, short_bytes), (long, long_bytes) = peak(10), peak(600)
    extra = long_bytes - short_bytes
    assert long - short < extra / 20, (short, long, extra)


@pytest.mark.parametrize("concurrency", [None, 3])
def test_pairs_from_many_groups_are_judged_concurrency_at_a_time(concurrency: int | None) -> None:
    # counted, not timed: a model judge's calls overlap up to concurrency (default 8) across
    # groups, though a ranking reads its groups a few at a time
    import asyncio

    class Slow(LongerReply):
        def __init__(self) -> None:
            super().__init__()
            self.running = self.most = 0

        async def compare(  # type: ignore[override]
            self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]
        ) -> str:
            self.running += 1
            self.most = max(self.most, self.running)
            await asyncio.sleep(0.001)
            self.running -= 1
            return super().compare(row_a, row_b)

    rows = [_row(f"t{i // 3}", "x" * (i % 3 + 1), 1.0) for i in range(60)]
    judge = Slow()
    report = wai.rank(rows, judge=judge, concurrency=concurrency)
    assert report.comparisons == 60 and judge.calls == 120
    assert judge.most == (concurrency or 8)
    assert all(r["quality_meta"]["wins"] == i % 3 for i, r in enumerate(report.rows))


def test_a_judge_that_always_says_A_is_all_position_bias(registry: Registry) -> None:
    rows = [r for r in ROWS if r["task_id"] == "t1"]
    report = wai.rank(rows, judge="first-read", registry=registry)
    # asked both ways it names a different row each time: every pair flips and is a tie
    assert report.position_bias == 1.0 and report.flips == report.comparisons == 6
    assert [r["quality"] for r in report.rows] == pytest.approx([0.5] * 4)
    assert [r["quality_meta"]["ties"] for r in report.rows] == [3] * 4
    assert report.path is None  # a list in memory: nothing written
    assert any("carry little signal" in note for note in report.notes)


def test_a_failed_comparison_is_counted_and_the_rows_rank_on_their_other_pairs(
    registry: Registry,
) -> None:
    rows = [
        _row("t1", "short", 1.0),
        _row("t1", "a much longer answer", 1.0),
        _row("t1", "boom", 1.0),
        _row("t2", "boom here", 1.0),
        _row("t2", "other reply", 1.0),
    ]
    report = wai.rank(rows, judge="fragile", registry=registry)
    assert (report.comparisons, report.failed_comparisons) == (4, 3)
    assert report.failures == ["A-first order failed: ConnectionError: judge model unreachable"]
    q = [r["quality"] for r in report.rows]
    # t1: "boom" failed against both others, so it has no quality; the other two met once
    assert q[1] > q[0] and q[2] is None
    assert report.rows[2]["quality_meta"]["skipped"] == "every comparison failed"
    assert report.rows[2]["quality_meta"]["reason"].startswith("all 2 comparisons failed; first:")
    assert report.rows[0]["quality_meta"]["failed"] == 1
    # t2: its only comparison failed, so neither row is ranked, and nothing crashed
    assert q[3] is None and q[4] is None
    assert report.n_skipped == 3 and report.skipped == {"every comparison failed": 3}
    assert any("3 of 4 comparisons failed" in note for note in report.notes)
    assert "first failure" in str(report) and "judge model unreachable" in str(report)


def test_a_judge_that_exits_fails_its_comparison_not_the_ranking() -> None:
    # sys.exit inside a pairwise judge (blocking, so run on a worker thread) ended wai.rank
    # with nothing ranked; it is one failed comparison like any other exception
    import sys

    class Quits(LongerReply):
        name = "quits"

        def compare(self, row_a: Mapping[str, Any], row_b: Mapping[str, Any]) -> str:
            if "boom" in row_a["final_text"] + row_b["final_text"]:
                sys.exit(0)
            return super().compare(row_a, row_b)

    rows = [_row("t1", "short", 1.0), _row("t1", "longer one", 1.0), _row("t1", "boom", 1.0)]
    report = wai.rank(rows, judge=Quits())
    assert (report.comparisons, report.failed_comparisons) == (3, 2)
    assert report.failures == ["A-first order failed: SystemExit: 0"]
    assert [r["quality_meta"]["failed"] for r in report.rows] == [1, 1, 2]
    assert report.rows[1]["quality"] > report.rows[0]["quality"]


def test_a_judge_that_asks_both_orders_itself_is_asked_once_per_pair(registry: Registry) -> None:
    rows = [r for r in ROWS if r["task_id"] == "t1"]
    report = wai.rank(rows, judge="both", registry=registry)
    assert report.comparisons == 6 and report.position_bias == 0.0
    best = max(report.rows, key=lambda r: r["quality"])
    assert best["best"] is True
    assert best["quality_meta"]["version"] == "both@2"  # the version the verdicts carried


def test_a_judge_object_can_be_passed_and_the_input_rows_are_not_modified() -> None:
    rows = [dict(r) for r in ROWS if r["task_id"] == "t1"]
    judge = LongerReply()
    report = wai.rank(rows, judge=judge)
    assert judge.calls == 12  # 6 pairs, each asked in both orders
    assert all("quality" not in r for r in rows)
    assert report.ranker == "longer" and report.model == "rule:length"


def test_large_groups_are_compared_on_a_seeded_subset_and_the_report_says_so(
    registry: Registry,
) -> None:
    rows = [_row("big", "x" * n, 1.0) for n in range(1, 13)]  # 66 pairs
    report = wai.rank(rows, judge="longer", registry=registry, max_pairs=20, min_pairs_per_row=3)
    assert report.subsampled_groups == 1 and report.comparisons == 20
    assert any("compared on a seeded subset" in note for note in report.notes)
    # 20 of 66 pairs: Bradley-Terry places rows it never compared, close to the true order
    quality = [r["quality"] for r in report.rows]
    assert stats.spearmanr(range(12), quality).statistic > 0.85
    every = wai.rank(rows, judge="longer", registry=registry, max_pairs=66)
    assert every.subsampled_groups == 0 and every.comparisons == 66
    full = [r["quality"] for r in every.rows]
    assert full == sorted(full) and len(set(full)) == 12  # a round robin recovers it exactly


def test_bad_input_is_named(tmp_path: Path, registry: Registry) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(FileNotFoundError, match=r"no such file .*nope\.jsonl"):
        wai.rank(missing, judge="longer", registry=registry)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"prompt": "p"}) + "\n")
    with pytest.raises(wai.RowError, match=r"bad.jsonl, line 2: row 1: missing required field"):
        wai.rank(path, judge="longer", registry=registry)
    path.write_text(json.dumps(ROWS[0]) + "\n\n{not json\n")
    with pytest.raises(wai.RowError, match=r"bad.jsonl, line 3: not valid JSON"):
        wai.rank(path, judge="longer", registry=registry)
    with pytest.raises(wai.RowError, match="row 1 is a int, not a mapping"):
        wai.rank([ROWS[0], 7], judge="longer", registry=registry)
    with pytest.raises(
        TypeError, match=r"rank\(source=\) must be a list of rows .* A single row goes in a list"
    ):
        wai.rank(ROWS[0], judge="longer", registry=registry)
    with pytest.raises(TypeError, match="judge 'grader' cannot rank: it has no compare"):
        wai.rank(ROWS, judge="grader", registry=registry)
    with pytest.raises(ValueError, match="max_pairs must be an integer >= 1, got 0"):
        wai.rank(ROWS, judge="longer", registry=registry, max_pairs=0)
    with pytest.raises(LookupError, match="no judge named 'pairwize'"):
        wai.rank(ROWS, judge="pairwize", registry=registry)


def test_ranking_counts_its_tasks_on_stderr(
    registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        _row("t1", "short", 1.0),
        _row("t1", "a much longer answer", 1.0),
        _row("t2", "boom here", 1.0),
        _row("t2", "other reply", 1.0),
        _row("t3", "alone", 1.0),  # nothing to compare it with: not a task to rank
    ]
    wai.rank(rows, judge="fragile", registry=registry)
    (line,) = capsys.readouterr().err.splitlines()
    # t2's only comparison failed: one task with an error
    assert line.startswith("whileai: 2/2 tasks ranked, ") and line.endswith(", done, errors 1")


RANK_SLOWLY = """
import asyncio, pathlib, sys
import whileai as wai

started = pathlib.Path(sys.argv[2])

class Slow:
    name = "slow"

    async def compare(self, row_a, row_b):
        started.touch()
        await asyncio.sleep(0.05)
        return "tie"

wai.rank(sys.argv[1], judge=Slow(), concurrency=1)
"""


def test_ctrl_c_mid_ranking_says_the_file_is_as_it_was(tmp_path: Path, interrupt: Any) -> None:
    import sys

    path = tmp_path / "run.jsonl"
    lines = _write(path, [_row(f"t{i // 2}", f"reply {i}", 1.0) for i in range(400)])
    started = tmp_path / "started"
    stopped = interrupt(
        [sys.executable, "-c", RANK_SLOWLY, str(path), str(started)], started.exists
    )
    assert stopped.returncode != 0
    (said,) = [x for x in stopped.stderr.splitlines() if x.startswith("whileai: stopped")]
    assert said.startswith("whileai: stopped at ") and said.endswith(
        f"/200 tasks ranked: {str(path)!r} is left as it was; ranking again asks the judge "
        "again, except what a response cache holds (cache=, or WHILEAI_CACHE)"
    )
    assert path.read_text().splitlines() == lines
