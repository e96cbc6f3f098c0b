"""``RowList``: the exported rows a run or a scoring pass hands back."""

from __future__ import annotations

from typing import Any


class RowList(list[dict[str, Any]]):
    """The exported rows: a list, and ``data.rows()`` returns the same list."""

    def __call__(self) -> RowList:
        return self
