"""The sequences of rows a run or a scoring pass hands back: ``RowList`` (exported rows in
memory) and :class:`RowSequence`, what a sequence of rows that is not a list shares with one."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, overload


class RowList(list[dict[str, Any]]):
    """The exported rows: a list, and ``data.rows()`` returns the same list."""

    def __call__(self) -> RowList:
        return self


class RowSequence(Sequence[dict[str, Any]]):
    """A sequence of rows that indexes, slices, compares and concatenates as the list of its
    rows would (a run's rows read back from its output, its trajectories held in memory).
    A subclass gives ``__len__`` and ``_item(i)``, the item at a position from the start; one
    that reads a batch cheaper than item by item also gives ``_items`` and ``__iter__``."""

    #: what an IndexError calls an item
    _item_name = "row"

    @abstractmethod
    def _item(self, i: int) -> dict[str, Any]:
        """The item at position ``i`` (0 <= i < len)."""

    def _items(self, positions: range) -> list[dict[str, Any]]:
        """The items at ``positions`` (a slice's)."""
        return [self._item(i) for i in positions]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self)):
            yield self._item(i)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return self._items(range(len(self))[index])
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"{self._item_name} {index} of {n}")
        return self._item(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*self, *other]

    def __radd__(self, other: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        # a list of earlier rows on the left (``kept = kept + data.rows`` across a training
        # loop's calls): list's own + takes only lists
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return [*other, *self]
