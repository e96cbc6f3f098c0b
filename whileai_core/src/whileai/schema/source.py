"""Rows from anything a user hands a whileai call: the one answer to "what counts as rows".

Every call that reads rows (the measurements, ``wai.grade``, ``wai.run_judge``, ``wai.rank``)
takes the same things, through :func:`row_source`:

- a list (or any iterable) of row mappings;
- a run: ``simulate()``'s result or a ScoredData, read for its ``trajectories`` when the caller
  needs the privileged block (a judge does), else for its exported ``rows``; any object
  carrying ``.rows`` (a list, or a method returning one) also counts;
- the path of a JSONL file written by ``simulate(output=)`` or ``save()``, read by
  :func:`whileai.schema.row_file.open_row_file` as they are walked, with the sidecar beside
  it.

A single row (a mapping), a bare string that is no file, a number: a TypeError naming the
argument. Rows are checked by the caller that needs them checked, so the measurements keep
their one linear pass; :meth:`RowSource.checked` is the up-front check a judge wants before
it calls a model, with errors naming the file and line when the rows came from one.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from whileai.schema.files import read_sidecar, sidecar_path, user_path
from whileai.schema.records import RowError, check_row, rollout_identity
from whileai.schema.row_file import DuplicateRowsWarning, RowFile, open_row_file
from whileai.schema.stored import StoredRows
from whileai.schema.wording import agreeing, counted


@attrs.frozen
class RowSource:
    """Rows and where they came from."""

    rows: Sequence[Mapping[str, Any]]
    #: one phrase for a report: "12 rows", "runs/a.jsonl", "run 3f2a..."
    label: str
    metadata: dict[str, Any] = attrs.field(factory=dict)
    system_prompts: dict[str, str] = attrs.field(factory=dict)
    #: the repeat policy the rows were sampled under, when a run says so
    repeat_policy: str | None = None
    notes: tuple[str, ...] = ()
    #: the file the rows were read from, and each row's line in it
    path: Path | None = None
    lines: Sequence[int] | None = None
    #: the run object the rows came from, when they came from one
    run: Any = attrs.field(default=None, eq=False, repr=False)

    def where(self, index: int) -> str | None:
        """``runs/a.jsonl, line 7`` for a row read from a file; None otherwise."""
        if self.path is None or self.lines is None:
            return None
        return f"{self.path}, line {self.lines[index]}"

    def checked(self, what: str = "rows") -> list[dict[str, Any]]:
        """Copies of the rows, each validated (:meth:`check`)."""
        return [dict(row) for row in self._checking(what)]

    def check(self, what: str = "rows") -> None:
        """Validate every row (``check_row``), holding none: an empty source is a ValueError
        and a bad row a RowError naming its index, or its file and line. A rows file opened
        with its rows checked (``whileai grade``'s) is not read again for it."""
        # (only a RowFile this package opened says so: a flag on any other sequence is not
        # evidence that its rows were checked)
        if isinstance(self.rows, RowFile) and self.rows.checked and self.rows:
            return
        for _ in self._checking(what):
            pass

    def _checking(self, what: str) -> Iterator[Mapping[str, Any]]:
        if not self.rows:
            if self.path is not None:
                raise ValueError(
                    f"{what}={str(self.path)!r} holds no rows: there is nothing to grade"
                )
            raise ValueError(f"{what} is empty: there is nothing to grade")
        for i, row in enumerate(self.rows):
            if not isinstance(row, Mapping):
                where = self.where(i) or f"{what}[{i}]"
                raise RowError(f"{where} is a {type(row).__name__}, not a row (a mapping)")
            try:
                check_row(row, i)
            except RowError as exc:
                where = self.where(i)
                raise RowError(f"{where or what}: {exc}") from None
            yield row


def row_source(source: Any, what: str = "rows", *, privileged: bool = False) -> RowSource:
    """``source`` as a :class:`RowSource`; ``what`` names the argument in errors.

    ``privileged=True`` reads a run's in-memory trajectories (the privileged block kept, for a
    judge) rather than its exported rows. A RowSource already read is taken as it is (a
    caller that reads rows once hands them on with their metadata)."""
    if isinstance(source, RowSource):
        return source
    if isinstance(source, str | os.PathLike):
        return _from_file(user_path(source), what)
    # a report that carries rows (select()'s kept rows) reads as them, though it indexes
    # like a mapping; a plain mapping is a single row
    carries_rows = not isinstance(source, dict) and isinstance(getattr(source, "rows", None), list)
    if isinstance(source, bytes) or (isinstance(source, Mapping) and not carries_rows):
        raise TypeError(_wrong(what, source))
    trajectories = getattr(source, "trajectories", None)
    # a list in memory, or a streamed run's rows read back from its output (StoredRows)
    if isinstance(trajectories, Sequence) and not isinstance(trajectories, str | bytes):
        metadata = dict(getattr(source, "metadata", None) or {})
        fields = getattr(source, "_report_fields", None) or {}
        policy = getattr(source, "repeat_policy", None) or fields.get("repeat_policy")
        label = f"run {metadata['run_id']}" if metadata.get("run_id") else type(source).__name__
        rows = _unique_given(trajectories if privileged else _carried(source, what), what)
        return RowSource(
            rows,
            label,
            metadata,
            dict(getattr(source, "system_prompts", None) or {}),
            policy,
            run=source,
        )
    if carries_rows or (not isinstance(source, Sequence) and hasattr(source, "rows")):
        rows = _unique_given(_carried(source, what), what)
        return RowSource(rows, counted(len(rows), "row"), run=source)
    if isinstance(source, Sequence):
        rows = _unique_given(source, what)
        return RowSource(rows, counted(len(rows), "row"))
    if isinstance(source, Iterable):
        listed = _unique_given(list(source), what)
        return RowSource(listed, counted(len(listed), "row"))
    raise TypeError(_wrong(what, source))


def rows_of(source: Any, what: str = "rows") -> Sequence[Mapping[str, Any]]:
    """Just the rows of ``source`` (see :func:`row_source`), as the measurements read them."""
    return row_source(source, what).rows


def kept_rows(rows: Sequence[Any], positions: list[int]) -> Sequence[Any]:
    """The rows at ``positions`` of ``rows`` a measurement keeps: still in their file when
    read from one (each read a seek there would cost a file opened), else a list."""
    if isinstance(rows, StoredRows):
        return rows.at(positions)
    return [rows[i] for i in positions]


def _carried(source: Any, what: str) -> Sequence[Mapping[str, Any]]:
    carried = source.rows
    rows = carried() if callable(carried) else carried
    if isinstance(rows, Sequence) and not isinstance(rows, str | bytes):
        return rows
    raise TypeError(f"{what}: .rows of a {type(source).__name__} is {rows!r}, not a list of rows")


def _unique_given(rows: Sequence[Any], what: str) -> Sequence[Any]:
    """``rows`` with each rollout once: a row whose run and ``lineage.rollout_key`` an earlier
    row has (:func:`~whileai.schema.records.rollout_identity`) is that rollout given again
    (``rows + rows``, a list built from two reads of one run), not another sample; two runs of
    one plan fill the same keys with rollouts of their own, and are kept whole. Rows without a
    key are separate samples, however alike they read (one prompt answered "5" four times).
    ``rows`` itself when nothing repeats, or when ``rows`` says each of its rollouts is there
    once (a streamed run's ``StoredRows``)."""
    if getattr(rows, "unique_rollouts", False) is True:
        return rows
    seen: set[str] = set()
    dropped: list[int] = []
    for i, row in enumerate(rows):
        # a plain dict is what nearly every row is: no ABC check for it (this loop runs on
        # every measurement's rows)
        if type(row) is dict:
            lineage = row.get("lineage")
        else:
            lineage = row.get("lineage") if isinstance(row, Mapping) else None
        if lineage is None:
            continue
        key = rollout_identity(row)
        if key is not None:
            if key in seen:
                dropped.append(i)
            seen.add(key)
    if not dropped:
        return rows
    gone = set(dropped)
    shown = ", ".join(map(str, dropped[:5])) + (" and more" if len(dropped) > 5 else "")
    warnings.warn(
        f"{what}: {len(dropped)} of {counted(len(rows), 'row')} "
        f"{agreeing(len(dropped), 'repeats', 'repeat')} a rollout already given (the same run "
        f"and lineage.rollout_key; rows {shown}); each rollout is counted once, and a row number "
        "in a later error counts the rows kept",
        DuplicateRowsWarning,
        stacklevel=4,
    )
    return [row for i, row in enumerate(rows) if i not in gone]


def _wrong(what: str, source: Any) -> str:
    message = (
        f"{what} must be a list of rows (mappings), a run (simulate()'s result or a ScoredData) "
        f"or the path of a JSONL file; got {type(source).__name__}"
    )
    if isinstance(source, Mapping):
        message += ". A single row goes in a list: [row]"
    return message


def _from_file(path: Path, what: str) -> RowSource:
    """A saved run: its rows as written, which never carry the privileged block, and what its
    sidecar says of the run (metadata, system prompts, repeat policy). The rows are read from
    the file as a measurement walks them (:func:`~whileai.schema.row_file.open_row_file`), so
    a file of any length reads in the memory of its line offsets; a rollout written more than
    once (by its ``lineage.rollout_key``) is read once, with a warning."""
    rows = open_row_file(path, what=what)
    sidecar = read_sidecar(sidecar_path(path)) or {}
    metadata = dict(sidecar.get("metadata") or {})
    policy = (sidecar.get("report") or {}).get("repeat_policy") or metadata.get("repeat_policy")
    notes: tuple[str, ...] = ()
    if rows.unprivileged:
        notes = (
            f"rows read from {path}: a saved row never carries the privileged block, so the "
            "judge saw no reference or rubric of the row's own; grade the run in memory for that",
        )
    return RowSource(
        rows,
        str(path),
        metadata,
        dict(sidecar.get("system_prompts") or {}),
        policy,
        notes,
        path=path,
        lines=rows.lines,
    )
