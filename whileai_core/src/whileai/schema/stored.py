"""``StoredRows``: the rows a run streamed to its output file, read back from it when asked.

A run with ``output=`` keeps no row in memory once it is on disk; ``data.rows`` and
``data.trajectories`` are this sequence over the file, holding only where each row's line
starts (8 bytes a row), in plan order. Each read parses the line again, so a row read twice
is two equal dicts, and changing one changes nothing on disk. ``attach`` puts back what never
goes to disk (a trajectory's privileged block and vector) on every read.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, SupportsIndex

from whileai.schema.jsonline import loads_line
from whileai.schema.records import RowError
from whileai.schema.rowlist import RowSequence
from whileai.schema.wording import counted

Attach = Callable[[dict[str, Any]], dict[str, Any]]


class Offsets(Protocol):
    """Byte offsets by position: a list, an ``array("q")`` or a numpy array of int64."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> SupportsIndex: ...

    def __iter__(self) -> Iterator[SupportsIndex]: ...


class StoredRows(RowSequence):
    """A run's rows in ``path``, at byte ``offsets``, in that order; a sequence (and callable,
    as ``data.rows()`` is) whose items are parsed from the file on each read."""

    #: every row is one rollout, once: the engine wrote each key once (measurements skip the
    #: pass that drops a rollout given twice)
    unique_rollouts = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        offsets: Sequence[int] | Offsets,
        attach: Attach | None = None,
    ) -> None:
        self.path = Path(path)
        self._offsets = offsets
        self._attach = attach

    def __len__(self) -> int:
        return len(self._offsets)

    def _item(self, i: int) -> dict[str, Any]:
        with self._open() as f:
            return self._read(f, self._offsets[i])

    def _items(self, positions: range) -> list[dict[str, Any]]:
        with self._open() as f:
            return [self._read(f, self._offsets[i]) for i in positions]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self._open() as f:
            for offset in self._offsets:
                yield self._read(f, offset)

    def __call__(self) -> StoredRows:
        return self

    def at(self, positions: Iterable[int]) -> StoredRows:
        """The rows at ``positions`` (in that order), still in the file: a measurement that
        keeps some of a file's rows (``select``, ``decontaminate``) hands them back without
        reading them."""
        offsets = array("q", (self._offsets[i].__index__() for i in positions))
        return StoredRows(self.path, offsets, self._attach)

    def __repr__(self) -> str:
        return f"<StoredRows: {counted(len(self), 'row')} in {self.path}>"

    def _open(self) -> IO[bytes]:
        try:
            return open(self.path, "rb")
        except FileNotFoundError:
            raise FileNotFoundError(
                f"the run's rows are read from its output {str(self.path)!r}, which is gone; "
                "keep the file for as long as you read the run"
            ) from None

    def _read(self, f: IO[bytes], offset: SupportsIndex) -> dict[str, Any]:
        at = offset.__index__()
        # rows walked in file order follow one another: a seek would drop the read buffer
        if f.tell() != at:
            f.seek(at)
        line = f.readline()
        try:
            row = loads_line(line)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            raise RowError(
                f"{self.path} changed while its rows were read: the row that was at byte "
                f"{offset} is no longer a JSON object there"
            )
        return self._attach(row) if self._attach is not None else row
