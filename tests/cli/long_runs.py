"""A long run's rows file, for the tests that check a reader of runs holds a bounded number of
rows: the same 2,400 rollouts (600 tasks of four) with text ``padding`` times as long."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def long_run(
    path: Path, padding: int, more: Callable[[int, int], dict[str, Any]] | None = None
) -> Path:
    """Write the run to ``path``: rollout ``i`` is repeat ``i % 4`` of task ``i // 4``, every
    third passes, every fifth met a timeout; ``more(task, i)`` adds fields of the test's own."""
    with path.open("w") as f:
        for i in range(2400):
            s, r = divmod(i, 4)
            row = {
                "prompt": f"q{s} " + "context " * padding,
                "final_text": "x" * padding,
                "reward": float(i % 3 == 0),
                "scenario_id": f"s{s}",
                "lineage": {"situation": s, "repeat": r, "rollout_key": f"s{s}/r{r}"},
                "faults": [{"kind": "timeout"}] if i % 5 == 0 else [],
                "markers": {"tool_errors": i % 2},
                **(more(s, i) if more else {}),
            }
            f.write(json.dumps(row) + "\n")
    return path
