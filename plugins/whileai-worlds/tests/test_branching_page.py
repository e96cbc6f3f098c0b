"""docs/branching.md runs as written: its code blocks, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[3] / "docs" / "branching.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)


def test_the_examples_run_and_the_hasty_branch_loses_the_limit_cases(
    capsys: pytest.CaptureFixture[str],
) -> None:
    namespace: dict[str, Any] = {}
    for block in BLOCKS:
        exec(compile(block, str(PAGE), "exec"), namespace)
    out = capsys.readouterr().out
    # two of the four transfers pass the limit: the hasty decision loses half the reward
    assert "compare (b - a, paired by task)" in out and "headline (reward*): -0.500" in out
    again, hurried = namespace["again"].rows(), namespace["hurried"].rows()
    assert [r["reward"] for r in again] == [1.0] * 8
    over = [r for r in namespace["hurried"].trajectories if r["privileged"]["goal"]["complication"]]
    assert over and all(r["reward"] == 0.0 for r in over)
    assert len(hurried) == 8
