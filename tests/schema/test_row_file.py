"""A rows file handed to a measurement by its path: read as it is walked, each rollout once,
in the memory of its line offsets, with the same figures as the rows read into a list."""

from __future__ import annotations

import json
import math
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import whileai as wai
from whileai.schema.files import read_jsonl
from whileai.schema.jsonline import loads_line
from whileai.schema.rollout_keys import RolloutKeys
from whileai.schema.row_file import DuplicateRowsWarning, open_row_file


def long_run(path: Path, situations: int, repeats: int = 4, *, seed: int = 0) -> Path:
    """A saved run as an RL step writes it: rows of a few KB, graded, some failed with an
    owner, faults and markers on them."""
    rng = random.Random(seed)
    with path.open("w") as f:
        for s in range(situations):
            skill = rng.random()
            for r in range(repeats):
                passed = rng.random() < skill
                row: dict[str, Any] = {
                    "prompt": f"Where is order A{s}? " + "context " * 400,
                    "final_text": "It shipped. " * 60,
                    "reward": 1.0 if passed else 0.0,
                    "scenario_id": f"shop-{s:05d}-p0-ab12cd34",
                    "lineage": {"situation": s, "repeat": r, "rollout_key": f"shop-{s}/r{r}"},
                    "faults": [{"kind": "timeout"}] if r == 1 else [],
                    "markers": {"tool_errors": r % 3, "gave_up": not passed},
                }
                if not passed:
                    row["failure_owner"] = {"owner": "agent", "source": "rules"}
                f.write(json.dumps(row) + "\n")
    return path


def peak_bytes(fn: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        made = fn()
        return made, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_measurement_given_a_path_reads_the_rows_without_holding_them(tmp_path: Path) -> None:
    path = long_run(tmp_path / "run.jsonl", 400)
    size = path.stat().st_size
    rows = read_jsonl(path).rows
    for measure in (wai.pass_at, wai.marker_summary, wai.group_signal):
        # (measured on the list first: a measurement's first call imports what it needs)
        expected = measure(rows).to_dict()
        from_file, peak = peak_bytes(lambda m=measure: m(str(path)).to_dict())
        assert from_file == expected, measure
        # held in a list, the rows cost one and a half times the file; walked, a fraction
        assert peak < size / 5, (measure, peak, size)
    other = long_run(tmp_path / "other.jsonl", 400, seed=1)
    expected = wai.compare(rows, read_jsonl(other).rows).to_dict()
    compared, peak = peak_bytes(lambda: wai.compare(str(path), str(other)).to_dict())
    assert compared == expected
    assert peak < size / 5, (peak, size)


def test_a_rollout_written_twice_counts_once_and_each_row_knows_its_line(tmp_path: Path) -> None:
    path = tmp_path / "twice.jsonl"
    rows = [
        {"prompt": "a", "final_text": "x", "reward": 1.0, "lineage": {"rollout_key": "s/r0"}},
        {"prompt": "b", "final_text": "y", "reward": 0.0, "lineage": {"rollout_key": "s/r1"}},
        {"prompt": "c", "final_text": "z", "reward": 1.0},
    ]
    # the first row given again by a second writer, after a blank line
    lines = [json.dumps(r) for r in rows] + ["", json.dumps({**rows[0], "reward": 0.0})]
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(DuplicateRowsWarning, match="1 row repeats a rollout already read"):
        read = open_row_file(path)
    assert list(read) == rows and len(read) == 3
    assert [read.where(i) for i in range(3)] == [f"{path}, line {n}" for n in (1, 2, 3)]
    assert read[-1] == rows[-1] and read[1:] == rows[1:]
    # the first line of a rollout is the one measured
    with pytest.warns(DuplicateRowsWarning):
        assert wai.pass_at(str(path)).to_dict() == wai.pass_at(rows).to_dict()


def test_a_bad_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = {"prompt": "a", "final_text": "x", "reward": 1.0}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "reward": 3}) + "\n")
    assert len(open_row_file(path)) == 2, "read unchecked, as the measurements check rows"
    with pytest.raises(wai.RowError, match=rf"{path}, line 2: .*reward"):
        open_row_file(path, check=True)
    path.write_text(json.dumps(good) + '\n{"prompt": "cut')
    with pytest.raises(wai.RowError, match=r"line 2: not valid JSON.*resume the run"):
        open_row_file(path)
    path.write_text(json.dumps(good) + "\n[1, 2]\n")
    with pytest.raises(wai.RowError, match="line 2"):
        open_row_file(path)


def test_a_file_changed_after_it_was_read_is_an_error_not_a_wrong_row(tmp_path: Path) -> None:
    path = long_run(tmp_path / "run.jsonl", 3)
    read = open_row_file(path)
    path.write_text("\n" * path.stat().st_size)
    with pytest.raises(wai.RowError, match="changed while its rows were read"):
        list(read)


def test_a_line_reads_back_as_json_loads_reads_it() -> None:
    # orjson reads most lines; an integer past 64 bits, NaN, a lone surrogate or a number past
    # a float's range must come back as json.loads gives them
    texts = [
        '{"a": 1, "a": 2}',
        '{"n": 123456789012345678901234567890, "m": -9223372036854775809}',
        '{"n": 18446744073709551615, "m": -9223372036854775808, "k": 9223372036854775807}',
        '{"f": NaN, "g": Infinity, "h": -Infinity}',
        '{"big": 1e400, "tiny": 1.5e-400, "z": -0.0, "i": -0}',
        '{"s": "\\ud800", "t": "\\u00e9\\n", "u": "caf\u00e9 \U0001f600"}',
        '{"long": 0.1000000000000000055511151231257827021181583404541015625}',
        '{"digits": "12345678901234567890123"}',
        '  {"padded": [1, 2.5, true, null, {}, []]}  ',
    ]
    rng = random.Random(7)
    for _ in range(400):
        value = {
            "i": rng.randint(-(2**70), 2**70) if rng.random() < 0.3 else rng.randint(-999, 999),
            "f": rng.choice([rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randint(-320, 308)]),
            "s": "".join(
                chr(rng.choice([rng.randint(32, 126), rng.randint(160, 0x2FFF)])) for _ in range(8)
            ),
            "l": [rng.random(), None, rng.random() < 0.5],
        }
        texts.append(json.dumps(value, ensure_ascii=rng.random() < 0.5))
    for text in texts:
        raw = text.encode()
        expected, got = json.loads(raw), loads_line(raw)
        assert _same(got, expected), text
    for broken in (b'{"a": }', b'{"a": 1', b'{"a": "\xff"}'):
        with pytest.raises(ValueError) as raised:
            loads_line(broken)
        with pytest.raises(ValueError) as direct:
            json.loads(broken)
        assert str(raised.value) == str(direct.value)


def _same(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down (1 and 1.0, or NaN and NaN, told apart)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_the_rollout_keys_met_answer_as_a_set_of_them_would() -> None:
    # held as a bit per repeat of each situation; a key of another form is kept whole
    keys = [f"shop-{i:03d}-p0-ab12/r{r}" for i in range(4) for r in range(0, 70, 3)]
    keys += ["task-7", "x/r", "x/r05", "x/r-1", "a/rb/r2", "a/r1/r3", "x/r\u0663", "/r0", ""]
    keys += ["x/r1048575", "x/r1048576", "x/r99999999999999999999"]
    met, expected = RolloutKeys(), set()
    rng = random.Random(0)
    for _ in range(2000):
        key = rng.choice(keys)
        assert met.add(key) == (key not in expected)
        expected.add(key)
        asked = rng.choice(keys)
        assert (asked in met) == (asked in expected), asked
    assert len(met) == len(expected) and set(met) == expected
    assert "x/r5" not in met and "shop-000-p0-ab12/r1" not in met and 3 not in met


def test_a_file_opened_with_its_rows_checked_is_not_checked_again(tmp_path: Path) -> None:
    # whileai grade opens its rows file checked; the grading reads it once more, not twice
    from whileai.schema.source import RowSource

    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"prompt": "p", "final_text": "x"}) + "\n")
    checked, unchecked = open_row_file(path, check=True), open_row_file(path)
    assert (checked.checked, unchecked.checked) == (True, False)
    reads = []

    class Counted(type(checked)):  # type: ignore[misc]
        def __iter__(self) -> Any:
            reads.append(1)
            return super().__iter__()

    for rows, walks in ((checked, 0), (unchecked, 1)):
        rows.__class__ = Counted
        reads.clear()
        RowSource(rows, str(path)).check()
        assert len(reads) == walks
    # a file opened without the check still has its bad rows found
    path.write_text(json.dumps({"prompt": 3, "final_text": "x"}) + "\n")
    with pytest.raises(wai.RowError, match="prompt"):
        RowSource(open_row_file(path), str(path)).check()
