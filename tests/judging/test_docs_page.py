"""docs/judging.md runs as written: its code blocks, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "judging.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)

pytestmark = pytest.mark.plugins


def run_blocks(skip_model: bool) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    for block in BLOCKS:
        if skip_model and '"local:smollm2"' in block:
            continue
        exec(compile(block, str(PAGE), "exec"), namespace)
    return namespace


def test_the_page_has_an_example_per_call() -> None:
    text = "\n".join(BLOCKS)
    for call in ("wai.grade(", "wai.run_judge(", "wai.evaluate(", ".agreement("):
        assert call in text, call


def test_the_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("whileai_verifiers")
    ns = run_blocks(skip_model=True)
    out = capsys.readouterr().out
    assert "graded rows" in out and "MathEqual (verifier)" in out
    assert "concise@2026-11-01" in out
    assert ns["says_yes"].agreement().n_gold == 60
    assert "judge_agreement" in out and "floor not met" not in out


@pytest.mark.slow
def test_the_evaluate_example_runs_on_the_embedded_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("whileai_local")
    ns = run_blocks(skip_model=False)
    assert len(ns["scored"]) == 8
    assert "pass@1" in capsys.readouterr().out
    first, second = ns["twice"]
    assert (second.report()["cache"]["hits"], second.report()["cache"]["misses"]) == (8, 0)
    assert [r["final_text"] for r in second.rows] == [r["final_text"] for r in first.rows]
