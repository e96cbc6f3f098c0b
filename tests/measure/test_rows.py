"""The one-pass row reader: it accepts exactly the rows check_row accepts, groups them under
task_key, and sorts rewards into binary, partial and unjudged."""

from __future__ import annotations

import math
from collections import UserDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from whileai.measure._tasks import task_table
from whileai.schema.records import RowError, check_row, task_key
from whileai.schema.source import rows_of

ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-2, max_value=3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, 0.5, 1, 0]),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.one_of(st.floats(), st.text(max_size=2)), max_size=2),
)
KEYS = ["prompt", "final_text", "reward", "markers", "scenario_id", "task_id", "judge_status"]


@st.composite
def maybe_rows(draw: st.DrawFn) -> Any:
    row = {}
    for key in KEYS:
        if draw(st.booleans()):
            row[key] = draw(ANY_VALUE)
        if key in ("prompt", "final_text") and draw(st.booleans()):
            row[key] = draw(st.text(max_size=3))
    kind = draw(st.sampled_from(["dict", "dict", "dict", "mapping", "string"]))
    if kind == "mapping":
        return UserDict(row)
    if kind == "string":
        return "not a row"
    return row


def check_row_verdict(row: Any) -> str | None:
    try:
        check_row(row, 0)
        task_key(row, 0)
    except RowError as exc:
        return str(exc)
    return None


@given(maybe_rows())
@settings(max_examples=600, deadline=None)
def test_reader_accepts_and_rejects_exactly_what_check_row_does(row: Any) -> None:
    expected = check_row_verdict(row)
    if expected is not None:
        with pytest.raises(RowError) as caught:
            task_table([row])
        assert str(caught.value) == expected
        return
    table = task_table([row])
    assert table.keys == [task_key(row)]
    reward = row.get("reward")
    stored = table.row_reward[0]
    if reward is None or row.get("judge_status") in ("error", "skipped"):
        assert math.isnan(stored)
    else:
        assert stored == reward


def test_rewards_sort_into_binary_partial_and_unjudged() -> None:
    rows = [
        {"task_id": "a", "prompt": "p", "final_text": "x", "reward": 1},
        {"task_id": "a", "prompt": "p", "final_text": "x", "reward": 0.0},
        {"task_id": "a", "prompt": "p", "final_text": "x", "reward": 0.25},
        {"task_id": "b", "prompt": "p", "final_text": "x", "reward": None},
        {"task_id": "b", "prompt": "p", "final_text": "x", "reward": 1, "judge_status": "error"},
        {"task_id": "b", "prompt": "p", "final_text": "x", "reward": 0, "judge_status": "ok"},
    ]
    table = task_table(rows)
    assert (table.counts.binary, table.counts.partial, table.counts.unjudged) == (3, 1, 2)
    assert table.n_binary.tolist() == [2, 1]
    assert table.n_pass.tolist() == [1, 0]
    assert table.reward_sum.tolist() == [1.25, 0.0]


def test_rows_of_takes_lists_runs_and_iterables_but_not_a_single_row() -> None:
    row = {"prompt": "p", "final_text": "x"}

    class Run:
        def __init__(self) -> None:
            self.rows = [row]

    assert rows_of(Run()) == [row]
    assert rows_of(r for r in [row]) == [row]
    with pytest.raises(TypeError, match=r"A single row goes in a list: \[row\]"):
        rows_of(row)
    with pytest.raises(TypeError, match="got int"):
        rows_of(3)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_marker_that_is_not_finite_is_an_error_naming_the_row_and_marker(bad: float) -> None:
    rows = [
        {"task_id": "a", "prompt": "p", "final_text": "x", "reward": 1, "markers": {"m": 1.0}},
        {"task_id": "b", "prompt": "p", "final_text": "x", "reward": 0, "markers": {"m": bad}},
    ]
    with pytest.raises(RowError, match=rf"row 1: marker 'm' is {bad!r}, not a finite number"):
        task_table(rows)


def test_the_table_of_a_long_run_costs_a_few_bytes_a_row() -> None:
    # an RL run read back from its file: a million rows with several markers must not cost
    # an object per value (the rows themselves are walked, not held)
    import tracemalloc

    def rows(n: int) -> Any:
        for i in range(n):
            yield {
                "prompt": "p",
                "final_text": "an answer",
                "scenario_id": f"s{i // 4}",
                "reward": float(i % 3 == 0) * 0.5 + 0.25,
                "markers": {"turns": i % 7 + 0.5, "tool_errors": i % 5 + 1000, "length": i * 1.5},
            }

    def peak(n: int) -> int:
        tracemalloc.start()
        try:
            table = task_table(rows(n), with_cut=True)
            assert table.n_tasks == n // 4
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    few, many = peak(2_000), peak(22_000)
    per_row = (many - few) / 20_000
    # 8 bytes a row for its task and its reward, a quarter of a task key and of each marker's
    # count and sum (kept per task), and numpy's passing copies: about 105 here. Each marker's
    # task and value kept per row made it about 140; lists of them, about 275
    assert per_row < 125, per_row


def test_the_table_of_some_rows_is_the_table_those_rows_make_alone() -> None:
    # a report groups a run's rows (by arm, by dimension) and measures each group from the one
    # table of the run: it must be the table the group's rows would make by themselves
    import random

    import numpy as np

    from whileai.measure.pass_at import pass_at, pass_at_from_table

    rng = random.Random(7)
    rows = []
    for i in range(300):
        situation = rng.randrange(20)
        phrasing = rng.randrange(3)
        rows.append(
            {
                "prompt": "p",
                "final_text": "x",
                "scenario_id": f"s{situation}-p{phrasing}",
                # phrasings of one situation: tasks that share a situation (a cluster)
                "lineage": {"situation": situation, "phrasing": phrasing, "rollout_key": f"k{i}"},
                "seed": 100 + situation,
                "reward": rng.choice([0.0, 1.0, 1.0, 0.5, None]),
                "judge_status": rng.choice(["ok", "ok", "ok", "error"]),
            }
        )
    whole = task_table(rows)
    assert whole.clusters is not None
    for _ in range(30):
        positions = sorted(rng.sample(range(len(rows)), rng.randrange(1, len(rows))))
        part = whole.of_rows(positions)
        alone = task_table([rows[i] for i in positions], with_markers=False)
        assert part.keys == alone.keys
        for column in ("n_rows", "n_binary", "n_pass", "n_judged", "reward_sum", "row_task"):
            assert np.array_equal(getattr(part, column), getattr(alone, column)), column
        assert np.array_equal(part.row_reward, alone.row_reward, equal_nan=True)
        assert part.counts == alone.counts
        if alone.clusters is None:
            assert part.clusters is None
        else:
            assert part.clusters is not None
            assert np.array_equal(part.clusters, alone.clusters)
    one = whole.of_rows([0])
    assert (one.keys, one.clusters) == ([rows[0]["scenario_id"]], None)
    # and pass@k from a table built once is pass_at's, at every k
    for k in (None, 1, 2, 3, 5):
        assert pass_at_from_table(whole, k=k) == pass_at(rows, k=k)
    with pytest.raises(ValueError, match="rows is empty"):
        whole.of_rows([])
