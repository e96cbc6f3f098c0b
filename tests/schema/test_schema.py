"""The row schema: records, the flat row, the wire contract, and errors that name the row."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import whileai as wai
from whileai.schema import records as schema
from whileai.schema import report as wai_report
from whileai.schema.export import export_row

SCHEMA_FILE = files("whileai.schema") / "row-v1.json"

json_scalars = st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
opt_text = st.none() | st.text(max_size=12)
opt_dict = st.none() | st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=3)
unit = st.none() | st.floats(0, 1) | st.sampled_from([0, 1])

tasks = st.builds(
    schema.Task,
    prompt=st.text(max_size=30),
    scenario_id=opt_text,
    privileged=opt_dict,
    scenario_dimensions=opt_dict,
    arm=opt_text,
    seed=st.none() | st.integers(0, 2**31),
    writer_model=opt_text,
    vector=st.none() | st.lists(st.floats(-1, 1), max_size=4),
)
steps = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["assistant", "user", "tool"]), "content": st.text(max_size=10)}
    ),
    max_size=4,
)
rollouts = st.builds(
    schema.Rollout,
    final_text=st.text(max_size=30),
    steps=steps,
    world_state=opt_dict,
    faults=st.none() | st.lists(st.fixed_dictionaries({"step": st.integers(0, 9)}), max_size=2),
    sampling=opt_dict,
    policy_version=opt_text,
    user_model=opt_text,
    logprob=st.none() | st.floats(-100, 0),
    n_tokens=st.none() | st.integers(0, 500),
    truncated=st.none() | st.booleans(),
    error=opt_text,
    extra=st.dictionaries(st.sampled_from(["gold_note", "source", "k"]), json_values, max_size=2),
)
judgments = st.builds(
    schema.Judgment,
    reward=unit,
    reason=opt_text,
    judge_name=opt_text,
    judge_status=st.none() | st.sampled_from(["ok", "error", "skipped"]),
    judge_meta=opt_dict,
    gold_reward=unit,
    quality=unit,
    quality_meta=opt_dict,
)
markers = st.dictionaries(
    st.text(min_size=1, max_size=6), st.integers(0, 9) | st.floats(0, 5) | st.booleans(), max_size=3
)


@settings(max_examples=200, deadline=None)
@given(tasks, rollouts, judgments, markers)
def test_round_trip_records_to_row_and_back(task, rollout, judgment, marks) -> None:
    row = wai.to_row(task, rollout, judgment, marks)
    assert row["schema_version"] == "1"
    back = wai.from_row(row)
    assert back.task == task
    assert back.rollout == rollout
    assert back.judgment == judgment
    assert {m.name: m.value for m in back.markers} == marks
    # and the row survives the trip unchanged
    assert wai.to_row(*back) == row


@settings(max_examples=100, deadline=None)
@given(tasks, rollouts, judgments, markers)
def test_every_exported_row_validates_against_the_wire_contract(task, rollout, judgment, marks):
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    row = export_row(wai.to_row(task, rollout, judgment, marks))
    validator.validate(row)


def test_in_memory_privileged_is_not_a_valid_wire_row() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    row = wai.to_row(
        wai.Task(prompt="p", privileged={"reference": "5"}), wai.Rollout(final_text="5")
    )
    assert not validator.is_valid(row)
    validator.validate(export_row(row))


def test_checked_in_schema_equals_the_generated_one() -> None:
    assert json.loads(SCHEMA_FILE.read_text()) == schema.row_json_schema(), (
        "row-v1.json is stale: regenerate it from whileai.schema.records.row_json_schema()"
    )


def test_every_record_field_is_in_the_schema_and_back() -> None:
    properties = set(schema.row_json_schema()["properties"])
    fields = {
        f.name
        for cls in (schema.Task, schema.Rollout, schema.Judgment)
        for f in attrs.fields(cls)
        if f.name != "extra" and f.name not in schema.MEMORY_ONLY_FIELDS
    }
    assert properties == fields | {"schema_version", "markers"}


def test_task_id_defaults_to_a_stable_prompt_hash() -> None:
    a = wai.Task(prompt="What is 2 + 3?")
    b = wai.Task(prompt="What is 2 + 3?")
    assert a.task_id == b.task_id == schema.prompt_hash("What is 2 + 3?")
    assert a.task_id != wai.Task(prompt="What is 2 + 4?").task_id
    assert len(a.task_id) == 16


def test_task_key_prefers_scenario_then_task_then_prompt() -> None:
    assert wai.task_key({"scenario_id": "s1", "task_id": "t1", "prompt": "p"}) == "s1"
    assert wai.task_key({"task_id": "t1", "prompt": "p"}) == "t1"
    assert wai.task_key({"prompt": "p"}) == "p"
    with pytest.raises(wai.RowError, match="row 4: has none of scenario_id, task_id, prompt"):
        wai.task_key({"final_text": "x"}, index=4)


def test_version_0_rows_load_by_shape() -> None:
    old = {"prompt": "What is 7 * 6?", "final_text": "42", "reward": 1, "task_id": "q2"}
    task, rollout, judgment, marks = wai.from_row(old)
    assert (task.task_id, rollout.final_text, judgment.reward, marks) == ("q2", "42", 1, [])
    assert wai.to_row(task, rollout, judgment)["schema_version"] == "1"


def test_unknown_keys_ride_along_exactly() -> None:
    row = {
        "schema_version": "1",
        "prompt": "p",
        "task_id": "t",
        "final_text": "f",
        "steps": [],
        "sampling": None,
        "reward": None,
        "dataset": {"name": "gsm8k", "split": "test"},
    }
    parts = wai.from_row(row)
    assert parts.rollout.extra == {"dataset": {"name": "gsm8k", "split": "test"}}
    assert wai.to_row(*parts) == row


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("not a row", "row 3 is a str, not a mapping"),
        ({"final_text": "x"}, "row 3: missing required field 'prompt'"),
        ({"prompt": "p"}, "row 3: missing required field 'final_text'"),
        ({"prompt": "p", "final_text": 5}, "row 3: final_text must be a string, got int"),
        ({"prompt": "p", "final_text": "x", "reward": 1.5}, "row 3: reward is 1.5, outside [0, 1]"),
        ({"prompt": "p", "final_text": "x", "reward": "1"}, "row 3: reward must be a number"),
        ({"prompt": "p", "final_text": "x", "markers": {"len": "long"}}, "marker 'len' is 'long'"),
        (
            {"prompt": "p", "final_text": "x", "schema_version": "9"},
            "row 3: schema_version '9' is not one this release reads",
        ),
        ({"prompt": "p", "final_text": "x", "seed": "abc"}, "row 3: "),
    ],
)
def test_bad_rows_name_the_row_and_field(row: Any, message: str) -> None:
    with pytest.raises(wai.RowError) as caught:
        wai.from_row(row, index=3)
    assert message in str(caught.value)


def test_to_row_rejects_bad_records_naming_the_field() -> None:
    with pytest.raises(wai.RowError, match=r"row 0: llm_reward is -0.1, outside \[0, 1\]"):
        wai.to_row(
            wai.Task(prompt="p"),
            wai.Rollout(final_text="x"),
            wai.Judgment(llm_reward=-0.1),
            index=0,
        )
    with pytest.raises(wai.RowError, match="extra key 'reward' collides"):
        wai.to_row(wai.Task(prompt="p"), wai.Rollout(final_text="x", extra={"reward": 1}))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(st.dictionaries(st.text(), _JSON, max_size=6))
@settings(max_examples=300, deadline=None)
def test_a_sidecar_reads_back_as_the_content_it_was_written_from(content: dict[str, Any]) -> None:
    from whileai.schema.files import sidecar_text

    assert json.loads(sidecar_text(content)) == content


def test_a_sidecar_puts_its_first_two_levels_of_keys_one_to_a_line(tmp_path: Any) -> None:
    from whileai.schema.files import read_sidecar, write_sidecar

    content = {
        "metadata": {"run_id": "r1", "seed": 3},
        "report": {"n_traces": 8, "rollouts": {"groups": {"s1": {"planned": 4}}}},
        "complete": True,
    }
    path = tmp_path / "rows.meta.json"
    write_sidecar(path, content)
    assert read_sidecar(path) == content
    assert path.read_text(encoding="utf-8").splitlines() == [
        "{",
        '  "metadata": {',
        '    "run_id": "r1",',
        '    "seed": 3',
        "  },",
        '  "report": {',
        '    "n_traces": 8,',
        '    "rollouts": {"groups": {"s1": {"planned": 4}}}',
        "  },",
        '  "complete": true',
        "}",
    ]


def test_a_sidecar_that_cannot_be_replaced_leaves_the_old_one_and_no_temporary(
    tmp_path: Any,
) -> None:
    from whileai.schema.files import read_sidecar, write_sidecar

    path = tmp_path / "rows.meta.json"
    write_sidecar(path, {"complete": False})
    folder = tmp_path / "taken.meta.json"
    folder.mkdir()  # what the new sidecar would replace is a folder: the rename fails
    with pytest.raises(IsADirectoryError) as caught:
        write_sidecar(folder, {"complete": True})
    assert str(caught.value) == (
        f"[Errno 21] the sidecar {str(folder)!r} could not be written: Is a directory"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.meta.json", "taken.meta.json"]
    assert read_sidecar(path) == {"complete": False}

    inside = tmp_path / "rows.meta.json" / "x.meta.json"
    with pytest.raises(FileExistsError, match=r"'.*rows\.meta\.json' is a file, not a folder$"):
        write_sidecar(inside, {"complete": True})


def test_rewriting_a_rows_file_past_a_full_disk_names_it_and_leaves_it_as_it_was(
    tmp_path: Any,
) -> None:
    import subprocess
    import sys

    path = tmp_path / "rows.jsonl"
    path.write_text('{"prompt": "kept"}\n')
    # data.save, `whileai grade` and the training exports rewrite a file through a temporary;
    # a file size limit stands in for a full disk (SIGXFSZ ignored: past the limit the write
    # fails with EFBIG rather than the signal killing the process)
    script = (
        "import resource, signal, sys\n"
        "from whileai.schema.files import write_rows\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))\n"
        "write_rows(sys.argv[1], [{'prompt': 'x' * 1000} for _ in range(100)])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"OSError: [Errno 27] {str(path)!r} could not be written, and is left as it was: "
        "File too large"
    )
    assert path.read_text() == '{"prompt": "kept"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]  # no temporary, no lock


def test_a_row_writer_finishes_a_line_the_file_took_only_part_of(tmp_path: Any) -> None:
    # write(2) may take fewer bytes than asked (a signal, a nearly full disk): the rest of the
    # line follows, and the next line starts where the writer says
    from whileai.schema.files import RowWriter

    class Grudging:
        """A file that takes at most five bytes a write."""

        def __init__(self, path: Any) -> None:
            self.file = open(path, "ab", buffering=0)  # noqa: SIM115

        def write(self, data: bytes) -> int:
            return self.file.write(bytes(data[:5]))

        def close(self) -> None:
            self.file.close()

    path = tmp_path / "rows.jsonl"
    writer = RowWriter(path)
    writer._file.close()  # type: ignore[union-attr]
    writer._file = Grudging(path)  # type: ignore[assignment]
    lines = [json.dumps({"row": i, "text": "é" * i}).encode() + b"\n" for i in range(4)]
    starts = [writer.write_line(line) for line in lines]
    writer.close()
    data = path.read_bytes()
    assert data == b"".join(lines)
    assert [data[s : s + len(line)] for s, line in zip(starts, lines, strict=True)] == lines

    class Full(Grudging):
        def write(self, data: bytes) -> int:
            return self.file.write(bytes(data[:3])) if len(data) > 10 else 0

    writer = RowWriter(path)
    writer._file.close()  # type: ignore[union-attr]
    writer._file = Full(path)  # type: ignore[assignment]
    with pytest.raises(OSError, match=r"rows\.jsonl: wrote \d+ of \d+ bytes of a row"):
        writer.write_line(lines[3])
    writer.close()


@attrs.frozen
class _Inner(wai_report.Report):
    count: Any
    share: Any


@attrs.frozen
class _Outer(wai_report.Report):
    inner: _Inner
    groups: Any
    by_name: Any
    odd: Any
    _hidden: Any = "never shown"


def test_a_report_is_written_as_the_same_text_as_its_plain_data_copy() -> None:
    """write_sidecar takes a run's report as it is: what json has no type for (a nested report,
    a mapping that is not a dict, numpy numbers, a set) reads as it does in ``to_dict()``."""
    import types

    import numpy as np

    from whileai.schema.files import sidecar_text

    report = _Outer(
        inner=_Inner(np.int64(3), np.float64(0.1)),
        groups=[{"s1": (1, np.bool_(True))}, _Inner(1, None)],
        by_name=types.MappingProxyType({"a": np.float32(0.5), "b": [np.int32(-2)]}),
        odd={"tags": {"x"}, "nan": float("nan")},
    )
    for content in (report, {"metadata": {"seed": 1}, "report": report}):
        plain = (
            content.to_dict()
            if isinstance(content, wai_report.Report)
            else {**content, "report": report.to_dict()}
        )
        assert sidecar_text(content) == sidecar_text(plain)
    assert '"count": 3' in sidecar_text(report) and "_hidden" not in sidecar_text(report)
