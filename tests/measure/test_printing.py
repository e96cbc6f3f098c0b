"""Every report prints a readable table with its caveats, and converts to plain data."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import whileai as wai


def rows(scores: list[list[Any]], **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "task_id": f"t{i}",
            "prompt": f"q{i}",
            "final_text": "a",
            "reward": r,
            "markers": {"chars": 3 + i},
            **extra,
        }
        for i, group in enumerate(scores)
        for r in group
    ]


SMALL = rows([[1, 0, 1], [0.5, 1]])  # few tasks, few repeats, a partial row
A = rows([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1]], lineage={"system_prompt_sha": "x"})
B = rows([[1, 1, 1, 1], [1, 0, 1, 0], [1, 1, 1, 1]], lineage={"system_prompt_sha": "y"})

REPORTS: dict[str, Callable[[], Any]] = {
    "pass_at": lambda: wai.pass_at(SMALL),
    "group_signal": lambda: wai.group_signal(SMALL),
    "compare": lambda: wai.compare(SMALL, A, run_std=0.01, run_std_runs=2),
    "compare_runs": lambda: wai.compare_runs(A, B),
    "delta_report": lambda: wai.delta_report(A, B),
    "eval_variance": lambda: wai.eval_variance(A, B),
    "noise_band": lambda: wai.noise_band(0.01, df=1),
    "holdout_size": lambda: wai.holdout_size(0.1, before=SMALL),
    "select": lambda: wai.select(SMALL),
}


@pytest.mark.parametrize("call", sorted(REPORTS))
def test_report_prints_title_table_and_caveats(call: str) -> None:
    report = REPORTS[call]()
    text = str(report)
    assert text.splitlines()[0].startswith(call)
    assert len(text.splitlines()) >= 3
    warnings = report.get("warnings", [])
    assert report.notes or warnings, f"{call} on this input has caveats to print"
    for note in report.notes:
        assert f"note: {note}" in text
    for warning in warnings:
        assert f"warning: {warning}" in text
    assert repr(report) == text
    json.dumps(report.to_dict())
    assert set(report) == set(report.to_dict())
    with pytest.raises(KeyError, match="has no key"):
        report["no such key"]
