"""The typed view of a row: Task, Rollout, Judgment and Marker, and the flat row they make.

A row is the flat projection of the four records (``to_row``); ``from_row`` splits it back and
the round trip is exact. Keys the schema does not name are carried verbatim in
``Rollout.extra``. Optional keys are written only when they hold a value: for them, ``None``
and absent mean the same. ``sampling`` and ``reward`` are always written, because their
``None`` says something (no sampling was reported; the row is not judged).

The wire contract is ``row-v1.json`` beside this module; ``row_json_schema()`` generates it from the
field metadata below and a test keeps the checked-in file equal to it.
"""

from __future__ import annotations

import hashlib
import math
import operator
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import cattrs

SCHEMA_VERSION = "1"

#: Fields the records keep in memory that never reach the wire (see privacy.export_row).
MEMORY_ONLY_FIELDS: frozenset[str] = frozenset({"privileged", "vector"})

#: Keys always written, even when None.
ALWAYS_WRITTEN: frozenset[str] = frozenset({"sampling", "reward"})


def _field(json: Mapping[str, Any], doc: str) -> Any:
    """An optional field (default None) with its JSON Schema fragment and description."""
    return attrs.field(default=None, metadata={"json": dict(json), "doc": doc})


_STR = {"type": ["string", "null"]}
_OBJ = {"type": ["object", "null"]}
_INT = {"type": ["integer", "null"]}
_NUM = {"type": ["number", "null"]}
_BOOL = {"type": ["boolean", "null"]}
_LIST_OBJ = {"type": ["array", "null"], "items": {"type": "object"}}
_UNIT = {"type": ["number", "null"], "minimum": 0, "maximum": 1}


def prompt_hash(prompt: str) -> str:
    """The stable default ``task_id`` of a prompt: 16 hex chars of its SHA-256."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def _default_task_id(task: Task) -> str:
    return prompt_hash(task.prompt)


@attrs.define(kw_only=True)
class Task:
    """The situation: what the agent is asked, and what only the grader may know."""

    prompt: str = attrs.field(metadata={"json": {"type": "string"}, "doc": "the prompt text"})
    task_id: str = attrs.field(
        default=attrs.Factory(_default_task_id, takes_self=True),
        metadata={"json": {"type": "string"}, "doc": "what completions of one prompt group under"},
    )
    scenario_id: str | None = _field(_STR, "the situation id the engine wrote (same as task_id)")
    privileged: dict[str, Any] | None = _field(
        _OBJ, "teacher-only block (principle, hidden_state, reference, rubric); never exported"
    )
    scenario_dimensions: dict[str, Any] | None = _field(_OBJ, "the dimension values drawn")
    arm: str | None = _field(_STR, "the strategy arm that chose the situation")
    selection_reason: str | None = _field(_STR, "why the strategy chose it")
    behavior_signature: str | None = _field(_STR, "the behaviour cell the search filled")
    seed: int | None = _field(_INT, "the seed the situation was drawn with")
    writer_model: str | None = _field(_STR, "the writer's model, or template / seed")
    vector: list[float] | None = _field(
        {"type": ["array", "null"], "items": {"type": "number"}},
        "the embedding the diversity search keeps in memory; never exported",
    )


@attrs.define(kw_only=True)
class Rollout:
    """One episode: the conversation, the tool calls, and how it was sampled."""

    final_text: str = attrs.field(
        metadata={"json": {"type": "string"}, "doc": "the agent's last answer"}
    )
    steps: list[dict[str, Any]] = attrs.field(
        factory=list,
        metadata={"json": {"type": "array", "items": {"type": "object"}}, "doc": "every turn"},
    )
    messages: list[dict[str, Any]] | None = _field(_LIST_OBJ, "the chat, prompt included")
    world_state: dict[str, Any] | None = _field(_OBJ, "the mock world's final state")
    faults: list[dict[str, Any]] | None = _field(_LIST_OBJ, "faults that fired (step, tool, kind)")
    sampling: dict[str, Any] | None = _field(
        _OBJ, "temperature, max_tokens, model as resolved; None when unknown"
    )
    policy_version: str | None = _field(_STR, "<model>@<system prompt sha>")
    model_version: str | None = _field(_STR, "the agent's model as its server reported it")
    user_model: str | None = _field(_STR, "who played the user; absent for single messages")
    lineage: dict[str, Any] | None = _field(_OBJ, "run id, system prompt hash/head/chars, replay")
    run_id: str | None = _field(_STR, "the run that produced the row")
    usage: dict[str, Any] | None = _field(_OBJ, "input_tokens / output_tokens summed over steps")
    logprob: float | None = _field(_NUM, "summed log-probability of the generated tokens")
    n_tokens: int | None = _field(_INT, "how many tokens logprob sums over")
    ref_logprob: float | None = _field(_NUM, "the same tokens scored by a reference model")
    truncated: bool | None = _field(_BOOL, "a turn was cut at the token cap")
    calibration: dict[str, Any] | None = _field(_OBJ, "calibration figures (mean_kl, ...)")
    error: str | None = _field(_STR, "why the rollout failed, when it did")
    extra: dict[str, Any] = attrs.field(factory=dict, metadata={"json": None, "doc": "other keys"})


@attrs.define(kw_only=True)
class Judgment:
    """A scorer's verdict on the rollout."""

    reward: float | None = _field(_UNIT, "score in [0, 1]; None when not judged")
    reason: str | None = _field(_STR, "why the scorer decided so")
    judge_name: str | None = _field(_STR, "what scored the row")
    judge_status: str | None = _field(
        {"type": ["string", "null"], "enum": ["ok", "error", "skipped", None]},
        "ok, error (reason says why) or skipped",
    )
    judge_meta: dict[str, Any] | None = _field(_OBJ, "model, prompt hash, temperature, version")
    label_source: str | None = _field(_STR, "verifier, judge, given, world, human")
    llm_reward: float | None = _field(_UNIT, "the LLM judge's score when llm_grade=True")
    gold_reward: float | None = _field(_UNIT, "a hand label, for judge_agreement")
    quality: float | None = _field(
        _UNIT, "wai.rank's quality score in [0, 1] within the task's group; None when not ranked"
    )
    quality_meta: dict[str, Any] | None = _field(
        _OBJ, "how wai.rank scored the row: ranker, model, version, status, comparisons, reason"
    )


@attrs.define(kw_only=True)
class Marker:
    """One behaviour measurement on one completion."""

    name: str
    value: float | int | bool


@attrs.define
class RowParts:
    """What ``from_row`` returns; unpacks as ``task, rollout, judgment, markers``."""

    task: Task
    rollout: Rollout
    judgment: Judgment
    markers: list[Marker] = attrs.Factory(list)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.task, self.rollout, self.judgment, self.markers))


class RowError(ValueError):
    """A row (or a record meant to become one) is malformed; the message names row and field."""


def _where(index: int | None, where: str | None = None) -> str:
    """How an error names the row: ``where`` when given, else by its index (only built when
    there is an error to raise: the checks run on every row of every measurement)."""
    if where is not None:
        return where
    return f"row {index}" if index is not None else "row"


def make_converter() -> cattrs.Converter:
    """A fresh converter for the row records (a factory, never a shared global)."""
    converter = cattrs.Converter(forbid_extra_keys=True)

    def structure_marker_value(value: Any, _: Any) -> float | int | bool:
        if isinstance(value, bool | int | float):
            return value
        raise TypeError(f"a marker value must be a number or a bool, got {value!r}")

    converter.register_structure_hook(float | int | bool, structure_marker_value)
    # Numbers in JSON are ints or floats; keep what was given so the round trip is exact.
    converter.register_structure_hook(float, lambda v, _: _number(v))
    return converter


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value) if isinstance(value, float) else value  # ints stay ints


def _field_names(cls: type) -> list[str]:
    return [f.name for f in attrs.fields(cls)]


TASK_KEYS: tuple[str, ...] = tuple(_field_names(Task))
ROLLOUT_KEYS: tuple[str, ...] = tuple(n for n in _field_names(Rollout) if n != "extra")
JUDGMENT_KEYS: tuple[str, ...] = tuple(_field_names(Judgment))
# each record's fields in one call (to_row runs once per rollout)
_READ_TASK = operator.attrgetter(*TASK_KEYS)
_READ_ROLLOUT = operator.attrgetter(*ROLLOUT_KEYS)
_READ_JUDGMENT = operator.attrgetter(*JUDGMENT_KEYS)
_RECORD_KEYS = (*TASK_KEYS, *ROLLOUT_KEYS, *JUDGMENT_KEYS)
NAMED_KEYS: frozenset[str] = frozenset(
    {*TASK_KEYS, *ROLLOUT_KEYS, *JUDGMENT_KEYS, "markers", "schema_version"}
)


def check_reward(
    value: Any, what: str = "reward", index: int | None = None, *, where: str | None = None
) -> None:
    """Raise RowError unless ``value`` is None or a finite number in [0, 1]; the error names
    ``where`` (``runs/a.jsonl, line 7``) when given, else the row's ``index``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RowError(f"{_where(index, where)}: {what} must be a number in [0, 1], got {value!r}")
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise RowError(f"{_where(index, where)}: {what} is {value!r}, outside [0, 1]")


def check_row(row: Any, index: int | None = None, *, where: str | None = None) -> Mapping[str, Any]:
    """Validate the keys every measurement reads; return the row. Errors name the field, and
    the row by ``where`` (``runs/a.jsonl, line 7``) when given, else by ``index``."""
    if not isinstance(row, Mapping):
        raise RowError(f"{_where(index, where)} is a {type(row).__name__}, not a mapping")
    for key in ("prompt", "final_text"):
        if key not in row:
            raise RowError(f"{_where(index, where)}: missing required field {key!r}")
        if not isinstance(row[key], str):
            raise RowError(
                f"{_where(index, where)}: {key} must be a string, got {type(row[key]).__name__}"
            )
    check_reward(row.get("reward"), "reward", index, where=where)
    markers = row.get("markers")
    if markers is not None:
        if not isinstance(markers, Mapping):
            raise RowError(f"{_where(index, where)}: markers must be a mapping of name to number")
        for name, value in markers.items():
            if isinstance(value, bool) or value is None:
                continue
            if not isinstance(value, int | float):
                raise RowError(
                    f"{_where(index, where)}: marker {name!r} is {value!r}, not a number"
                )
            if not math.isfinite(value):
                raise RowError(
                    f"{_where(index, where)}: marker {name!r} is {value!r}, not a finite number"
                )
    return row


#: A judge that errored or skipped said nothing about the completion, whatever reward it left.
#: (a tuple: a status of any type, even unhashable, compares without error)
UNJUDGED_STATUS = ("error", "skipped")


def rollout_key(row: Mapping[str, Any]) -> str | None:
    """The row's ``lineage.rollout_key`` (which rollout of which situation it is), None when
    it names none: a rollout written twice carries the same key twice."""
    lineage = row.get("lineage")
    key = lineage.get("rollout_key") if isinstance(lineage, Mapping) else None
    return key if isinstance(key, str) else None


def rollout_identity(row: Mapping[str, Any]) -> str | None:
    """Which rollout a row is, across runs: its run (``lineage.run_id``, else the row's
    ``run_id``) and its ``lineage.rollout_key``. A key alone names a place in a plan (situation
    and repeat), which every run of that plan fills again: two runs of one seed (faults off and
    on, ``runs=3``) hold the same keys and different rollouts. None when the row names no key."""
    lineage = row.get("lineage")
    if not isinstance(lineage, Mapping):
        return None
    key = lineage.get("rollout_key")
    if not isinstance(key, str):
        return None
    run = lineage.get("run_id") or row.get("run_id")
    return f"{run}|{key}" if isinstance(run, str) and run else key


def situation_key(row: Mapping[str, Any]) -> str | None:
    """Which situation a row's task is a phrasing of: the engine's ``lineage.situation`` index
    with the situation's ``seed`` (distinct plans draw distinct seeds); None for a row that does
    not say (its task is then a situation of its own)."""
    lineage = row.get("lineage")
    if not isinstance(lineage, Mapping) or "phrasing" not in lineage:
        return None
    situation = lineage.get("situation")
    if situation is None:
        return None
    return f"{situation}|{row.get('seed')}"


def task_key(row: Mapping[str, Any], index: int | None = None) -> str:
    """What a row's interval groups under: ``scenario_id``, else ``task_id``, else the prompt."""
    for key in ("scenario_id", "task_id", "prompt"):
        value = row.get(key)
        if value is not None and value != "":
            return str(value)
    raise RowError(f"{_where(index)}: has none of scenario_id, task_id, prompt to group by")


def to_row(
    task: Task,
    rollout: Rollout,
    judgment: Judgment | None = None,
    markers: Mapping[str, Any] | list[Marker] | tuple[Marker, ...] = (),
    *,
    index: int | None = None,
) -> dict[str, Any]:
    """Flatten the four records into a row (``schema_version`` ``"1"``)."""
    judgment = judgment if judgment is not None else Judgment()
    if not isinstance(task.prompt, str):
        raise RowError(
            f"{_where(index)}: prompt must be a string, got {type(task.prompt).__name__}"
        )
    if not isinstance(rollout.final_text, str):
        raise RowError(
            f"{_where(index)}: final_text must be a string, got {type(rollout.final_text).__name__}"
        )
    for what in ("reward", "llm_reward", "gold_reward", "quality"):
        check_reward(getattr(judgment, what), what, index)
    row: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    # one comprehension over the three records' fields: a run builds a row per rollout
    row.update(
        {
            key: value
            for key, value in zip(
                _RECORD_KEYS,
                (*_READ_TASK(task), *_READ_ROLLOUT(rollout), *_READ_JUDGMENT(judgment)),
                strict=True,
            )
            if value is not None or key in ALWAYS_WRITTEN
        }
    )
    marker_map = _marker_map(markers, index) if markers else {}
    if marker_map:
        row["markers"] = marker_map
    for key, value in rollout.extra.items():
        if key in NAMED_KEYS:
            raise RowError(f"{_where(index)}: extra key {key!r} collides with a schema field")
        row[key] = value
    return row


def _marker_map(
    markers: Mapping[str, Any] | list[Marker] | tuple[Marker, ...], index: int | None
) -> dict[str, Any]:
    if isinstance(markers, Mapping):
        out = dict(markers)
    else:
        out = {}
        for marker in markers:
            if marker.name in out:
                raise RowError(f"{_where(index)}: marker {marker.name!r} given twice")
            out[marker.name] = marker.value
    for name, value in out.items():
        if isinstance(value, bool) or value is None:
            continue
        if not isinstance(value, int | float):
            raise RowError(f"{_where(index)}: marker {name!r} is {value!r}, not a number")
    return out


def from_row(
    row: Mapping[str, Any], *, index: int | None = None, converter: cattrs.Converter | None = None
) -> RowParts:
    """Split a row into its records. Rows without ``schema_version`` (version 0) load by shape."""
    check_row(row, index)
    version = row.get("schema_version")
    if version not in (None, SCHEMA_VERSION):
        raise RowError(
            f"{_where(index)}: schema_version {version!r} is not one this release reads "
            f"({SCHEMA_VERSION!r}, or none for version 0)"
        )
    conv = converter if converter is not None else make_converter()
    task_part = {k: row[k] for k in TASK_KEYS if row.get(k) is not None}
    rollout_part = {k: row[k] for k in ROLLOUT_KEYS if row.get(k) is not None}
    judgment_part = {k: row[k] for k in JUDGMENT_KEYS if row.get(k) is not None}
    extra = {k: v for k, v in row.items() if k not in NAMED_KEYS}
    try:
        task = conv.structure(task_part, Task)
        rollout = conv.structure({**rollout_part}, Rollout)
        judgment = conv.structure(judgment_part, Judgment)
    except Exception as exc:
        raise RowError(f"{_where(index)}: {_explain(exc)}") from exc
    rollout.extra = extra
    markers = [Marker(name=str(n), value=v) for n, v in (row.get("markers") or {}).items()]
    return RowParts(task, rollout, judgment, markers)


def _explain(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        notes = cattrs.transform_error(exc)
        return "; ".join(notes)
    return f"{type(exc).__name__}: {exc}"


def row_json_schema() -> dict[str, Any]:
    """The JSON Schema of a row on the wire, generated from the records' field metadata.

    Rows in memory may carry ``privileged`` and ``vector``; a row that leaves memory (after
    ``privacy.export_row``) must not, and the schema says so.
    """
    properties: dict[str, Any] = {
        "schema_version": {"const": SCHEMA_VERSION, "description": "row format version"}
    }
    memory_only: list[str] = []
    for cls in (Task, Rollout, Judgment):
        for f in attrs.fields(cls):
            if f.metadata.get("json") is None:
                continue
            if f.name in MEMORY_ONLY_FIELDS:
                memory_only.append(f.name)
                continue
            properties[f.name] = {**f.metadata["json"], "description": f.metadata["doc"]}
    properties["markers"] = {
        "type": "object",
        "additionalProperties": {"type": ["number", "boolean"]},
        "description": "{name: number} per completion",
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://whileai.dev/schemas/row-v1.json",
        "title": "whileai row, version 1",
        "type": "object",
        "required": ["schema_version", "task_id", "prompt", "final_text", "steps", "reward"],
        "properties": properties,
        "additionalProperties": True,
        # privileged and vector live in memory only: a row on the wire must not carry them.
        "not": {"anyOf": [{"required": [name]} for name in memory_only]},
    }
