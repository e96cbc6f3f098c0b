"""Every report from decontaminate, the summaries, judge agreement and the logprob calls prints
a titled table a person can read and converts to plain data a log or a JSON file takes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import whileai as wai

SOURCE = "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat."


def rows() -> list[dict[str, Any]]:
    out = []
    for t in range(6):
        for k in range(2):
            passed = (t + k) % 3 != 0
            out.append(
                {
                    "task_id": f"t{t}",
                    "prompt": SOURCE if t == 0 else f"question number {t}",
                    "final_text": "I'm sorry, I can't" if t == 5 else "answer",
                    "reward": float(passed),
                    "gold_reward": float(passed if t else not passed),
                    "judge_name": "phi-4",
                    "judge_status": "ok",
                    "model_version": "qwen@v2" if t < 4 else "qwen@v1",
                    "logprob": -2.0 - t,
                    "ref_logprob": -2.5 - t,
                    "n_tokens": 10,
                    "markers": {"chars": 6 + t, "tool_error": t == 2},
                }
            )
    return out


REPORTS: dict[str, Callable[[list[dict[str, Any]]], Any]] = {
    "decontaminate": lambda r: wai.decontaminate(r, {"bench": [SOURCE]}),
    "metric_summary": lambda r: wai.metric_summary(r, n_resamples=500),
    "marker_summary": lambda r: wai.marker_summary(r, n_resamples=500),
    "trace_flag_report": lambda r: wai.trace_flag_report(r),
    "refusal_report": lambda r: wai.refusal_report(r),
    "judge_trust": lambda r: wai.judge_trust(r),
    "judge_agreement": lambda r: wai.judge_agreement(r),
    "logprob_report": lambda r: wai.logprob_report(r),
    "mean_kl": lambda r: wai.mean_kl(r, n_resamples=500),
    "staleness_report": lambda r: wai.staleness_report(r, base_model="qwen@v2"),
}


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_report_prints_and_converts(name: str) -> None:
    report = REPORTS[name](rows())
    text = str(report)
    lines = text.splitlines()
    assert lines[0] == name
    assert len(lines) >= 2 and all(len(line) < 200 for line in lines)
    assert repr(report) == text
    data = report.to_dict()
    json.dumps(data)  # plain data all the way down
    for key in report:
        assert report[key] is getattr(report, key)
    with pytest.raises(KeyError, match="has no key"):
        report["no such key"]


def test_caveats_print_as_notes() -> None:
    few = wai.judge_agreement(rows())
    assert "note: floor not met: 12 gold rows" in str(few)
    stale = wai.staleness_report(rows(), base_model="qwen@v2")
    assert "note: 4 stale rows are usable" in str(stale)
