"""A rows file read as a sequence that holds where its rows are, not the rows.

Every reader given a path (the measurements, the judges, ``whileai report`` and the other
subcommands) reads it through :func:`open_row_file`: one pass over the file checks every line
is a row, keeps each rollout's first line (a file holding a rollout twice, from two writers or
rows appended twice, counts it once) and notes where each kept line starts and its number.
The rows themselves are parsed again on each read, so a run of a million rows is read in the
memory of its offsets (16 bytes a row) and a measurement's own tables, where reading it into
a list would hold every row at several times its size on disk.
"""

from __future__ import annotations

import os
import warnings
from array import array
from pathlib import Path

from whileai.schema.files import iter_jsonl
from whileai.schema.records import check_row, rollout_identity
from whileai.schema.rollout_keys import RolloutKeys
from whileai.schema.stored import StoredRows
from whileai.schema.wording import agreeing, counted


class DuplicateRowsWarning(UserWarning):
    """The same rollout was given more than once: a run file holding it twice (two writers,
    rows appended twice), or a list of rows repeating one (``rows + rows``). Every reader keeps
    the first and says how many it dropped."""


class RowFile(StoredRows):
    """The rows of a JSONL file, each rollout once, in the file's order; read from the file
    on each access (see :class:`~whileai.schema.stored.StoredRows`)."""

    def __init__(
        self,
        path: Path,
        offsets: array[int],
        lines: array[int],
        *,
        unprivileged: int,
        checked: bool = False,
    ) -> None:
        super().__init__(path, offsets)
        #: each row's line number in the file (1 for the first line)
        self.lines = lines
        #: how many rows carry no ``privileged`` block (a saved row never does)
        self.unprivileged = unprivileged
        #: every row passed ``check_row`` as the file was opened (a reader need not again)
        self.checked = checked

    def where(self, index: int) -> str:
        """``runs/a.jsonl, line 7`` for the row at ``index``."""
        return f"{self.path}, line {self.lines[index]}"

    def __repr__(self) -> str:
        return f"<RowFile: {counted(len(self), 'row')} in {self.path}>"


def open_row_file(
    path: str | os.PathLike[str], *, what: str = "rows", check: bool = False
) -> RowFile:
    """``path``'s rows as a :class:`RowFile`, after one pass that reads each line once.

    A line that is not a JSON object is a RowError naming the file and line (an unfinished last
    line says to resume the run), as :func:`~whileai.schema.files.read_jsonl` says it; with
    ``check=True`` so is a row ``check_row`` refuses. A rollout given again (the same run and
    ``lineage.rollout_key``, :func:`~whileai.schema.records.rollout_identity`) is left out,
    with a :class:`DuplicateRowsWarning` saying how many."""
    offsets, lines = array("q"), array("q")
    seen = RolloutKeys()
    dropped = unprivileged = 0
    for row, line, offset in iter_jsonl(path, what=what):
        if check:
            check_row(row, where=f"{path}, line {line}")
        key = rollout_identity(row)
        if key is not None and not seen.add(key):
            dropped += 1
            continue
        offsets.append(offset)
        lines.append(line)
        unprivileged += "privileged" not in row
    if dropped:
        warnings.warn(
            f"{path}: {counted(dropped, 'row')} {agreeing(dropped, 'repeats', 'repeat')} a "
            "rollout already read (the same run and lineage.rollout_key); each rollout is "
            "counted once",
            DuplicateRowsWarning,
            # (from row_source: the warning points at the call that named the file)
            stacklevel=4,
        )
    return RowFile(Path(path), offsets, lines, unprivileged=unprivileged, checked=check)
