"""What every reader shares: a score as a reward, a chat as a prompt and an answer, and the
provenance every imported row carries."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Inspect's (and others') letter grades: correct, incorrect, partial, no answer.
LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}


def json_lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each non-blank line of a JSON Lines file, with where it is (``file, line N``), read as
    it is asked for (an RL run's log may not fit in memory)."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}, line {number}"
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{where}: not JSON: {exc}") from None
            if not isinstance(record, dict):
                raise ValueError(f"{where}: a record is a JSON object, got {type(record).__name__}")
            yield where, record


def reward_of(value: Any, where: str) -> float | None:
    """A score as a reward in [0, 1]: a number, a bool, or a letter grade; None for a sample
    the tool left unscored. A value outside [0, 1] or not a score is an error naming ``where``."""
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, str) and value.upper() in LETTERS:
        return LETTERS[value.upper()]
    if isinstance(value, int | float):
        number = float(value)
        if math.isnan(number) or math.isinf(number) or not 0.0 <= number <= 1.0:
            raise ValueError(f"{where}: score {value!r} is not a reward in [0, 1]")
        return number
    raise ValueError(f"{where}: score {value!r} is not a number, a bool or a letter grade")


def text_of(content: Any) -> str:
    """A message's content as text (content parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                parts.append(str(part.get("text") or ""))
            else:
                parts.append(str(getattr(part, "text", "") or ""))
        return "".join(parts)
    return "" if content is None else str(content)


def last(messages: Sequence[Any], role: str) -> str:
    """The last message of ``role``'s text ('' when there is none)."""
    for message in reversed(list(messages)):
        got = (
            message.get("role") if isinstance(message, Mapping) else getattr(message, "role", None)
        )
        if got == role:
            content = (
                message.get("content")
                if isinstance(message, Mapping)
                else getattr(message, "content", None)
            )
            return text_of(content)
    return ""


def first(messages: Sequence[Any], role: str) -> str:
    return last(list(reversed(list(messages))), role)


def provenance(tool: str, version: str | None, path: Path, **more: Any) -> dict[str, Any]:
    """``lineage.source``: the tool, its format version, the file, anything else it says."""
    return {"tool": tool, "version": version, "file": str(path), **more}


def row(
    *,
    prompt: str,
    final_text: str,
    reward: float | None,
    task_id: str,
    repeat: int,
    tool: str,
    source: dict[str, Any],
    reference: Any = None,
    model: str | None = None,
    judge: str | None = None,
    messages: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One imported row, the shape every measurement reads."""
    out: dict[str, Any] = {
        "prompt": prompt,
        "final_text": final_text,
        "task_id": task_id,
        "scenario_id": task_id,
        "reward": reward,
        "judge_status": "ok" if reward is not None else "skipped",
        "judge_name": judge or tool,
        "label_source": tool,
        "lineage": {"rollout_key": f"{task_id}/r{repeat}", "repeat": repeat, "source": source},
    }
    if reward is None:
        out["reason"] = f"{tool} left this sample unscored"
    if model is not None:
        out["model_version"] = model
    if reference is not None:
        out["privileged"] = {"reference": reference}
    if messages is not None:
        out["messages"] = messages
    if extra:
        out.update(extra)
    return out
