"""Crash-safe output: rows appended and flushed one by one, the sidecar replaced atomically,
and the reading side that lets a killed run resume without duplicating or losing a row.

Every row goes through ``export_row`` on its way to disk. A process killed mid-write leaves at
most one partial last line; ``load_rows`` drops it (and cuts it from the file) so the resumed
run writes that rollout again, once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from whileai.simulations.privacy import export_row

SIDECAR_SUFFIX = ".meta.json"


def sidecar_path(output: str | os.PathLike[str]) -> Path:
    """``runs/x.jsonl`` -> ``runs/x.meta.json``; any other name gets ``.meta.json`` appended."""
    path = Path(output)
    if path.suffix == ".jsonl":
        return path.with_suffix(SIDECAR_SUFFIX)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def row_line(row: Mapping[str, Any]) -> str:
    """One exported row as a JSONL line."""
    return json.dumps(export_row(row), ensure_ascii=False, default=str) + "\n"


class RowWriter:
    """Appends exported rows to a JSONL file, flushing (and optionally fsyncing) each one."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, row: Mapping[str, Any]) -> None:
        if self._file is None:
            raise ValueError(f"{self.path} is closed")
        # One write per row: a kill leaves either the whole line or a partial last line.
        self._file.write(row_line(row))
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_rows(path: str | os.PathLike[str], rows: list[Mapping[str, Any]]) -> None:
    """Write rows to a fresh file atomically (temp file + replace): ``data.save``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(row_line(row))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def load_rows(path: str | os.PathLike[str], *, repair: bool = True) -> list[dict[str, Any]]:
    """The rows of a JSONL file. A partial last line (a killed writer) is dropped and, with
    ``repair``, cut from the file; a bad line anywhere else is an error naming the line."""
    target = Path(path)
    if not target.exists():
        return []
    data = target.read_bytes()
    rows: list[dict[str, Any]] = []
    offset = 0
    good_end = 0
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        is_last = number == len(lines)
        end = offset + len(raw) + (0 if is_last else 1)
        if raw.strip():
            try:
                value = json.loads(raw)
            except ValueError:
                if is_last:
                    break  # the partial line a killed writer left
                raise ValueError(f"{target}: line {number} is not valid JSON") from None
            if not isinstance(value, dict):
                raise ValueError(f"{target}: line {number} is not a JSON object")
            if is_last:
                break  # complete JSON but no newline: the write may have been cut; redo it
            rows.append(value)
        good_end = end
        offset = end
    if repair and good_end < len(data):
        with open(target, "r+b") as f:
            f.truncate(good_end)
    return rows


def write_sidecar(path: str | os.PathLike[str], content: Mapping[str, Any]) -> None:
    """Replace the sidecar atomically: a reader sees the old file or the new one, never half."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(content, f, ensure_ascii=False, indent=2, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def read_sidecar(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    target = Path(path)
    if not target.exists():
        return None
    with open(target, encoding="utf-8") as f:
        value = json.load(f)
    if not isinstance(value, dict):
        raise ValueError(f"{target} is not a whileai run sidecar (not a JSON object)")
    return value


def resume_mismatch(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between the plan a run was started with and the one resuming it."""
    keys = sorted(set(saved) | set(current))
    return [
        f"{k}: saved {saved.get(k)!r}, now {current.get(k)!r}"
        for k in keys
        if saved.get(k) != current.get(k)
    ]
