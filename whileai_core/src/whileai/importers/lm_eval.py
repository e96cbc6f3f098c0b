"""lm-evaluation-harness per-sample outputs (``--log_samples``: ``samples_<task>_<date>.jsonl``),
as lm-eval 0.4 writes them: ``doc_id``, ``doc``, ``target``, ``arguments``, ``resps``,
``filtered_resps``, ``metrics`` (0.4.2 on) and each metric's value."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from whileai.importers.common import json_lines, provenance, reward_of, row

#: What lm-eval calls the file: ``samples_<task>_<timestamp>.jsonl``.
_NAME = re.compile(r"samples_(?P<task>.+?)_\d{4}-\d{2}-\d{2}T[\d\-.:]+\.jsonl$")


def _prompt(arguments: Any) -> str:
    """The context the model was given: ``[[context, gen_kwargs], ...]`` (0.4.0-0.4.2) or
    ``{"gen_args_0": {"arg_0": context, ...}}`` (later)."""
    if isinstance(arguments, dict) and arguments:
        first = arguments[sorted(arguments)[0]]
        return str(first.get("arg_0", "")) if isinstance(first, dict) else str(first)
    if isinstance(arguments, list) and arguments:
        head = arguments[0]
        return str(head[0]) if isinstance(head, list) and head else str(head)
    return ""


def _response(record: dict[str, Any]) -> str:
    for key in ("filtered_resps", "resps"):
        value = record.get(key)
        while isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str):
            return value
    return ""


def read(path: Path, metric: str | None = None) -> Iterator[dict[str, Any]]:
    """The samples as rows, read a line at a time."""
    named = _NAME.search(path.name)
    task = named.group("task") if named else path.stem
    for where, record in json_lines(path):
        metrics = record.get("metrics") or [
            k for k in ("exact_match", "acc", "acc_norm", "pass@1") if k in record
        ]
        chosen = metric or (metrics[0] if metrics else None)
        if chosen is None or chosen not in record:
            raise ValueError(
                f"{where}: no metric value to score by (metrics: {metrics}); name one with metric="
            )
        yield (
            row(
                prompt=_prompt(record.get("arguments")),
                final_text=_response(record),
                reward=reward_of(record[chosen], f"{where} {chosen}"),
                task_id=f"{task}:{record.get('doc_id')}",
                repeat=0,
                tool="lm_eval",
                source=provenance(
                    "lm_eval", "0.4", path, task=task, metric=chosen, filter=record.get("filter")
                ),
                reference=record.get("target"),
                judge=f"lm_eval:{chosen}",
            )
        )
