"""Where a run keeps the rows it has finished.

Without ``output=`` every trajectory stays in memory with its exported row (about the size of
the row twice: docs/parameters.md, "Memory"). With ``output=`` each row is exported once, written
and let go: the run keeps the byte offset of its line and its counts (:class:`RunTally`), and
hands back ``data.rows`` and ``data.trajectories`` as :class:`StoredRows` over the file, in
plan order, the trajectories with their situation's privileged block and vector put back on
each read (those never go to disk, not even to a temporary file).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.executors import privileged_block
from whileai.schema.export import export_line
from whileai.schema.files import RowWriter
from whileai.schema.rowlist import RowList
from whileai.schema.stored import StoredRows
from whileai.simulations.tally import RunTally
from whileai.worlds import Situation


class FinishedRows:
    """The run's finished rows: counted always, kept in memory only without a writer."""

    def __init__(self, writer: RowWriter | None) -> None:
        self.writer = writer
        self.tally = RunTally()
        self._offsets = array("q")
        self._kept: list[dict[str, Any]] = []
        self._exported: list[dict[str, Any]] = []

    def __len__(self) -> int:
        return self.tally.n

    @property
    def streams(self) -> bool:
        return self.writer is not None

    def add(self, row: dict[str, Any]) -> dict[str, Any]:
        """Take one finished trajectory: export it (once), write it or keep it, count it.
        Returns the exported row; with a writer nothing else holds it."""
        exported, line = export_line(row)
        if self.writer is not None:
            # on disk before anything else can fail: a row that was played is never lost
            self._offsets.append(self.writer.write_line(line))
        else:
            self._kept.append(row)
            self._exported.append(exported)
        self.tally.add(row)
        return exported

    def add_existing(self, row: Mapping[str, Any], offset: int) -> None:
        """Count a row a resumed run found on disk, at ``offset`` in the output."""
        self._offsets.append(offset)
        self.tally.add(row)

    def at(self, offsets: Sequence[int]) -> StoredRows:
        """Rows of this run's output at ``offsets`` (a resumed search's earlier batches)."""
        assert self.writer is not None
        return StoredRows(self.writer.path, offsets)

    def handed_back(
        self, situations: Mapping[str, Situation], vectors: Mapping[str, Sequence[float]]
    ) -> tuple[Sequence[dict[str, Any]], Sequence[dict[str, Any]]]:
        """``data.trajectories`` and ``data.rows``, in plan order, each with its situation's
        vector (in memory)."""
        order = self.tally.plan_order()
        if self.writer is None:
            trajectories = [self._kept[i] for i in order.tolist()]
            # one list per situation, shared by its rows
            shown: dict[str, list[float]] = {}
            for row in trajectories:
                scenario = str(row.get("scenario_id"))
                if scenario not in shown and scenario in vectors:
                    shown[scenario] = list(vectors[scenario])
                if scenario in shown:
                    row["vector"] = shown[scenario]
            return trajectories, RowList(self._exported[i] for i in order.tolist())
        import numpy as np  # here: importing the engine must not import numpy

        # 8 bytes a row, in plan order
        offsets = np.frombuffer(self._offsets, dtype=np.int64)[order]

        def trajectory(row: dict[str, Any]) -> dict[str, Any]:
            scenario = str(row.get("scenario_id"))
            situation = situations.get(scenario)
            if situation is not None:
                row["privileged"] = privileged_block(situation)
            vector = vectors.get(scenario)
            if vector is not None:
                row["vector"] = list(vector)
            return row

        path = self.writer.path
        return StoredRows(path, offsets, trajectory), StoredRows(path, offsets)
