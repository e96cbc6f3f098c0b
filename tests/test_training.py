"""Training data out, as an RL team uses it: a prompt dataset built with the real ``datasets``
package, a reward function called the way TRL's GRPOTrainer calls one, grouped GRPO records and
Parquet, none of them carrying the answer key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import whileai as wai
from whileai.scoring import Verdict
from whileai.training import _exported, _task, _task_of


class Exact:
    """A verifier: the completion's last word equals the reference."""

    name = "Exact"
    version = "1"

    def verify(self, completion: str, reference: Any, prompt: str | None = None) -> Verdict:
        words = completion.split()
        if not words:
            return Verdict.error("an empty completion")
        return Verdict(1.0 if words[-1] == str(reference) else 0.0, "last word")


def graded_rows() -> list[dict[str, Any]]:
    rows = wai.rows(
        ["What is 2 + 3?", "What is 7 * 6?"],
        [["it is 5", "it is 4", "5"], ["42", "41", "it is 42"]],
        Exact(),
        references=["5", "42"],
    )
    return [dict(r) for r in rows.trajectories] if hasattr(rows, "trajectories") else list(rows)


def test_a_dataset_and_a_reward_function_work_the_way_trl_uses_them() -> None:
    datasets = pytest.importorskip("datasets")
    rows = graded_rows()
    dataset = wai.export(rows, "datasets", conversational=True)
    assert isinstance(dataset, datasets.Dataset)
    assert dataset.column_names == ["prompt", "task_id"]
    shown = json.dumps(dataset.to_list())
    assert "privileged" not in shown and "reference" not in shown
    reward = wai.reward_function(Exact(), rows)
    assert reward.__name__ == "whileai_Exact"
    # GRPOTrainer: a batch of prompts, num_generations completions each, every other column of
    # the dataset passed as a keyword list of the same length, plus its own keywords
    batch = dataset[:2]
    prompts = [p for p in batch["prompt"] for _ in range(2)]
    task_ids = [t for t in batch["task_id"] for _ in range(2)]
    completions = [
        [{"role": "assistant", "content": "the answer is 5"}],
        [{"role": "assistant", "content": "I think 6"}],
        [{"role": "assistant", "content": "42"}],
        [{"role": "assistant", "content": ""}],
    ]
    got = reward(
        prompts=prompts,
        completions=completions,
        completion_ids=[[1, 2]] * 4,
        task_id=task_ids,
        trainer_state=None,
    )
    assert got == [1.0, 0.0, 1.0, None], "an ungradable completion is None: TRL's 'not applicable'"


def test_an_ungradable_completion_scores_unjudged_and_stays_in_its_group() -> None:
    rows = graded_rows()
    task_ids = [rows[0]["task_id"]] * 3
    completions = ["the answer is 5", "", "4"]  # Exact cannot grade an empty completion

    # what GRPOTrainer does with the list: None becomes NaN, the functions are summed ignoring
    # NaN, and the group's advantage is taken over every completion
    def trl_rewards(got: list[float | None]) -> list[float]:
        per_function = np.array([[np.nan if r is None else r] for r in got], dtype=float)
        return list(np.nansum(per_function, axis=1))

    default = wai.reward_function(Exact(), rows)(
        prompts=[""] * 3, completions=completions, task_id=task_ids
    )
    assert default == [1.0, None, 0.0]
    assert trl_rewards(default) == [1.0, 0.0, 0.0]  # the only function: TRL scores it 0
    failing = wai.reward_function(Exact(), rows, unjudged=0.0)
    assert failing(prompts=[""] * 3, completions=completions, task_id=task_ids) == [1.0, 0.0, 0.0]
    for bad in (-0.5, 2, True, "0"):
        with pytest.raises(ValueError, match=r"unjudged must be None or a number in \[0, 1\]"):
            wai.reward_function(Exact(), rows, unjudged=bad)  # type: ignore[arg-type]


def test_grouped_records_and_parquet_carry_no_answer_key(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = graded_rows()
    groups = wai.export(rows, shape="grpo", path=tmp_path / "groups.jsonl")
    assert [g["rewards"] for g in groups] == [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]]
    assert groups[0]["completions"] == ["it is 5", "it is 4", "5"]
    assert set(groups[0]) == {
        "task_id",
        "prompt",
        "completions",
        "rewards",
        "logprobs",
        "policy_versions",
        "policy_version",
    }
    written = (tmp_path / "groups.jsonl").read_text()
    assert "privileged" not in written and '"reference"' not in written
    table = pq.read_table(wai.export(rows, "parquet", shape="rows", path=tmp_path / "rows.parquet"))
    assert table.num_rows == 6 and "privileged" not in table.column_names


def test_bad_input_is_named() -> None:
    rows = graded_rows()
    with pytest.raises(ValueError, match="shape must be one of trl, grpo, rows"):
        wai.export(rows, shape="ppo")
    with pytest.raises(ValueError, match="give path="):
        wai.export(rows, "parquet")
    # the file name where the format goes: the error says where it belongs
    with pytest.raises(ValueError, match=r"got 'train.jsonl' \(a file name\? pass it as path="):
        wai.export(rows, "train.jsonl")
    with pytest.raises(ValueError, match=r"got 'csv'$"):
        wai.export(rows, "csv")
    with pytest.raises(ValueError, match="row 0: a row to export needs a 'prompt'"):
        wai.export([{"final_text": "x"}])
    reward = wai.reward_function(Exact(), rows)
    with pytest.raises(ValueError, match="no task_id column"):
        reward(prompts=["p"], completions=["5"])
    with pytest.raises(ValueError, match="no reference for task ids"):
        reward(prompts=["p"], completions=["5"], task_id=["unknown"])
    exported = [json.loads(json.dumps(r)) for r in wai.export(rows, shape="rows")]
    with pytest.raises(ValueError, match="has no references"):
        wai.reward_function(Exact(), exported)


def test_the_training_page_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    pytest.importorskip("datasets")
    page = Path(__file__).resolve().parents[1] / "docs" / "training.md"
    (block,) = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    exec(compile(block, str(page), "exec"), {})
    assert capsys.readouterr().out.splitlines() == ["[1.0, 0.0]", "[1.0, 0.0]"]


def run_file(path: Path, padding: int, n: int = 1200) -> Path:
    """A run's rows file: groups of four rollouts a task, the tasks interleaved as a run
    finishes them, with long prompts and answers when ``padding`` is large."""
    with path.open("w") as f:
        for i in range(n):
            task, repeat = i % (n // 4), i // (n // 4)
            row = {
                "prompt": f"task {task}: " + "context " * padding,
                "final_text": f"answer {i} " + "x" * padding,
                "task_id": f"t{task}",
                "reward": float(i % 3 == 0),
                "policy_version": repeat // 2,
                "lineage": {"rollout_key": f"t{task}/r{repeat}"},
            }
            f.write(json.dumps(row) + "\n")
    return path


@pytest.mark.parametrize("shape", ["trl", "grpo", "rows"])
def test_a_rows_file_exports_as_the_rows_in_memory_do(tmp_path: Path, shape: str) -> None:
    source = run_file(tmp_path / "run.jsonl", 3)
    held = [json.loads(line) for line in source.read_text().splitlines()]
    records = wai.export(held, shape=shape)
    written = wai.export(source, shape=shape, path=tmp_path / f"{shape}.jsonl")
    # the records read back from the file, and the file holds them one a line
    assert list(written) == records and len(written) == len(records)
    lines = (tmp_path / f"{shape}.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == records
    if shape == "grpo":
        # each task's four rollouts, gathered from across the file in the order they stand
        assert len(records) == 300
        assert records[0]["completions"][:2] == ["answer 0 xxx", "answer 300 xxx"]
        assert records[0]["policy_versions"] == [0, 0, 1, 1]
        assert records[0]["policy_version"] is None


def test_a_long_run_exports_a_record_at_a_time(tmp_path: Path) -> None:
    import tracemalloc

    def peak(padding: int, shape: str) -> tuple[int, int]:
        source = run_file(tmp_path / f"run-{padding}.jsonl", padding)
        out = tmp_path / f"{shape}-{padding}.jsonl"
        tracemalloc.start()
        try:
            written = wai.export(source, shape=shape, path=out)
            top = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert len(written) == (1200 if shape == "rows" else 300)
        return top, source.stat().st_size + out.stat().st_size

    for shape in ("grpo", "rows"):
        peak(1, shape)  # (the first export imports what it reads with)
        (short, short_bytes), (long, long_bytes) = peak(10, shape), peak(600, shape)
        # rows 60 times as long: listed, exported and joined into one text they would cost
        # several times the extra bytes; a record at a time, a group's worth
        extra = long_bytes - short_bytes
        assert long - short < extra / 20, (shape, short, long, extra)


def test_a_bad_row_part_way_leaves_the_export_file_as_it_was(tmp_path: Path) -> None:
    source = run_file(tmp_path / "run.jsonl", 1, n=40)
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    del rows[30]["prompt"]
    out = tmp_path / "train.jsonl"
    out.write_text("yesterday's export\n")
    with pytest.raises(ValueError, match="row 30: a row to export needs a 'prompt'"):
        wai.export(rows, shape="rows", path=out)
    assert out.read_text() == "yesterday's export\n"
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob("*.lock"))


def test_parquet_is_written_a_batch_at_a_time_with_the_types_every_batch_agrees_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyarrow")
    import tracemalloc

    import pyarrow as pa
    import pyarrow.parquet as pq

    from whileai import training

    monkeypatch.setattr(training, "PARQUET_BATCH", 100)

    def peak(padding: int) -> tuple[int, int]:
        source = run_file(tmp_path / f"run-{padding}.jsonl", padding)
        rows = [json.loads(line) for line in source.read_text().splitlines()]
        for i, row in enumerate(rows):
            # no logprob in the first batches, numbers later: one column of numbers
            row["logprob"] = None if i < 250 else -0.5 * i
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out = tmp_path / f"rows-{padding}.parquet"
        tracemalloc.start()
        try:
            wai.export(source, "parquet", shape="rows", path=out)
            top = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        # the rows written, read back; logprob a column of numbers, the lineage JSON text
        assert wai.load(out) == wai.export(rows, shape="rows")
        schema = pq.read_schema(out)
        assert schema.field("logprob").type == pa.float64()
        assert schema.field("lineage").type == pa.string()
        return top, source.stat().st_size

    peak(1)
    (short, short_bytes), (long, long_bytes) = peak(10), peak(600)
    extra = long_bytes - short_bytes
    assert long - short < extra / 5, (short, long, extra)


def shop_like_rows(n: int) -> list[dict[str, Any]]:
    """Rows whose nested values hold keys of their own (a world state keyed by order ids, a
    tool call's arguments), some keys on some rows only, and numbers of two kinds."""
    rows = []
    for i in range(n):
        order = f"A{1000 + i}"
        row: dict[str, Any] = {
            "prompt": f"Where is order {order}?",
            "final_text": "On its way." if i % 2 else "",
            "task_id": f"t{i // 4}",
            "reward": 1 if i % 3 == 0 else 0.5,
            "seed": 2**40 + i,
            "world_state": {"orders": {order: {"status": "shipped", "price": 9.5 + i}}},
            "steps": [
                {"role": "assistant", "tool_calls": [{"name": "lookup", "arguments": {order: i}}]}
            ],
            "markers": {"tool_errors": i % 2} if i % 5 else None,
            # a field that is text on some rows and a list on others
            "note": "plain" if i % 2 else ["a", {"b": i}],
        }
        if i % 3 == 0:
            row["user_model"] = "customer:pleased"
        rows.append(row)
    return rows


def test_rows_in_parquet_keep_a_column_per_field_and_read_back_as_written(
    tmp_path: Path,
) -> None:
    # inferred by Arrow, world_state was a struct with a field per order id (20,000 shop rows
    # took minutes and gigabytes to write) and every row read back with every id as None
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = shop_like_rows(300)
    out = wai.export(rows, "parquet", shape="rows", path=tmp_path / "rows.parquet")
    schema = pq.read_schema(out)
    assert schema.names == [*rows[0]]  # one column a field, in the order the rows hold them
    assert [schema.field(n).type for n in ("prompt", "reward", "seed")] == [
        pa.string(),
        pa.float64(),  # ints and floats: numbers
        pa.int64(),
    ]
    nested = ["world_state", "steps", "markers", "note"]
    assert all(schema.field(n).type == pa.string() for n in nested)
    back = wai.load(out)
    # each row as written; a field a row lacks (user_model here) reads back as None
    assert back == [{"user_model": None, **row} for row in rows]
    assert back[1]["world_state"] == {"orders": {"A1001": {"status": "shipped", "price": 10.5}}}
    # the JSON text is what the rows file holds, readable without whileai
    table = pq.read_table(out).to_pylist()
    assert json.loads(table[0]["note"]) == ["a", {"b": 0}] and table[1]["note"] == '"plain"'


def test_rows_in_a_dataset_take_the_same_columns() -> None:
    datasets = pytest.importorskip("datasets")
    rows = shop_like_rows(8)
    dataset = wai.export(rows, "datasets", shape="rows")
    assert dataset.column_names == [*rows[0]]
    assert dataset.features["world_state"] == datasets.Value("string")
    assert json.loads(dataset[2]["world_state"]) == rows[2]["world_state"]
    assert dataset[3]["seed"] == 2**40 + 3


#: what a row's ids and prompt may hold: plain text, reserved names in any spelling and
#: encoding (as a key in JSON text, in a repr, cut short), a privileged block, other kinds
_ID_VALUES = st.one_of(
    st.none(),
    st.just(""),
    st.integers(0, 99),
    st.text(max_size=12),
    st.sampled_from(
        [
            "shop-001-p0",
            json.dumps({"reference": "42", "id": "t1"}),
            json.dumps({"id": json.dumps({"Hidden-State": 1})}),
            "{'rubric': 'x', 'id': 1}",
            '{"privileged": {"reference": "5"',
            "reference=5",
            "the reference answer",
        ]
    ),
    st.dictionaries(
        st.sampled_from(["id", "privileged", "reference", "vector"]), st.text(max_size=5)
    ),
    st.lists(st.text(max_size=5), max_size=2).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(
    task_id=_ID_VALUES,
    scenario_id=_ID_VALUES,
    prompt=st.one_of(
        st.text(max_size=12),
        st.sampled_from(
            [
                "What is 2 + 3?",
                json.dumps({"q": "2 + 3", "privileged": {"reference": "5"}}),
                "{'principle': 'be exact', 'q': 1}",
            ]
        ),
    ),
    privileged=st.booleans(),
)
def test_a_rows_task_is_read_as_its_whole_export_would_give_it(
    task_id: Any, scenario_id: Any, prompt: str, privileged: bool
) -> None:
    row: dict[str, Any] = {"prompt": prompt, "final_text": "5", "reward": 1.0}
    for name, value in (("task_id", task_id), ("scenario_id", scenario_id)):
        if value is not None:
            row[name] = value
    if privileged:
        row["privileged"] = {"reference": "5", "hidden_state": {"id": "t1"}}
    assert _task_of(row) == _task(_exported(row))


def test_training_records_group_by_the_exported_task() -> None:
    # ids that the export cleans: two rows whose ids differ only in a reserved key are one
    # task once written, and a prompt's privileged block never reaches a record
    leaky = json.dumps({"q": "2 + 3", "privileged": {"reference": "5"}})
    rows = [
        {"prompt": leaky, "final_text": "5", "reward": 1.0, "task_id": json.dumps(ids)}
        for ids in ({"id": "t1", "reference": "5"}, {"id": "t1", "reference": "6"})
    ]
    trl = list(wai.export(rows, shape="trl"))
    grpo = list(wai.export(rows, shape="grpo"))
    assert [r["task_id"] for r in trl] == [r["task_id"] for r in grpo] == ['{"id": "t1"}']
    assert grpo[0]["rewards"] == [1.0, 1.0]
    for record in (*trl, *grpo):
        assert "privileged" not in json.dumps(record) and '\\"5\\"' not in json.dumps(record)
