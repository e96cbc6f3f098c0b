"""What ``wai.grade`` and ``wai.run_judge`` read: rows in memory, a run, or a saved JSONL.

A run (``simulate()``'s :class:`~whileai.simulations.data.Simulation`, or a ScoredData) gives
its trajectories, so the judge sees the privileged block; a file gives its rows as saved, which
never carry it. Every row is checked up front, so a bad one is an error that names its index
(or its file and line) before any judge is called.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from whileai.simulations.persistence import read_sidecar, sidecar_path
from whileai.simulations.schema import RowError, check_row


@attrs.frozen
class RowSource:
    """Rows to grade and where they came from."""

    rows: list[dict[str, Any]]
    #: one phrase for the report: "12 rows", "runs/a.jsonl", "simulation run 3f2a..."
    label: str
    metadata: dict[str, Any] = attrs.field(factory=dict)
    system_prompts: dict[str, str] = attrs.field(factory=dict)
    #: the repeat policy the rows were sampled under, when a run says so
    repeat_policy: str | None = None
    notes: tuple[str, ...] = ()


def read_source(rows: Any) -> RowSource:
    """A :class:`RowSource` for ``rows``: a list of row dicts, a Simulation or ScoredData
    (its trajectories), or a path to a JSONL file written by ``simulate(output=)`` /
    ``save()``."""
    if isinstance(rows, str | os.PathLike):
        return _read_file(Path(rows))
    if isinstance(rows, Mapping):
        raise TypeError(
            "rows= is a single row (a mapping); pass a list of rows, a run, or a JSONL path: [row]"
        )
    trajectories = getattr(rows, "trajectories", None)
    if isinstance(trajectories, list):
        metadata = dict(getattr(rows, "metadata", None) or {})
        fields = getattr(rows, "_report_fields", None) or {}
        policy = getattr(rows, "repeat_policy", None) or fields.get("repeat_policy")
        label = f"run {metadata['run_id']}" if metadata.get("run_id") else type(rows).__name__
        return RowSource(
            _checked(trajectories, "rows"),
            label,
            metadata,
            dict(getattr(rows, "system_prompts", None) or {}),
            policy,
        )
    if isinstance(rows, bytes) or not isinstance(rows, Iterable):
        raise TypeError(
            "rows= must be a list of row dicts, a run (simulate()'s result or a ScoredData) or "
            f"the path of a JSONL file; got {type(rows).__name__}"
        )
    listed = _checked(list(rows), "rows")
    return RowSource(listed, f"{len(listed)} rows")


def _checked(rows: list[Any], what: str) -> list[dict[str, Any]]:
    if not rows:
        raise ValueError(f"{what} is empty: there is nothing to grade")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise RowError(f"{what}[{i}] is a {type(row).__name__}, not a row (a mapping)")
        try:
            check_row(row, i)
        except RowError as exc:
            raise RowError(f"{what}: {exc}") from None
        out.append(dict(row))
    return out


def _read_file(path: Path) -> RowSource:
    """Every line of a JSONL file as a row. Unlike resuming a run, nothing is dropped or
    repaired: a line that is not a JSON object is an error naming the file and line."""
    if not path.is_file():
        raise FileNotFoundError(f"rows={str(path)!r}: no such file")
    rows: list[Any] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise RowError(f"{path}: line {number} is not valid JSON ({exc})") from None
            if not isinstance(value, dict):
                raise RowError(f"{path}: line {number} is not a JSON object")
            try:
                check_row(value, len(rows))
            except RowError as exc:
                raise RowError(f"{path}: line {number}: {exc}") from None
            rows.append(value)
    if not rows:
        raise ValueError(f"rows={str(path)!r} holds no rows: there is nothing to grade")
    checked = _checked(rows, str(path))
    sidecar = read_sidecar(sidecar_path(path)) or {}
    notes: tuple[str, ...] = ()
    if any("privileged" not in row for row in checked):
        notes = (
            f"rows read from {path}: a saved row never carries the privileged block, so the "
            "judge saw no reference or rubric of the row's own; grade the run in memory for that",
        )
    metadata = dict(sidecar.get("metadata") or {})
    policy = (sidecar.get("report") or {}).get("repeat_policy") or metadata.get("repeat_policy")
    return RowSource(
        checked, str(path), metadata, dict(sidecar.get("system_prompts") or {}), policy, notes
    )
