"""docs/cost-and-attribution.md runs as written: its code blocks, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cost-and-attribution.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)

pytestmark = pytest.mark.plugins


def test_the_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("whileai_worlds")
    ns: dict[str, Any] = {}
    for block in BLOCKS:
        exec(compile(block, str(PAGE), "exec"), ns)
    out = capsys.readouterr().out
    assert "'cost_usd'" in out and "usd_by_role" in out
    usage = ns["data"].rows[0]["usage"]
    assert usage["cached_input_tokens"] > 0 and usage["cost_usd"] > 0
    cut = ns["cut"]
    assert len(cut.rows) < 16
    # the stop says how many rollouts finished: the rows on disk, not a count taken mid-flight
    assert cut.report()["stopped"].endswith(f"; {len(cut.rows)} of 16 rollouts finished")
    assert len(ns["whole"].rows) == 16
    assert ns["data"].report()["failures"]["agent"]["n"] == 8
    by_source = ns["judged"].report()["failures"]["by_source"]
    assert by_source == {"judge": 8}
    assert ns["judged"].report()["cost"]["usd_by_role"]["judge"] > 0
