"""Training data out: rows as a GRPO trainer reads them, and a reward function it can call.

``wai.export(rows, format=..., shape=...)`` writes rows in one of three shapes, each after the
same export rules as every writer (nothing privileged leaves):

- ``shape="trl"``: one record per task, ``{"prompt", "task_id"}``, the prompt dataset TRL's
  ``GRPOTrainer`` samples from (``conversational=True`` makes the prompt a list of messages);
  the answer key stays out of it and in the reward function.
- ``shape="grpo"``: one record per group of a task's rollouts, ``{"task_id", "prompt",
  "completions", "rewards", "logprobs", "policy_versions", "policy_version"}``, what an
  offline GRPO step reads (``policy_version`` is the group's when its completions share one,
  else None: a group sampled across policy versions is stale in part).
- ``shape="rows"``: the rows as they are written to JSONL. In Parquet or a Dataset a column
  keeps an Arrow type when its values are all of one scalar kind, and is JSON text otherwise
  (a dict or list: a shop run's ``world_state`` is keyed by order ids, which as a struct is a
  field per id); ``wai.load`` reads a Parquet file back to the rows written
  (:mod:`whileai.schema.arrow_columns`).

and in one of three containers: ``"jsonl"`` (records, written to ``path`` when given),
``"parquet"`` (``path`` required; pyarrow) and ``"datasets"`` (a Hugging Face
``datasets.Dataset``). The last two need ``pip install whileai-core[training]``.

``wai.reward_function(verifier, rows)`` is a reward function in TRL's convention,
``reward_func(prompts, completions, **kwargs) -> list[float | None]``: TRL passes the dataset's
other columns as keyword lists, so the ``task_id`` column finds each completion's reference in
the answer key the function was built with (the rows' privileged block). A completion the
verifier could not grade scores ``unjudged`` (default None: TRL's "this function does not
apply"). GRPOTrainer turns a None into NaN and sums its reward functions ignoring NaN, so where
this is the only one the completion gets 0 and TRL warns that every function returned None;
``unjudged=0.0`` says so outright. Either way a completion that makes its grader fail (a
timeout it provoked) is not left out of its group, where it would escape the failure.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from whileai.registry import Registry, get_registry
from whileai.schema.arrow_columns import RowColumns
from whileai.schema.export import export_line, strip_episode, strip_private
from whileai.schema.files import RowWriter, replacing, user_path
from whileai.schema.stored import StoredRows
from whileai.schema.wording import counted

SHAPES = ("trl", "grpo", "rows")
FORMATS = ("jsonl", "parquet", "datasets")
_INSTALL = "pip install 'whileai-core[training]' (datasets and pyarrow)"


def _rows_of(rows: Any) -> Sequence[Mapping[str, Any]] | list[Any]:
    """The rows ``rows`` names: a rows file's (read as they are walked), a run's or a
    ScoredData's trajectories, or rows you pass; not read yet (:func:`_checked` reads them)."""
    if isinstance(rows, str | os.PathLike):
        from whileai.schema.row_file import open_row_file

        return open_row_file(user_path(rows), what="rows")
    found = getattr(rows, "trajectories", None)
    if found is None:
        found = getattr(rows, "rows", rows)
    if isinstance(found, Mapping | str | bytes) or not isinstance(found, Iterable):
        raise TypeError(f"export() takes rows, a run or a rows file, got {type(rows).__name__}")
    # a sequence is walked where it is (a streamed run's rows stay in their file); a
    # generator is read once, into a list
    return found if isinstance(found, Sequence) else list(found)


def _checked(rows: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping) or not isinstance(row.get("prompt"), str):
            raise ValueError(f"row {i}: a row to export needs a 'prompt' (text)")
        yield row


def _exported(row: Mapping[str, Any]) -> dict[str, Any]:
    """``export_row(row)``, by the export of a run's lines: a row with nothing to strip (a
    rows file's, exported when written) is encoded and read back rather than walked."""
    return export_line(row)[0]


def _task(row: Mapping[str, Any]) -> str:
    return str(row.get("task_id") or row.get("scenario_id") or row["prompt"])


def _task_of(row: Mapping[str, Any]) -> str:
    """``_task(_exported(row))`` from the three fields it reads, each cleaned as the export
    cleans it (the ids as fields that name a row, the prompt as the episode's): grouping a
    file's rows by task then costs no export of the whole row, which is most of the time of
    reading one."""
    return _task(
        {
            "task_id": strip_private(row.get("task_id")),
            "scenario_id": strip_private(row.get("scenario_id")),
            "prompt": strip_episode(row["prompt"]),
        }
    )


def _records(
    rows: Sequence[Mapping[str, Any]], shape: str, conversational: bool
) -> Iterator[dict[str, Any]]:
    """The records of ``shape``, one at a time, in the order of the rows (a task's where its
    first row stands): the rows are exported as they are read and none is held but a
    group's (``grpo`` reads the rows twice: where each task's rows stand, then each group)."""
    if shape == "rows":
        for row in _checked(rows):
            yield _exported(row)
        return
    if shape == "trl":
        seen: set[str] = set()
        for row in _checked(rows):
            task_id = _task_of(row)
            if task_id not in seen:
                seen.add(task_id)
                # (the prompt as the export writes it: only a task's first row is exported)
                yield {"prompt": _prompt(_exported(row), conversational), "task_id": task_id}
        return
    where: dict[str, array[int]] = {}
    for i, row in enumerate(_checked(rows)):
        where.setdefault(_task_of(row), array("q")).append(i)
    at = getattr(rows, "at", None)
    for task_id, positions in where.items():
        # a file's rows are read a group at a time, in one open of the file
        members = at(positions) if callable(at) else [rows[i] for i in positions]
        group = [_exported(r) for r in members]
        versions = [r.get("policy_version") for r in group]
        yield {
            "task_id": task_id,
            "prompt": _prompt(group[0], conversational),
            "completions": [str(r.get("final_text") or "") for r in group],
            "rewards": [r.get("reward") for r in group],
            "logprobs": [r.get("logprob") for r in group],
            "policy_versions": versions,
            "policy_version": versions[0] if len(set(versions)) == 1 else None,
        }


def _prompt(row: Mapping[str, Any], conversational: bool) -> Any:
    prompt: Any = row["prompt"]
    return [{"role": "user", "content": prompt}] if conversational else prompt


def _write_jsonl(records: Iterable[Mapping[str, Any]], path: Path) -> StoredRows:
    """Write ``records`` one line each as they come, the file taking ``path``'s place once
    all are written (a failure part way leaves ``path`` as it was); the records read back."""
    offsets = array("q")
    with replacing(path) as temporary, RowWriter(temporary) as writer:
        for record in records:
            line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
            offsets.append(writer.write_line(line.encode()))
    return StoredRows(path, offsets)


#: records per Parquet row group: a batch is built, checked against the schema and written at
#: once, so this bounds what a Parquet export holds
PARQUET_BATCH = 4096


def _write_parquet(
    records: Callable[[], Iterator[dict[str, Any]]], path: Path, pa: Any, pq: Any, shape: str
) -> None:
    """Write the records ``records()`` makes to ``path`` a batch at a time. The records are
    made twice: once to find the schema, once to write them. Rows take the columns
    :mod:`whileai.schema.arrow_columns` gives them (nested values as JSON text); any other
    shape's column takes the type every batch's values agree on (a column of None in the first
    batch and numbers later is a column of numbers). The file replaces ``path`` once whole."""
    schema = None
    encode: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    if shape == "rows":
        columns = RowColumns.of(records())
        schema = columns.schema(pa)
        json_columns = columns.json_columns
        encode = partial(columns.encoded, json_columns=json_columns)
        if not len(schema):
            schema = None
    else:
        for batch in _batched(records()):
            found = pa.RecordBatch.from_pylist(batch).schema
            schema = (
                found
                if schema is None
                else pa.unify_schemas([schema, found], promote_options="permissive")
            )
    with replacing(path) as temporary:
        if schema is None:
            pq.write_table(pa.Table.from_pylist([]), temporary)
            return
        with pq.ParquetWriter(temporary, schema) as writer:
            # (each row encoded as it comes: a batch holds its JSON text, not its dicts)
            made = records() if encode is None else map(encode, records())
            for batch in _batched(made):
                writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=schema))


def _batched(records: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for record in records:
        batch.append(record)
        if len(batch) == PARQUET_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def export(
    rows: Any,
    format: str = "jsonl",
    *,
    shape: str = "trl",
    path: str | Path | None = None,
    conversational: bool = False,
) -> Any:
    """Rows (or a run, or a rows file's path) as training data: the records (``"jsonl"``;
    with ``path`` written there a record at a time and read back from the file, so a run of
    any length exports in the memory of its task ids), a Parquet file at ``path``, or a
    ``datasets.Dataset``. See the module's docstring."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    if format not in FORMATS:
        # export(rows, "train.jsonl") reads as "write them there": say where the file name goes
        looks_like_a_path = isinstance(format, str | Path) and (
            Path(format).suffix.lstrip(".") in FORMATS or len(Path(format).parts) > 1
        )
        hint = f" (a file name? pass it as path={str(format)!r})" if looks_like_a_path else ""
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}{hint}")
    if format == "parquet" and path is None:
        raise ValueError("format='parquet' writes a file: give path=")
    source = _rows_of(rows)
    records = _records(source, shape, conversational)
    if format == "jsonl":
        if path is None:
            return list(records)
        return _write_jsonl(records, user_path(path))
    if format == "parquet":
        assert path is not None
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError(f"format='parquet' needs pyarrow: {_INSTALL}") from None
        target = user_path(path)
        _write_parquet(lambda: _records(source, shape, conversational), target, pa, pq, shape)
        return target
    try:
        import datasets
        import pyarrow
    except ImportError:
        raise ImportError(f"format='datasets' needs the datasets package: {_INSTALL}") from None
    if shape != "rows":
        return datasets.Dataset.from_list(list(records))
    # rows in Arrow's columns: nested values as JSON text, as in Parquet
    held = list(records)
    columns = RowColumns.of(held)
    json_columns = columns.json_columns
    schema = columns.schema(pyarrow)
    return datasets.Dataset.from_list(
        [columns.encoded(record, json_columns) for record in held],
        features=datasets.Features.from_arrow_schema(schema),
    )


def _completion_text(completion: Any) -> str:
    """TRL's completions are text, or (conversational) a list of messages: the last message's
    content is the answer."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content") or "")
    raise TypeError(f"a completion is text or a list of messages, got {completion!r}")


def reward_function(
    verifier: Any,
    rows: Any = None,
    *,
    references: Mapping[str, Any] | None = None,
    unjudged: float | None = None,
    registry: Registry | None = None,
) -> Callable[..., list[float | None]]:
    """A reward function TRL's GRPOTrainer can call, grading with ``verifier`` (an object with
    ``verify(completion, reference, prompt)``, or a registered verifier's name) against the
    references of ``rows`` (their privileged block) or ``references`` ({task_id: reference}).
    ``unjudged`` is the reward of a completion the verifier could not grade (None, or a number
    in [0, 1]; see the module doc for what TRL makes of None)."""
    if unjudged is not None and (
        isinstance(unjudged, bool)
        or not isinstance(unjudged, int | float)
        or not 0 <= unjudged <= 1
    ):
        raise ValueError(f"unjudged must be None or a number in [0, 1], got {unjudged!r}")
    resolved = verifier
    if isinstance(verifier, str):
        resolved = get_registry(registry).resolve("verifier", verifier)
    if not callable(getattr(resolved, "verify", None)):
        raise TypeError(
            f"reward_function needs a verifier (verify(completion, reference)), got {verifier!r}"
        )
    answer_key: dict[str, Any] = dict(references or {})
    for row in _checked(_rows_of(rows)) if rows is not None else []:
        reference = (row.get("privileged") or {}).get("reference")
        if reference is not None:
            answer_key.setdefault(_task(row), reference)
    if not answer_key:
        raise ValueError(
            "reward_function has no references: pass rows that carry them (in memory, with their "
            "privileged block) or references={task_id: reference}"
        )
    name = str(getattr(resolved, "name", type(resolved).__name__))

    def reward(
        prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        task_ids = kwargs.get("task_id")
        if task_ids is None:
            raise ValueError(
                "the dataset has no task_id column: build it with wai.export(rows, shape='trl')"
            )
        if len(task_ids) != len(completions):
            raise ValueError(
                f"{counted(len(task_ids), 'task id')} for {counted(len(completions), 'completion')}"
            )
        missing = sorted({str(t) for t in task_ids if str(t) not in answer_key})
        if missing:
            raise ValueError(f"no reference for task ids {missing[:5]}")
        pairs = [
            (_completion_text(c), answer_key[str(t)])
            for c, t in zip(completions, task_ids, strict=True)
        ]
        many = getattr(resolved, "verify_many", None)
        verdicts = many(pairs) if callable(many) else [resolved.verify(c, r) for c, r in pairs]
        missing_reward = None if unjudged is None else float(unjudged)
        return [
            float(v.reward) if v.status == "ok" and v.reward is not None else missing_reward
            for v in verdicts
        ]

    reward.__name__ = f"whileai_{name}"  # TRL logs each reward function by its name
    return reward
