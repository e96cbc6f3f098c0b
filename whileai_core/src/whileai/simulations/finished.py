"""Where a run keeps the rows it has finished.

Without ``output=`` every trajectory stays in memory with its exported row (about the size of
the row twice: docs/parameters.md, "Memory"), handed back as :class:`KeptTrajectories`, which
puts each situation's vector on its rows when they are read. With ``output=`` each row is
exported once, written and let go: the run keeps the byte offset of its line and its counts
(:class:`RunTally`), and hands back ``data.rows`` and ``data.trajectories`` as
:class:`StoredRows` over the file, in plan order, the trajectories with their situation's
privileged block and vector put back on each read (those never go to disk, not even to a
temporary file).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from whileai.executors import privileged_block
from whileai.schema.export import export_line
from whileai.schema.files import RowWriter, file_error
from whileai.schema.records import rollout_key
from whileai.schema.rollout_keys import RolloutKeys
from whileai.schema.rowlist import RowList, RowSequence
from whileai.schema.stored import StoredRows
from whileai.schema.wording import counted
from whileai.simulations.tally import RunTally
from whileai.worlds import Situation


class ExistingRows:
    """The rows a resumed run found in its output, counted as they are read and let go, so a
    run of any length resumes in the memory of its counts: the rows' tally and line offsets,
    their rollout keys (:class:`~whileai.schema.rollout_keys.RolloutKeys`) and each situation's prompt."""

    def __init__(self) -> None:
        self.tally = RunTally()
        self.offsets = array("q")
        self.keys = RolloutKeys()
        #: each situation's prompt, by scenario id
        self.prompts: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, row: Mapping[str, Any], offset: int) -> bool:
        """Count ``row``, whose line starts at ``offset``, unless it has no rollout key or one
        counted already (a rollout written twice is one rollout); whether it was counted."""
        key = rollout_key(row)
        if key is None or not self.keys.add(key):
            return False
        self.offsets.append(offset)
        self.tally.add(row)
        scenario = row.get("scenario_id")
        if scenario:
            self.prompts[str(scenario)] = str(row["prompt"])
        return True

    def where(self, path: Path) -> dict[str, int]:
        """Each counted row's rollout key and the offset of its line in ``path`` (read back
        from the file: only a strategy that learns asks, to be told those rows again)."""
        return {
            row["lineage"]["rollout_key"]: offset
            for row, offset in zip(StoredRows(path, self.offsets), self.offsets, strict=True)
        }


class FinishedRows:
    """The run's finished rows: counted always, kept in memory only without a writer."""

    def __init__(self, writer: RowWriter | None, existing: ExistingRows | None = None) -> None:
        self.writer = writer
        # a resumed run goes on from the counts of the rows it found
        self.tally = existing.tally if existing is not None else RunTally()
        self._offsets = existing.offsets if existing is not None else array("q")
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
            try:
                self._offsets.append(self.writer.write_line(line))
            except OSError as exc:
                raise self._unwritten(exc) from exc
        else:
            self._kept.append(row)
            self._exported.append(exported)
        self.tally.add(row)
        return exported

    def _unwritten(self, exc: OSError) -> OSError:
        """A row that could not be written (a full disk, a file size limit), said so that a
        person hours into a run knows which file, that nothing before it was lost, and how to
        go on."""
        assert self.writer is not None
        on_disk = len(self._offsets)
        return file_error(
            exc,
            self.writer.path,
            f"output={str(self.writer.path)!r}: row {on_disk + 1} could not be written (the "
            f"{on_disk} before it are on disk; once the cause is fixed, the same call with "
            "resume=True plays the rest)",
        )

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
            in_order = order.tolist()
            return (
                KeptTrajectories([self._kept[i] for i in in_order], vectors),
                RowList(self._exported[i] for i in in_order),
            )
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


class KeptTrajectories(RowSequence):
    """A run's trajectories held in memory, in plan order. Each row is handed out as the same
    dict on every read (a change to it stays), with its situation's vector put on when it is
    first read: one list per situation, shared by the situation's rows.

    Taking the offline vectors of every situation was a quarter of the time a 2,000-situation
    run held in memory took, for a field most callers never read; so a vector is taken when a
    trajectory is read, and what the run counts for its report reads the rows without one
    (:meth:`held`)."""

    _item_name = "trajectory"

    def __init__(self, rows: list[dict[str, Any]], vectors: Mapping[str, Sequence[float]]) -> None:
        self._rows = rows
        self._vectors = vectors
        #: which rows have had their vector put on (a vector a reader removes stays removed)
        self._shown_at = bytearray(len(rows))
        self._shown: dict[str, list[float]] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return f"<KeptTrajectories: {counted(len(self), 'row')} in memory>"

    def held(self) -> list[dict[str, Any]]:
        """The rows as held, in plan order, without putting vectors on (what counting the
        run's rows reads: no field of its report is a vector)."""
        return self._rows

    def _item(self, i: int) -> dict[str, Any]:
        row = self._rows[i]
        if self._shown_at[i]:
            return row
        self._shown_at[i] = 1
        scenario = str(row.get("scenario_id"))
        shown = self._shown.get(scenario)
        if shown is None and scenario in self._vectors:
            shown = self._shown[scenario] = list(self._vectors[scenario])
        if shown is not None:
            row["vector"] = shown
        return row
