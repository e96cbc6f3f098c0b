"""``wai.load(path, format=None)``: a file another tool (or we) wrote, as rows."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from whileai.importers import inspect_logs, lm_eval, tau_bench, verifiers_results
from whileai.schema.arrow_columns import decoded
from whileai.schema.files import iter_jsonl, user_path
from whileai.schema.wording import counted, name_some

FORMATS = ("inspect", "lm_eval", "tau_bench", "verifiers", "whileai")


def _first_record(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    return json.loads(line)
                except ValueError:
                    return None
    return None


def detect(path: str | Path) -> str:
    """Which tool wrote ``path``, from its name and its first record; a ValueError when it
    is none this module reads."""
    target = Path(path)
    if target.suffix == ".eval":
        return "inspect"
    if target.suffix == ".parquet":
        return "whileai"
    if target.suffix == ".json":
        data = json.loads(target.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "eval" in data and "samples" in data:
            return "inspect"
        if isinstance(data, dict) and "simulations" in data:
            return "tau_bench"
        if isinstance(data, list) and data and isinstance(data[0], dict) and "traj" in data[0]:
            return "tau_bench"
    if target.suffix == ".jsonl":
        first = _first_record(target)
        if isinstance(first, dict):
            if "doc_id" in first and ("resps" in first or "filtered_resps" in first):
                return "lm_eval"
            if "completion" in first and "prompt" in first and "reward" in first:
                return "verifiers"
            if "prompt" in first and ("final_text" in first or "schema_version" in first):
                return "whileai"
    raise ValueError(
        f"{path}: not a file wai.load reads; formats are {', '.join(FORMATS)} "
        "(name one with format= if the file's name hides it)"
    )


def _ours(path: Path) -> Iterator[dict[str, Any]]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError(
                "reading Parquet needs pyarrow: pip install 'whileai-core[training]'"
            ) from None
        parquet = pq.ParquetFile(path)
        metadata = parquet.schema_arrow.metadata
        for batch in parquet.iter_batches():
            # the columns wai.export wrote as JSON text read back to the values written
            yield from decoded(batch.to_pylist(), metadata)
        return
    for row, _, _ in iter_jsonl(path, what="rows"):
        yield row


READERS: dict[str, Callable[[Path], Iterable[dict[str, Any]]]] = {
    "inspect": inspect_logs.read,
    "lm_eval": lm_eval.read,
    "tau_bench": tau_bench.read,
    "verifiers": verifiers_results.read,
    "whileai": _ours,
}


#: what the logs of the tools read here are named (a folder's are listed when one is given)
LOG_SUFFIXES = (".eval", ".json", ".jsonl", ".parquet")


def log_file(path: str | Path, who: str) -> Path:
    """``path`` as a log file to read; an error naming ``who`` when it is none. A verifiers run's
    folder is its ``results.jsonl``; any other folder (an Inspect AI log_dir) is refused with
    the logs in it, newest first: its logs are separate evals, often of other models or tasks,
    and read as one they would be measured as one."""
    target = user_path(path)
    if target.is_file():
        return target
    if (target / "results.jsonl").is_file() and (target / "metadata.json").is_file():
        return target / "results.jsonl"
    if target.is_dir():
        logs = sorted(
            (p for p in target.iterdir() if p.is_file() and p.suffix in LOG_SUFFIXES),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        held = (
            f"it holds {counted(len(logs), 'log')}, newest first: "
            + name_some([str(p) for p in logs], 3)
            if logs
            else f"it holds no {', '.join(LOG_SUFFIXES[:-1])} or {LOG_SUFFIXES[-1]} file"
        )
        raise IsADirectoryError(
            f"{who}: {str(path)!r} is a folder, not a log: name one log in it ({held}); each "
            "is an eval of its own, to import and measure apart"
        )
    raise FileNotFoundError(f"{who}: no such file {str(path)!r}")


def load(path: str | Path, format: str | None = None) -> list[dict[str, Any]]:
    """The rows of ``path``: another tool's per-sample output, or our own rows."""
    return list(stream(path, format))


def stream(path: str | Path, format: str | None = None) -> Iterator[dict[str, Any]]:
    """:func:`load`'s rows one at a time, as they are read (``whileai import`` writes them so:
    a log of any length imports in the memory of one row). The file is found, and its format
    named or detected, before the first row is asked for."""
    target = log_file(path, "wai.load")
    chosen = format or detect(target)
    if chosen not in READERS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {chosen!r}")
    return iter(READERS[chosen](target))
