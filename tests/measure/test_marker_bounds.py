"""A marker's declared bounds, as its run recorded them beside the rows, in the measurements:
a count's interval stops at 0, a declared count is measured as one whatever its task means,
and rows that break the bounds their sidecar records are an error, not a cut interval."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import whileai as wai
from whileai.measure.intervals import skew_corrected_t_interval

#: three tasks' tool errors, four rollouts each: the t interval at 3 tasks reaches below 0
ERRORS = {"a": [0, 0, 0, 0], "b": [0, 1, 0, 0], "c": [1, 0, 2, 1]}


def rows(errors: dict[str, list[int]] = ERRORS) -> list[dict[str, Any]]:
    return [
        {
            "task_id": task,
            "prompt": f"q {task}",
            "final_text": "a",
            "reward": 1.0,
            "markers": {"tool_errors": n, "asked": n > 0},
        }
        for task, counts in errors.items()
        for n in counts
    ]


def saved(path: Path, bounds: dict[str, Any], errors: dict[str, list[int]] = ERRORS) -> Path:
    """``rows`` as a run writes them, its sidecar recording the markers' bounds."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows(errors)))
    sidecar = {"metadata": {"run_id": path.stem, "marker_bounds": bounds}, "complete": True}
    path.with_suffix(".meta.json").write_text(json.dumps(sidecar))
    return path


COUNT = {"tool_errors": [0, None], "asked": [0, 1]}


def test_a_count_declared_by_its_run_never_reaches_below_zero(tmp_path: Path) -> None:
    means = np.array([0.0, 0.25, 1.0])
    plain = skew_corrected_t_interval(means)
    assert plain is not None and plain[0] < 0
    unbounded = wai.marker_summary(rows()).metrics["tool_errors"].ci95
    assert unbounded == pytest.approx(plain)
    run = saved(tmp_path / "run.jsonl", COUNT)
    declared = wai.marker_summary(run).metrics["tool_errors"].ci95
    assert declared == pytest.approx((0.0, plain[1]))
    # metric_summary and whileai report read the same bounds
    assert wai.metric_summary(run).metrics["tool_errors"].ci95 == pytest.approx(declared)


def test_a_declared_count_is_a_count_whatever_its_task_means(tmp_path: Path) -> None:
    # every rollout 0 or 1 tool errors: by its rows alone a share, by its declaration a count
    ones = {"a": [0, 0, 0, 0], "b": [0, 1, 0, 0], "c": [1, 0, 1, 1], "d": [0, 0, 1, 0]}
    means = np.array([0.0, 0.25, 0.75, 0.25])
    run = saved(tmp_path / "run.jsonl", COUNT, ones)
    low, high = skew_corrected_t_interval(means)  # type: ignore[misc]
    assert wai.marker_summary(run).metrics["tool_errors"].ci95 == pytest.approx((max(low, 0), high))
    assert wai.marker_summary(rows(ones)).metrics["tool_errors"].ci95 != pytest.approx(
        (max(low, 0), high)
    )


def test_rows_outside_the_bounds_their_sidecar_records_are_an_error(tmp_path: Path) -> None:
    run = saved(tmp_path / "run.jsonl", {"tool_errors": [0, 1]})
    with pytest.raises(ValueError, match=r"marker 'tool_errors': the rows hold values from 0 to 2"):
        wai.marker_summary(run)
    bad = saved(tmp_path / "bad.jsonl", {"tool_errors": [0, "many"]})
    with pytest.raises(ValueError, match=r"marker_bounds\['tool_errors'\] must be \(low, high\)"):
        wai.marker_summary(bad)


def test_compare_uses_bounds_both_runs_recorded_alike(tmp_path: Path) -> None:
    before = {"a": [0, 0, 0, 0], "b": [0, 0, 0, 0], "c": [0, 1, 0, 0], "d": [1, 0, 0, 0]}
    after = {"a": [0, 1, 0, 0], "b": [1, 1, 1, 0], "c": [0, 1, 1, 1], "d": [1, 0, 0, 1]}
    a = saved(tmp_path / "a.jsonl", COUNT, before)
    b = saved(tmp_path / "b.jsonl", COUNT, after)
    rise = np.array([0.25, 0.75, 0.5, 0.25])
    report = wai.compare(a, b)
    # a declared count: its difference takes the count's interval, though every value is 0 or 1
    assert report.metrics["tool_errors"].ci95 == pytest.approx(skew_corrected_t_interval(rise))
    assert wai.compare_runs(a, b).metrics["tool_errors"].ci95 == pytest.approx(
        report.metrics["tool_errors"].ci95
    )
    # a bound one run recorded and the other did not says nothing of the other's values
    other = saved(tmp_path / "other.jsonl", {}, after)
    assert wai.compare(a, other).metrics["tool_errors"].ci95 == pytest.approx(
        wai.compare(rows(before), rows(after)).metrics["tool_errors"].ci95
    )
