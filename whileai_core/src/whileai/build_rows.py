"""``wai.rows()``: rows from prompts and completions you already have.

The rows have the shape a run writes (built through :mod:`whileai.schema.records`, so they
carry ``schema_version``), so every measurement call reads them unchanged. A verifier or a
callable scores them through the one grading path (:func:`whileai.scoring.grade_row`), so each
row says what scored it; numbers you already have are written as given (``label_source:
"given"``).

``whileai.build_rows`` is both this module and the call ``wai.rows(...)``.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.registry import get_registry
from whileai.schema.records import (
    Judgment,
    Rollout,
    RowError,
    Task,
    prompt_hash,
    to_row,
)
from whileai.schema.wording import counted
from whileai.scoring import Scorer, as_scorer, grade_batch

__all__ = ["RowsWarning", "build_rows", "rows"]


class RowsWarning(UserWarning):
    """Some rows could not be scored; they carry ``judge_status: "error"`` and the reason."""


def _is_sequence(value: Any) -> bool:
    """A list-like of items (a str or a mapping is one item, not a sequence of them)."""
    if isinstance(value, str | bytes | Mapping):
        return False
    if hasattr(value, "tolist") and not isinstance(value, Sequence):
        return getattr(value, "ndim", 0) >= 1  # numpy arrays, not numpy scalars
    return isinstance(value, Sequence)


def _as_list(value: Any) -> list[Any]:
    return list(value.tolist()) if hasattr(value, "tolist") else list(value)


def _text_of(content: Any) -> str | None:
    """The text of a message's content: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if _is_sequence(content):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        if texts:
            return "\n".join(texts)
    return None


def _prompt_of(prompt: Any, i: int) -> tuple[str, list[dict[str, Any]]]:
    """The row's prompt text and the messages before the completion."""
    if isinstance(prompt, str):
        return prompt, [{"role": "user", "content": prompt}]
    if not _is_sequence(prompt):
        raise RowError(
            f"prompts[{i}] is a {type(prompt).__name__}; a prompt is a string or a list of "
            'messages ([{"role": "user", "content": ...}])'
        )
    messages = _as_list(prompt)
    for j, message in enumerate(messages):
        if not isinstance(message, Mapping) or "role" not in message:
            raise RowError(
                f"prompts[{i}][{j}] is not a message: expected a mapping with 'role' and "
                f"'content', got {message!r}"
            )
    users = [m for m in messages if m["role"] == "user"]
    if not users:
        raise RowError(f"prompts[{i}] has no user turn; the row's prompt is the last user turn")
    text = _text_of(users[-1].get("content"))
    if text is None:
        raise RowError(
            f"prompts[{i}]: the last user turn has no text content "
            f"(got {users[-1].get('content')!r})"
        )
    return text, [dict(m) for m in messages]


def _completion_groups(completions: Any, n_prompts: int) -> list[tuple[bool, list[str]]]:
    """Per prompt: whether it was given as one string, and its completions."""
    if not _is_sequence(completions):
        raise RowError(
            f"completions must be a list with one entry per prompt, got "
            f"{type(completions).__name__}"
        )
    completions = _as_list(completions)
    if len(completions) != n_prompts:
        raise RowError(
            f"completions has {counted(len(completions), 'entry')} for "
            f"{counted(n_prompts, 'prompt')}; give one "
            "string, or one sequence of k completions, per prompt"
        )
    groups: list[tuple[bool, list[str]]] = []
    for i, entry in enumerate(completions):
        if isinstance(entry, str):
            groups.append((True, [entry]))
            continue
        if not _is_sequence(entry):
            raise RowError(
                f"completions[{i}] (prompt {i}) is a {type(entry).__name__}; a completion is a "
                "string, or a sequence of strings for k completions of the prompt"
            )
        group = _as_list(entry)
        if not group:
            raise RowError(f"completions[{i}] (prompt {i}) is empty; give at least one completion")
        for j, text in enumerate(group):
            if not isinstance(text, str):
                raise RowError(
                    f"completions[{i}][{j}] (prompt {i}, completion {j}) is a "
                    f"{type(text).__name__}, not a string: {text!r}"
                )
        groups.append((False, group))
    return groups


def _per_prompt(value: Any, name: str, n_prompts: int) -> list[Any]:
    if not _is_sequence(value):
        raise RowError(
            f"{name} must be a list with one entry per prompt, got {type(value).__name__}"
        )
    values = _as_list(value)
    if len(values) != n_prompts:
        raise RowError(
            f"{name} has {counted(len(values), 'entry')} for {counted(n_prompts, 'prompt')}"
        )
    return values


def _per_completion(value: Any, name: str, groups: list[tuple[bool, list[str]]]) -> list[list[Any]]:
    """Spread a per-completion argument over the groups: nested like completions, or flat.

    Flat means one entry per completion, in order (length = total completions). Nested means
    one entry per prompt: a single value for a prompt given one string, a sequence of k values
    for a prompt given k completions.
    """
    if not _is_sequence(value):
        raise RowError(
            f"{name} must be nested like completions or a flat list with one entry per "
            f"completion, got {type(value).__name__}"
        )
    values = _as_list(value)
    total = sum(len(group) for _, group in groups)

    nested = len(values) == len(groups) and any(
        not single and _is_sequence(entry)
        for (single, _), entry in zip(groups, values, strict=True)
    )
    if not nested:
        if len(values) != total:
            raise RowError(
                f"{name} has {counted(len(values), 'entry')}; give one per completion ({total}, "
                "flat) or "
                f"one per prompt nested like completions ({len(groups)})"
            )
        out: list[list[Any]] = []
        start = 0
        for _, group in groups:
            out.append(values[start : start + len(group)])
            start += len(group)
        return out
    out = []
    for i, ((single, group), entry) in enumerate(zip(groups, values, strict=True)):
        if single:
            if _is_sequence(entry):
                entry = _as_list(entry)
                if len(entry) != 1:
                    raise RowError(
                        f"{name}[{i}] has {counted(len(entry), 'entry')} but prompt {i} has one "
                        "completion"
                    )
                out.append(entry)
            else:
                out.append([entry])
            continue
        if not _is_sequence(entry):
            raise RowError(
                f"{name}[{i}] is {entry!r}; prompt {i} has {len(group)} completions, so give a "
                f"sequence of {len(group)}"
            )
        entry = _as_list(entry)
        if len(entry) != len(group):
            raise RowError(
                f"{name}[{i}] has {counted(len(entry), 'entry')} for the "
                f"{counted(len(group), 'completion')} of "
                f"prompt {i}"
            )
        out.append(entry)
    return out


def _given_reward(value: Any, i: int, j: int) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if hasattr(value, "item") and not isinstance(value, int | float):
        value = value.item()  # numpy scalars
    if not isinstance(value, int | float):
        raise RowError(
            f"reward for prompt {i}, completion {j} is {value!r}; a reward is a number in [0, 1]"
        )
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise RowError(f"reward for prompt {i}, completion {j} is {value!r}, outside [0, 1]")
    return float(value)


def _is_given_numbers(reward: Any) -> bool:
    return _is_sequence(reward) and not callable(reward)


def build_rows(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    reward: Any,
    references: Sequence[Any] | None = None,
    task_ids: Sequence[Any] | None = None,
    markers: Sequence[Any] | None = None,
) -> list[dict[str, Any]]:
    """Rows from prompts and their completions, scored by ``reward``.

    Args:
        prompts: one per task: a string, or a list of chat messages (the row's ``prompt`` is the
            last user turn; ``messages`` keeps the list, followed by the completion).
        completions: one per prompt: a string, or a sequence of k completions of that prompt.
        reward: a verifier (``wai.verify.MathEqual()``, or a registered one's name:
            ``"MathEqual"``), a callable ``(prompt, completion)`` or
            ``(prompt, completion, reference)`` returning a number in [0, 1], a judge-contract
            callable ``(row) -> verdict``, the rewards themselves (nested like completions, or
            flat with one per completion; ``label_source: "given"``), or None for unjudged rows.
        references: the gold answer per prompt, stored under ``privileged.reference`` where a
            verifier reads it and no export carries it.
        task_ids: a name per prompt; the default is a stable hash of the prompt text.
        markers: ``{name: number}`` per completion, nested like completions or flat.

    Returns:
        A list of row dicts, prompt by prompt, completions in the order given. A scorer that
        raised leaves its row with ``reward: None``, ``judge_status: "error"`` and the reason,
        and a :class:`RowsWarning` says how many rows that was.
    """
    if isinstance(prompts, str) or not _is_sequence(prompts):
        raise RowError(
            f"prompts must be a list of prompts (strings or message lists), got "
            f"{type(prompts).__name__}"
        )
    prompt_list = _as_list(prompts)
    n = len(prompt_list)
    parsed = [_prompt_of(p, i) for i, p in enumerate(prompt_list)]
    groups = _completion_groups(completions, n)
    refs = _per_prompt(references, "references", n) if references is not None else [None] * n
    ids = _task_ids(task_ids, n) if task_ids is not None else _default_ids(parsed, refs)
    marker_groups = _per_completion(markers, "markers", groups) if markers is not None else None

    scorer: Scorer | None = None
    given: list[list[Any]] | None = None
    if isinstance(reward, bytes):
        raise TypeError(
            f"reward is the bytes {reward!r}; pass a verifier object or name "
            "(wai.verify.MathEqual() or 'MathEqual'), a callable, or the rewards as numbers"
        )
    if isinstance(reward, str):
        # a registered verifier's name, as grade(), simulate(judge=) and reward_function take
        reward = get_registry().resolve("verifier", reward)
    if reward is None:
        pass
    elif _is_given_numbers(reward):
        given = _per_completion(reward, "reward", groups)
    else:
        scorer = as_scorer(reward)

    rows: list[dict[str, Any]] = []
    where_of: list[str] = []
    for i, ((prompt, messages), (_, group)) in enumerate(zip(parsed, groups, strict=True)):
        privileged = {"reference": refs[i]} if refs[i] is not None else None
        for j, completion in enumerate(group):
            where = f"prompt {i}, completion {j}"
            task = Task(prompt=prompt, task_id=ids[i], privileged=copy.deepcopy(privileged))
            rollout = Rollout(
                final_text=completion,
                steps=[{"role": "assistant", "content": completion}],
                messages=[*copy.deepcopy(messages), {"role": "assistant", "content": completion}],
            )
            judgment = Judgment()
            if given is not None:
                value = _given_reward(given[i][j], i, j)
                if value is not None:
                    judgment = Judgment(reward=value, judge_status="ok", label_source="given")
            row_markers = _row_markers(marker_groups[i][j], i, j) if marker_groups else {}
            try:
                row = to_row(task, rollout, judgment, row_markers)
            except RowError as exc:
                raise RowError(f"{where}: {exc}") from None
            rows.append(row)
            where_of.append(where)
    errors: list[str] = []
    if scorer is not None:
        # one batch when the scorer decides batches (a verifier with verify_many spreads the
        # rows over its workers)
        rows = grade_batch(rows, scorer, names=where_of)
        errors = [
            f"{where}: {row.get('reason')}"
            for where, row in zip(where_of, rows, strict=True)
            if row.get("judge_status") == "error"
        ]
    if errors:
        shown = "; ".join(errors[:3]) + (f"; and {len(errors) - 3} more" if len(errors) > 3 else "")
        warnings.warn(
            f"{len(errors)} of {counted(len(rows), 'row')} could not be scored by "
            f"{scorer.name if scorer else '?'} "
            f"(judge_status 'error', reward None): {shown}",
            RowsWarning,
            stacklevel=3,
        )
    return rows


def _default_ids(parsed: list[tuple[str, Any]], refs: list[Any]) -> list[str]:
    """A stable id per prompt: the hash of its text; of its text and reference when the same
    text comes with different references, which are different tasks and must not merge."""
    seen: dict[str, set[str]] = {}
    for (prompt, _), ref in zip(parsed, refs, strict=True):
        seen.setdefault(prompt, set()).add(repr(ref))
    return [
        prompt_hash(prompt if len(seen[prompt]) == 1 else f"{prompt}\x00{ref!r}")
        for (prompt, _), ref in zip(parsed, refs, strict=True)
    ]


def _task_ids(task_ids: Any, n: int) -> list[str]:
    ids = _per_prompt(task_ids, "task_ids", n)
    out: list[str] = []
    for i, task_id in enumerate(ids):
        if isinstance(task_id, bool) or not isinstance(task_id, str | int) or task_id == "":
            raise RowError(f"task_ids[{i}] is {task_id!r}; a task id is a non-empty string or int")
        out.append(str(task_id))
    return out


def _row_markers(value: Any, i: int, j: int) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RowError(
            f"markers for prompt {i}, completion {j} is {value!r}; markers are a "
            "{name: number} mapping per completion"
        )
    return dict(value)


def rows(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    reward: Any,
    references: Sequence[Any] | None = None,
    task_ids: Sequence[Any] | None = None,
    markers: Sequence[Any] | None = None,
) -> list[dict[str, Any]]:
    return build_rows(prompts, completions, reward, references, task_ids, markers)


rows.__doc__ = build_rows.__doc__
