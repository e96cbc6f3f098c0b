"""What the report reads from a run, in one walk over its rows.

The page groups a run's rows several ways (by arm, by each dimension, by fault kind) and
measures pass@k at every k it plots. Holding the rows to do that held the whole run: 430 MB
for a 97 MB rows file, and a run of a million rollouts would not fit. One walk instead builds
the measurements' task table (a few bytes a row), each group as the positions of its rows,
the counts the page prints, and the rows whose transcripts it lays out; every section reads
that, so memory follows the number of rows in bytes, not in dicts, and the file is read once.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from whileai.measure._tasks import TaskTable, task_table
from whileai.schema.export import export_row
from whileai.schema.rowlist import RowSequence

Row = Mapping[str, Any]


class ExportedRows(RowSequence):
    """``rows`` as they go to disk (``export_row``), each exported as it is read: the page
    reads nothing a rows file would not hold, and holds no copy of the run to be sure of it."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self._rows = rows
        # a rows file read with its repeats dropped says so; its export does too
        self.unique_rollouts = getattr(rows, "unique_rollouts", False)

    def __len__(self) -> int:
        return len(self._rows)

    def _item(self, i: int) -> dict[str, Any]:
        return export_row(self._rows[i])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for row in self._rows:
            yield export_row(row)


@attrs.define
class FaultTally:
    """The rows that met one fault kind (or none): how many, how many passed, and each judged
    row's reward, in row order."""

    rollouts: int = 0
    passed: int = 0
    rewards: array[float] = attrs.field(factory=lambda: array("d"))


@attrs.define
class RunDigest:
    """One walk's worth of a run, for :mod:`whileai.viewing.sections`."""

    #: the measurements' table over every row, markers included
    table: TaskTable
    rows: int
    errored: int
    #: rows with a reward (not None), and which rows those are
    judged: int
    has_reward: array[int]
    #: binary rewards (0 or 1) per task id, which sets the largest k plotted
    binary_by_task_id: Counter[str]
    #: arm -> the positions of its rows (rows without an arm are in no group)
    arms: dict[str, array[int]]
    #: dimension name -> value -> the positions of the rows with that value
    dimensions: dict[str, dict[str, array[int]]]
    #: fault kind -> its rows' tally (a row that met two kinds counts under each)
    faults: dict[str, FaultTally]
    #: rows that met no fault
    clean: FaultTally
    #: marker name -> whether every value it took is a flag (a bool, 0 or 1)
    marker_flags: dict[str, bool]
    any_markers: bool
    any_gold: bool
    #: the first rows, whose transcripts the page shows
    shown: list[dict[str, Any]]


def digest(rows: Iterable[Row], max_transcripts: int) -> RunDigest:
    """Read ``rows`` (exported: :class:`ExportedRows`) once. Each row is checked by the table's pass (a bad row is an error
    naming its index, as every measurement's is) before anything else reads it."""
    counts: dict[str, int] = {"errored": 0, "judged": 0}
    has_reward = array("b")
    binary: Counter[str] = Counter()
    arms: dict[str, array[int]] = {}
    dimensions: dict[str, dict[str, array[int]]] = {}
    faults: dict[str, FaultTally] = {}
    clean = FaultTally()
    flags: dict[str, bool] = {}
    seen = {"markers": False, "gold": False}
    shown: list[dict[str, Any]] = []

    def read(i: int, row: Row) -> None:
        reward = row.get("reward")
        judged = reward is not None
        has_reward.append(judged)
        counts["judged"] += judged
        if row.get("error"):
            counts["errored"] += 1
        if reward in (0, 1, 0.0, 1.0):
            binary[str(row.get("task_id"))] += 1
        arm = row.get("arm")
        if arm is not None:
            arms.setdefault(str(arm), array("q")).append(i)
        for name, value in (row.get("scenario_dimensions") or {}).items():
            if isinstance(name, str) and value is not None:
                dimensions.setdefault(name, {}).setdefault(str(value), array("q")).append(i)
            elif isinstance(name, str):
                # a dimension named only with None values still gets its plot
                dimensions.setdefault(name, {})
        kinds = {str(f.get("kind")) for f in row.get("faults") or [] if isinstance(f, Mapping)}
        for tally in [faults.setdefault(k, FaultTally()) for k in kinds] or [clean]:
            tally.rollouts += 1
            tally.passed += reward == 1
            if reward is not None:
                tally.rewards.append(float(reward))
        markers = row.get("markers")
        if markers:
            seen["markers"] = True
            for name, value in markers.items():
                flag = isinstance(value, bool) or value in (0, 1)
                flags[name] = flags.get(name, True) and flag
        if row.get("gold_reward") is not None:
            seen["gold"] = True
        if len(shown) < max_transcripts:
            shown.append(dict(row))

    def walked() -> Iterator[Row]:
        for i, row in enumerate(rows):
            yield row
            # read once the table's pass has checked the row
            read(i, row)

    table = task_table(walked())
    return RunDigest(
        table=table,
        rows=table.counts.rows,
        errored=counts["errored"],
        judged=counts["judged"],
        has_reward=has_reward,
        binary_by_task_id=binary,
        arms=dict(sorted(arms.items())),
        dimensions={
            name: dict(sorted(groups.items())) for name, groups in sorted(dimensions.items())
        },
        faults=dict(sorted(faults.items())),
        clean=clean,
        marker_flags=flags,
        any_markers=seen["markers"],
        any_gold=seen["gold"],
        shown=shown,
    )
