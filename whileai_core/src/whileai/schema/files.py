"""Crash-safe output: rows appended and flushed one by one, the sidecar replaced atomically,
and the reading side that lets a killed run resume without duplicating or losing a row.

Every row goes through ``export_row`` on its way to disk. A process killed mid-write leaves at
most one partial last line; ``read_jsonl(tail="cut")`` drops it (and cuts it from the file) so the resumed
run writes that rollout again, once.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

import attrs

from whileai.schema.export import export_line
from whileai.schema.jsonline import loads_line
from whileai.schema.records import RowError
from whileai.schema.report import Report, json_default

SIDECAR_SUFFIX = ".meta.json"


#: How a run that did not finish is continued, in the words every place that says so uses.
RESUME_HINT = (
    "the same simulate() call with resume=True, or whileai run CONFIG.toml --resume, continues it"
)


def a_folder(path: Path) -> str:
    """What to say of a folder given where a rows file belongs: which it is, and the rows
    files in it a person probably meant."""
    inside = sorted(p.name for p in path.glob("*.jsonl"))
    named = f" (it holds {', '.join(inside[:3])}{', ...' if len(inside) > 3 else ''})"
    return (
        f"{str(path)!r} is a folder, not a file of rows: name the JSONL file itself"
        f"{named if inside else ''}"
    )


def user_path(path: str | os.PathLike[str]) -> Path:
    """A path as the user wrote it, ``~`` read as their home folder as a shell reads it.
    Python's file functions take ``~`` for a folder of that name: ``output="~/runs/x.jsonl"``
    would make a ``~`` folder in the working directory, which ``rm -rf ~`` then misreads."""
    return Path(os.path.expanduser(os.fspath(path)))


def beside(rows: str | os.PathLike[str], suffix: str) -> Path:
    """A file beside a rows file, named after it: ``beside("runs/x.jsonl", ".meta.json")`` is
    ``runs/x.meta.json``; a name not ending in ``.jsonl`` gets ``suffix`` appended."""
    path = Path(rows)
    name = path.name.removesuffix(".jsonl") if path.suffix == ".jsonl" else path.name
    return path.with_name(name + suffix)


def sidecar_path(output: str | os.PathLike[str]) -> Path:
    """``runs/x.jsonl`` -> ``runs/x.meta.json``; any other name gets ``.meta.json`` appended."""
    return beside(output, SIDECAR_SUFFIX)


def file_error(exc: OSError, path: str | os.PathLike[str], said: str) -> OSError:
    """``exc`` told again as ``said`` (which file of a run, and what was being done to it),
    of the same class and errno, so code that handles a full disk or a denied folder by kind
    still does. The operating system's own text names a temporary file or a parent folder,
    and leaves a reader to work out which file of the run it was, and what to do."""
    cause = exc.strerror or str(exc)
    in_the_way = _file_in_the_way(Path(path))
    if in_the_way is not None:
        cause = f"{str(in_the_way)!r} is a file, not a folder"
    message = f"{said}: {cause}"
    if exc.errno is None:
        return OSError(message)
    return OSError(exc.errno, message)


def _file_in_the_way(target: Path) -> Path | None:
    """The nearest existing parent of ``target`` when it is not a folder: what makes a path
    inside it impossible to create."""
    for parent in target.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def row_line(row: Mapping[str, Any]) -> str:
    """One exported row as a JSONL line."""
    return export_line(row)[1].decode()


class RowWriter:
    """Appends exported rows to a JSONL file, flushing (and optionally fsyncing) each one,
    and says where in the file each row's line starts (a streamed run reads it back there)."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        # unbuffered: each line goes to the file in one write call, with no copy into a buffer
        # and no flush after it
        self._file: IO[bytes] | None = open(self.path, "ab", buffering=0)  # noqa: SIM115
        #: the byte offset the next line starts at
        self.offset = self._file.seek(0, os.SEEK_END)

    def write_line(self, line: bytes) -> int:
        """Append one line :func:`~whileai.schema.export.export_line` made; returns the byte
        offset it starts at."""
        if self._file is None:
            raise ValueError(f"{self.path} is closed")
        # One write per row: a kill leaves either the whole line or a partial last line.
        written = self._file.write(line)
        while written < len(line):
            # a short write (a signal, a nearly full disk): the rest follows it
            more = self._file.write(line[written:])
            if not more:
                raise OSError(f"{self.path}: wrote {written} of {len(line)} bytes of a row")
            written += more
        if self._fsync:
            os.fsync(self._file.fileno())
        start = self.offset
        self.offset += len(line)
        return start

    def sync(self) -> None:
        """Ask the disk to hold every line written so far (``os.fsync``)."""
        if self._file is not None:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_rows(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Write rows to a fresh file atomically (:func:`replacing`): ``data.save``."""
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(row_line(row))
        f.flush()
        os.fsync(f.fileno())


#: What a write meets when the disk, the user's quota or the process's file size limit is full:
#: errors only a write raises, so the file being written is the one to name (a reader's own
#: errors inside a :func:`replacing` block pass through as they are)
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


@contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` to write the whole file to, put in its place (one
    ``os.replace``) when the block ends, or removed when it raises: a reader sees the old
    file or the whole new one, never part of it.

    Under the output's lock, as a run writes: replacing a file a run is still appending to
    would leave that run writing to a file no longer there (:class:`OutputBusy` instead), and
    a write killed before its replace leaves its lock file, so the next run on the path looks
    for the temporary it left (:func:`may_hold_stale_temporaries`)."""
    target = Path(path)
    lock = OutputLock.take(target)
    try:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        try:
            yield tmp
            os.replace(tmp, target)
        except BaseException as exc:
            # rows that cannot be written (or a reader that fails) leave the file as it was
            with suppress(OSError):
                tmp.unlink(missing_ok=True)
            if isinstance(exc, OSError) and exc.errno in _FULL:
                said = f"{str(target)!r} could not be written, and is left as it was"
                raise file_error(exc, target, said) from exc
            raise
    finally:
        lock.release()


#: What ``read_jsonl`` does with a last line that has no newline (a writer may have been killed
#: while writing it): "error" treats it as any line, "drop" leaves it out, "cut" leaves it out
#: and truncates the file there, so a resumed run writes that rollout again, once.
TAIL_MODES = ("error", "drop", "cut")


@attrs.frozen
class FileRows:
    """The rows of a JSONL file, each with the line it came from."""

    path: Path
    rows: list[dict[str, Any]]
    lines: list[int]
    #: the byte offset each row's line starts at
    offsets: list[int] = attrs.field(factory=list)

    def where(self, index: int) -> str:
        """``runs/a.jsonl, line 7`` for the row at ``index``."""
        return f"{self.path}, line {self.lines[index]}"


def read_jsonl(
    path: str | os.PathLike[str],
    *,
    what: str = "rows",
    tail: str = "error",
    missing_ok: bool = False,
) -> FileRows:
    """The one reader of row files: every non-blank line of ``path`` as a row (a JSON object).

    A line that is not valid JSON, or not an object, is a RowError naming the file and line;
    nothing is skipped silently. ``tail`` says what happens to an unfinished last line (see
    ``TAIL_MODES``); ``missing_ok`` reads a file that does not exist yet as no rows (a run
    about to start), else it is a FileNotFoundError naming ``what``. Every row is held in
    memory: :func:`iter_jsonl` reads one at a time.
    """
    rows: list[dict[str, Any]] = []
    numbers: list[int] = []
    starts: list[int] = []
    for row, number, offset in iter_jsonl(path, what=what, tail=tail, missing_ok=missing_ok):
        rows.append(row)
        numbers.append(number)
        starts.append(offset)
    return FileRows(Path(path), rows, numbers, starts)


def iter_jsonl(
    path: str | os.PathLike[str],
    *,
    what: str = "rows",
    tail: str = "error",
    missing_ok: bool = False,
) -> Iterator[tuple[dict[str, Any], int, int]]:
    """:func:`read_jsonl` one row at a time: (row, line number, byte offset of its line), the
    file read a line at a time, so reading a run of any length holds one row. With
    ``tail="cut"`` the file is cut once every row has been read (a reader that stops early,
    or fails, leaves it as it was)."""
    if tail not in TAIL_MODES:
        raise ValueError(f"tail must be one of {', '.join(TAIL_MODES)}, got {tail!r}")
    target = Path(path)
    if not target.exists():
        if missing_ok:
            return
        raise FileNotFoundError(f"{what}: no such file {str(target)!r}")
    if target.is_dir():
        raise IsADirectoryError(f"{what}: {a_folder(target)}")
    if not target.is_file():
        raise ValueError(f"{what}: {str(target)!r} is not a file of rows (JSONL)")
    offset = 0
    good_end = 0
    with open(target, "rb") as f:
        for number, raw in enumerate(f, start=1):
            start = offset
            offset += len(raw)
            # only the file's last line can lack its newline
            last = not raw.endswith(b"\n")
            if raw.strip():
                if last and tail != "error":
                    break  # no newline after it: the write may have been cut; redo it
                # (parsed without its newline: an error's position reads as on one line)
                yield _row_of(raw if last else raw[:-1], target, number, last), number, start
            good_end = offset
    if tail == "cut" and good_end < offset:
        with open(target, "r+b") as f:
            f.truncate(good_end)


def _row_of(raw: bytes, target: Path, number: int, last: bool) -> dict[str, Any]:
    try:
        value = loads_line(raw)
    except ValueError as exc:
        cut = (
            "; it is the last line and no newline ends it, as when a run is killed while "
            "writing a row: resume the run (resume=True, or whileai run --resume) to write "
            "that rollout again"
            if last
            else ""
        )
        raise RowError(f"{target}, line {number}: not valid JSON ({exc}){cut}") from None
    if not isinstance(value, dict):
        raise RowError(
            f"{target}, line {number}: a {type(value).__name__}, not a row (a JSON object)"
        )
    return value


class OutputBusy(RuntimeError):
    """Another run is writing the output file."""


class OutputLock:
    """An exclusive lock on a run's output, so two runs never write one file: a lock file
    beside it (``<output>.lock``, holding the owner's pid) under ``fcntl.flock``, which the
    kernel releases when the process dies, so a killed run never leaves it held.

    A run that ends removes its lock file; a killed one leaves it, with its pid in it, which
    the next run on the output finds (:attr:`left_by`)."""

    def __init__(self, path: Path, handle: IO[str], left_by: str | None = None) -> None:
        self.path = path
        self._handle: IO[str] | None = handle
        #: the pid in the lock file when this run took it (a run that never released it: a
        #: killed one), or None when the file was new or empty
        self.left_by = left_by

    @classmethod
    def take(cls, output: str | os.PathLike[str]) -> OutputLock:
        import fcntl

        target = Path(output)
        path = target.with_name(target.name + ".lock")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the run
        except OSError as exc:
            raise file_error(exc, target, f"output={str(target)!r} cannot be written") from exc
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "unknown"
            handle.close()
            raise OutputBusy(
                f"output={str(target)!r} is being written by another run (pid {owner}); two "
                "runs on one file would mix their rows: wait for it, or choose another path"
            ) from None
        handle.seek(0)
        left_by = handle.read().strip() or None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        return cls(path, handle, left_by)

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing drops the flock
            self._handle = None
            self.path.unlink(missing_ok=True)


def writer_of(output: str | os.PathLike[str]) -> int | None:
    """The pid of the run writing ``output`` now, from its lock file, or None when no running
    process holds it (the run finished and removed it, or was killed and left a pid that is
    gone). Read without taking the lock: a reader holding it, even shared, for an instant
    would turn away a run starting on the output in that instant."""
    target = Path(output)
    try:
        text = target.with_name(target.name + ".lock").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    pid = int(text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, under another user
        return pid
    return pid


def remove_stale_temporaries(output: str | os.PathLike[str]) -> int:
    """Remove the temporary files a killed run left beside ``output`` (its rows' and its
    sidecar's, ``.<name>.<pid>.tmp``) when their process is gone; returns how many.

    This reads the whole directory: a caller that opens many outputs in one directory asks
    only when a killed writer may have left something (:func:`may_hold_stale_temporaries`)."""
    target = Path(output)
    heads = tuple(f".{name}." for name in (target.name, sidecar_path(target).name))
    removed = 0
    try:
        # one pass over the directory with plain string tests: a training loop that writes a
        # run per step into one directory opens it thousands of times, and two globs (each
        # compiling a pattern for the new name) cost a millisecond per thousand files there
        names = os.listdir(target.parent)
    except FileNotFoundError:
        return 0
    for name in names:
        if not name.endswith(".tmp"):
            continue
        for head in heads:
            if name.startswith(head):
                pid = name[len(head) : -len(".tmp")]
                if pid.isdigit() and not _alive(int(pid)):
                    (target.parent / name).unlink(missing_ok=True)
                    removed += 1
                break
    return removed


def may_hold_stale_temporaries(output: str | os.PathLike[str], lock: OutputLock) -> bool:
    """Whether a killed writer may have left temporaries beside ``output``: its lock file
    outlived its run (:attr:`OutputLock.left_by`), or the output or its sidecar exists (a run
    or a save that wrote there before). A fresh output, as a training loop opens one a step
    in one directory, has none of these, and its directory is not read: reading it costs a
    millisecond per few thousand files, on every step of a loop whose directory only grows."""
    target = Path(output)
    return lock.left_by is not None or target.exists() or sidecar_path(target).exists()


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_sidecar(
    path: str | os.PathLike[str], content: Mapping[str, Any], *, durable: bool = True
) -> None:
    """Replace the sidecar atomically: a reader sees the old file or the new one, never half,
    whenever the writing process is killed. ``durable``: on the disk before it replaces the
    old one (``os.fsync``), so a power loss leaves one or the other too; a run asks for that
    with its rows (``fsync_rows``), since an fsync costs about a millisecond on a fast disk
    and tens on a slow one, twice a run."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    text = sidecar_text(content)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        # the old sidecar stays whole; the half-written new one goes
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise file_error(exc, target, f"the sidecar {str(target)!r} could not be written") from exc


#: json.dumps(..., ensure_ascii=False) with reports and numpy scalars read by json_default: a
#: report handed over as it is (not its plain-data copy) is written as the same text, without
#: a dict of every group built first and thrown away
_SIDECAR = json.JSONEncoder(ensure_ascii=False, default=json_default)


def sidecar_text(content: Any, depth: int = 0) -> str:
    """``content`` as JSON, its first two levels of keys one to a line and indented (a person
    reads the metadata and the report's fields), what lies deeper on the line of its key:
    json's C encoder writes those, where an indented dump runs in Python at four times the
    cost (a report lists every group's rollouts: 0.3 MB for 2,000 situations). A report may
    be a :class:`Report` or its ``to_dict()``: the text is the same."""
    if depth < 2 and isinstance(content, Mapping) and content:
        if isinstance(content, Report):
            content = json_default(content)
        if not all(type(k) is str for k in content):
            return _SIDECAR.encode(content)
        pad = "  " * (depth + 1)
        items = [
            f"{pad}{_SIDECAR.encode(k)}: {sidecar_text(v, depth + 1)}" for k, v in content.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"
    return _SIDECAR.encode(content)


def read_sidecar(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    target = Path(path)
    if not target.exists():
        return None
    with open(target, encoding="utf-8") as f:
        try:
            value = json.load(f)
        except ValueError as exc:
            raise ValueError(
                f"{target} is not a readable whileai run sidecar ({exc}); it may be half "
                "written: restore it or remove it"
            ) from None
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
