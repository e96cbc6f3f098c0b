"""whileai: make and measure LLM agent rollouts.

``import whileai as wai`` is the whole public surface. Names are imported on first use, so
``import whileai`` is cheap and loads no plugin; plugins load when something first resolves a
name (``wai.verify.MathEqual()``, ``wai.plugins()``, ``wai.simulate(...)``).
"""

from __future__ import annotations

import importlib
from typing import Any

from whileai.hookspecs import hookimpl

__version__ = "0.1.0"

# public name -> module that defines it. A module exported as itself maps to its own path.
_EXPORTS: dict[str, str] = {
    # plugins and their contract
    "plugins": "whileai.plugins:",
    "Registry": "whileai.plugins",
    "UnknownPluginError": "whileai.plugins",
    "DuplicatePluginError": "whileai.plugins",
    "verify": "whileai.verify:",
    # rows and their schema
    "rows": "whileai.rows:",
    "Task": "whileai.simulations.schema",
    "Rollout": "whileai.simulations.schema",
    "Judgment": "whileai.simulations.schema",
    "Marker": "whileai.simulations.schema",
    "RowError": "whileai.simulations.schema",
    "to_row": "whileai.simulations.schema",
    "from_row": "whileai.simulations.schema",
    "task_key": "whileai.simulations.schema",
    "export_row": "whileai.simulations.privacy",
    "export_rows": "whileai.simulations.privacy",
    "Verdict": "whileai.grading",
    "simulate": "whileai.simulations.engine",
    "asimulate": "whileai.simulations.engine",
    "Simulation": "whileai.simulations.data",
    "RunKnobs": "whileai.simulations.defaults",
    # judging: grade rows, your own versioned judge, a fixed prompt set answered and graded
    "grade": "whileai.judging",
    "run_judge": "whileai.judging",
    "evaluate": "whileai.judging",
    "ScoredData": "whileai.judging",
    # measurement: pass rates, paired deltas, the noise floor, RL group selection
    "pass_at": "whileai.measure",
    "group_signal": "whileai.measure",
    "compare": "whileai.measure",
    "compare_runs": "whileai.measure",
    "delta_report": "whileai.measure",
    "eval_variance": "whileai.measure",
    "noise_band": "whileai.measure",
    "holdout_size": "whileai.measure",
    "select": "whileai.measure",
    # measurement: decontamination, summaries, judge agreement, logprobs and staleness
    "decontaminate": "whileai.measure",
    "metric_summary": "whileai.measure",
    "marker_summary": "whileai.measure",
    "trace_flag_report": "whileai.measure",
    "refusal_report": "whileai.measure",
    "judge_trust": "whileai.measure",
    "judge_agreement": "whileai.measure",
    "logprob_report": "whileai.measure",
    "mean_kl": "whileai.measure",
    "calibrate": "whileai.measure",
    "staleness_report": "whileai.measure",
    "wilson_interval": "whileai.measure",
    "cohen_kappa": "whileai.measure",
    # ranking: a quality score within each task's group, reward untouched
    "rank": "whileai.ranking",
}


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'whileai' has no attribute {name!r}")
    if target.endswith(":"):
        value: Any = importlib.import_module(target[:-1])
    else:
        value = getattr(importlib.import_module(target), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = ["__version__", "hookimpl", *_EXPORTS]
