"""What every subcommand shares: one way to fail, to print JSON, and to read a run's rows."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from whileai.schema.files import a_folder, read_sidecar, sidecar_path, user_path
from whileai.schema.records import RowError
from whileai.schema.row_file import RowFile, open_row_file

#: Exit codes: the work was done, the work (or a check) failed, the command was misused.
OK, FAILED, USAGE = 0, 1, 2


class UsageError(Exception):
    """The command was given something it cannot use (exit 2): a missing file, a bad key."""


def print_json(value: Any) -> None:
    """``value`` as JSON on stdout, and nothing else there."""
    json.dump(value, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


@contextmanager
def refused_as_misuse() -> Iterator[None]:
    """A value the call refuses (a TypeError or ValueError: a band, an n-gram length the
    options let through) as the command's misuse, one line and exit 2; a row of the file that
    is not one stays a RowError, named with its line."""
    try:
        yield
    except RowError:
        raise
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def read_run(path: str, *, empty: bool = False) -> tuple[RowFile, dict[str, Any]]:
    """A run's rows and its sidecar (``{}`` when the file has none); a UsageError names a
    path that is not a rows file, or one that holds no rows (unless ``empty``: a command
    whose output may be empty too), and a RowError the file and line of a row that is not one
    (the measurements only know a row's place in the list). The rows are read from the file
    as a command walks them (:class:`~whileai.schema.row_file.RowFile`), each rollout once:
    a run of any length is read in the memory of its line offsets."""
    target = user_path(path)
    if target.is_dir():
        raise UsageError(a_folder(target))
    if not target.is_file():
        raise UsageError(f"{path}: no such rows file (a .jsonl that simulate(output=) wrote)")
    rows = open_row_file(target, check=True)
    meta = read_sidecar(sidecar_path(target)) or {}
    if not empty and len(rows) == 0:
        raise UsageError(
            f"{path}: holds no rows, so there is nothing to measure"
            + (
                "; its run has not finished a rollout yet (its sidecar says it is unfinished)"
                if meta.get("complete") is False
                else ""
            )
        )
    return rows, meta


def registry_for(args: Any, more: list[str] | tuple[str, ...] = ()) -> Any:
    """The installed plugins, plus the ones ``--plugin`` (and ``more``) name."""
    from whileai.commands.config import load_plugins
    from whileai.registry import Registry

    names = [*getattr(args, "plugin", []), *more]
    return Registry.load(plugins=load_plugins(names, "--plugin"))
