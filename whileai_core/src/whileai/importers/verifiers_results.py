"""A verifiers ``vf-eval`` run: ``results.jsonl`` (``id``, ``prompt``, ``completion``, ``task``,
``answer``, ``reward``, one column per reward function) and, beside it, ``metadata.json``
(``env``, ``model``, ``rollouts_per_example``, ...)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from whileai.importers.common import first, json_lines, last, provenance, reward_of, row, text_of


def read(path: Path) -> Iterator[dict[str, Any]]:
    """The rollouts as rows, read a line at a time."""
    meta_path = path.with_name("metadata.json")
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    env = str(meta.get("env") or "verifiers")
    seen: dict[str, int] = {}
    for where, record in json_lines(path):
        prompt, completion = record.get("prompt"), record.get("completion")
        task_id = f"{env}:{record.get('task', 'default')}:{record.get('id')}"
        repeat = seen.get(task_id, 0)
        seen[task_id] = repeat + 1
        yield (
            row(
                prompt=text_of(prompt) if isinstance(prompt, str) else first(prompt or [], "user"),
                final_text=text_of(completion)
                if isinstance(completion, str)
                else last(completion or [], "assistant"),
                reward=reward_of(record.get("reward"), where),
                task_id=task_id,
                repeat=repeat,
                tool="verifiers",
                source=provenance("verifiers", "results.jsonl", path, env=env),
                reference=record.get("answer"),
                model=meta.get("model"),
            )
        )
