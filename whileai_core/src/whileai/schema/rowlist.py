"""The sequences of rows a run or a scoring pass hands back: ``RowList`` (exported rows in
memory) and :class:`RowSequence`, what a sequence of rows that is not a list shares with one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class RowList(list[dict[str, Any]]):
    """The exported rows: a list, and ``data.rows()`` returns the same list."""

    def __call__(self) -> RowList:
        return self


class RowSequence(Sequence[dict[str, Any]]):
    """A sequence of rows that compares and concatenates as the list of its rows would (a
    run's rows read back from its output, its trajectories held in memory)."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*self, *other]
