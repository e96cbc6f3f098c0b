"""Inspect AI eval logs, read with Inspect's own readers (``inspect_ai.log.read_eval_log`` for
the header, ``read_eval_log_samples`` for the samples, one at a time), so every log format and
version Inspect reads is read here too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from whileai.importers.common import first, provenance, reward_of, row, text_of


def read(path: Path, scorer: str | None = None) -> Iterator[dict[str, Any]]:
    """The samples as rows, read one at a time by Inspect's own sample reader (the log's
    header first: a log of any size is never read whole)."""
    try:
        import inspect_ai
        from inspect_ai.log import read_eval_log, read_eval_log_samples
    except ImportError:
        raise ImportError(
            f"{path}: reading an Inspect AI log needs the inspect_ai package: pip install inspect-ai"
        ) from None
    log = read_eval_log(str(path), header_only=True)
    task = str(log.eval.task)
    source = provenance(
        "inspect_ai",
        str(getattr(inspect_ai, "__version__", None)),
        path,
        log_format=getattr(log, "version", None),
        task=task,
        run_id=getattr(log.eval, "run_id", None),
        status=getattr(log, "status", None),
    )
    samples = 0
    for sample in read_eval_log_samples(str(path), all_samples_required=False):
        samples += 1
        where = f"{path}: sample {sample.id} epoch {sample.epoch}"
        scores = sample.scores or {}
        name = scorer or (next(iter(scores)) if scores else None)
        if scorer is not None and scorer not in scores:
            raise ValueError(f"{where}: no score named {scorer!r}; it has {sorted(scores)}")
        value = scores[name].value if name is not None else None
        if isinstance(value, dict):
            raise ValueError(f"{where}: score {name!r} is a dict of values; pick one with scorer=")
        prompt = sample.input if isinstance(sample.input, str) else first(sample.input, "user")
        target = sample.target
        yield (
            row(
                prompt=text_of(prompt),
                final_text=sample.output.completion if sample.output else "",
                reward=reward_of(value, where),
                task_id=f"{task}:{sample.id}",
                repeat=int(sample.epoch) - 1,
                tool="inspect_ai",
                source={**source, "scorer": name},
                reference=target if isinstance(target, str) else list(target) if target else None,
                model=str(log.eval.model),
                judge=f"inspect_ai:{name}" if name else None,
            )
        )
    if not samples:
        raise ValueError(f"{path}: the log holds no samples (written with samples excluded?)")
