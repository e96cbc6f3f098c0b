"""Who made a row, read the same way everywhere: whether the judge's model is the model that
wrote the row (``wai.grade``, ``wai.run_judge`` and ``judge_trust`` all decide it here), and
which of a run's metadata keys say where it came from, and how their values read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: A run's metadata keys that say where it came from, in the order a reader checks them
#: (``whileai report`` and the HTML report both show these).
RUN_PROVENANCE: tuple[str, ...] = (
    "run_id",
    "created",
    "whileai_version",
    "agent_model",
    "model_version",
    "user_model",
    "writer_model",
    "judge",
    "judge_model",
    "world",
    "system_prompt_sha",
    "planned_rollouts",
    "replayed_from_run",
)


def provenance_text(key: str, value: Any) -> str:
    """A run's metadata value as a person reads it: the world as its name and version
    (``bank 3``), text as it is, anything else as JSON (``--json`` output keeps the value)."""
    if key == "world" and isinstance(value, Mapping) and value.get("name"):
        return f"{value['name']} {value.get('version') or ''}".strip()
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def model_names(value: Any) -> set[str]:
    """A model name as written, without ``@<url or sha>``, and without a provider prefix
    (``vllm:``, ``openai:``), lower-cased: the forms under which two specs name one model."""
    if not isinstance(value, str) or not value.strip():
        return set()
    text = value.strip().lower()
    names = {text, text.split("@", 1)[0]}
    for name in list(names):
        prefix, sep, rest = name.partition(":")
        if sep and rest and not rest.startswith("//") and prefix.isidentifier():
            names.add(rest)
    return {n for n in names if n}


def self_judged(row: Mapping[str, Any]) -> bool:
    """Whether the row's judge model (``judge_meta.model`` or ``.served_model``) is the model
    that wrote it (``model_version``), under any of the names :func:`model_names` gives."""
    meta = row.get("judge_meta")
    if not isinstance(meta, Mapping):
        return False
    judge = model_names(meta.get("model")) | model_names(meta.get("served_model"))
    return bool(judge & model_names(row.get("model_version")))
