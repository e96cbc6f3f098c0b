"""whileai: make and measure LLM agent rollouts.

``import whileai as wai`` is the whole public surface. Names are imported on first use, so
``import whileai`` is cheap and loads no plugin; plugins load when something first resolves a
name (``wai.verify.MathEqual()``, ``wai.plugins()``, ``wai.simulate(...)``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from whileai.hookspecs import hookimpl
from whileai.version import __version__

# public name -> module that defines it. A module exported as itself maps to its own path.
_EXPORTS: dict[str, str] = {
    # plugins and their contract
    "plugins": "whileai.registry",
    "Registry": "whileai.registry",
    "UnknownPluginError": "whileai.registry",
    "DuplicatePluginError": "whileai.registry",
    "verify": "whileai.verify:",
    # executors and their contract: where rollouts run
    "Executor": "whileai.executors",
    "Job": "whileai.executors",
    "RunSpec": "whileai.executors",
    "RegistrySpec": "whileai.executors",
    "error_row": "whileai.executors",
    "JobRunner": "whileai.simulations.workers",
    # worlds and their contract
    "WorldDefaults": "whileai.worlds",
    "world_defaults": "whileai.worlds",
    # rows and their schema
    "rows": "whileai.build_rows",
    "Task": "whileai.schema.records",
    "Rollout": "whileai.schema.records",
    "Judgment": "whileai.schema.records",
    "Marker": "whileai.schema.records",
    "RowError": "whileai.schema.records",
    "to_row": "whileai.schema.records",
    "from_row": "whileai.schema.records",
    "task_key": "whileai.schema.records",
    "export_row": "whileai.schema.export",
    "export_rows": "whileai.schema.export",
    "Verdict": "whileai.scoring",
    "simulate": "whileai.simulations.engine",
    "asimulate": "whileai.simulations.engine",
    "branch": "whileai.simulations.engine",
    # training data out: rows as a GRPO trainer reads them, a reward function TRL calls
    "export": "whileai.training",
    # the static HTML report of a run (and of a comparison)
    "html_report": "whileai.viewing",
    # other tools' logs in: Inspect AI, lm-evaluation-harness, tau-bench, verifiers
    "load": "whileai.importers",
    "reward_function": "whileai.training",
    "abranch": "whileai.simulations.engine",
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


# The names as type checkers see them (``as`` marks each a re-export); at run time
# __getattr__ imports each on first use.
if TYPE_CHECKING:
    from whileai import verify as verify
    from whileai.build_rows import rows as rows
    from whileai.executors import (
        Executor as Executor,
    )
    from whileai.executors import (
        Job as Job,
    )
    from whileai.executors import (
        RegistrySpec as RegistrySpec,
    )
    from whileai.executors import (
        RunSpec as RunSpec,
    )
    from whileai.executors import (
        error_row as error_row,
    )
    from whileai.importers import load as load
    from whileai.judging import ScoredData as ScoredData
    from whileai.judging.evaluate import evaluate as evaluate
    from whileai.judging.grade import grade as grade
    from whileai.judging.grade import run_judge as run_judge
    from whileai.measure import (
        calibrate as calibrate,
    )
    from whileai.measure import (
        cohen_kappa as cohen_kappa,
    )
    from whileai.measure import (
        compare as compare,
    )
    from whileai.measure import (
        compare_runs as compare_runs,
    )
    from whileai.measure import (
        decontaminate as decontaminate,
    )
    from whileai.measure import (
        delta_report as delta_report,
    )
    from whileai.measure import (
        eval_variance as eval_variance,
    )
    from whileai.measure import (
        group_signal as group_signal,
    )
    from whileai.measure import (
        holdout_size as holdout_size,
    )
    from whileai.measure import (
        judge_agreement as judge_agreement,
    )
    from whileai.measure import (
        judge_trust as judge_trust,
    )
    from whileai.measure import (
        logprob_report as logprob_report,
    )
    from whileai.measure import (
        marker_summary as marker_summary,
    )
    from whileai.measure import (
        mean_kl as mean_kl,
    )
    from whileai.measure import (
        metric_summary as metric_summary,
    )
    from whileai.measure import (
        noise_band as noise_band,
    )
    from whileai.measure import (
        pass_at as pass_at,
    )
    from whileai.measure import (
        refusal_report as refusal_report,
    )
    from whileai.measure import (
        select as select,
    )
    from whileai.measure import (
        staleness_report as staleness_report,
    )
    from whileai.measure import (
        trace_flag_report as trace_flag_report,
    )
    from whileai.measure import (
        wilson_interval as wilson_interval,
    )
    from whileai.ranking import rank as rank
    from whileai.registry import (
        DuplicatePluginError as DuplicatePluginError,
    )
    from whileai.registry import (
        Registry as Registry,
    )
    from whileai.registry import (
        UnknownPluginError as UnknownPluginError,
    )
    from whileai.registry import (
        plugins as plugins,
    )
    from whileai.schema.export import export_row as export_row
    from whileai.schema.export import export_rows as export_rows
    from whileai.schema.records import (
        Judgment as Judgment,
    )
    from whileai.schema.records import (
        Marker as Marker,
    )
    from whileai.schema.records import (
        Rollout as Rollout,
    )
    from whileai.schema.records import (
        RowError as RowError,
    )
    from whileai.schema.records import (
        Task as Task,
    )
    from whileai.schema.records import (
        from_row as from_row,
    )
    from whileai.schema.records import (
        task_key as task_key,
    )
    from whileai.schema.records import (
        to_row as to_row,
    )
    from whileai.scoring import Verdict as Verdict
    from whileai.simulations.data import Simulation as Simulation
    from whileai.simulations.defaults import RunKnobs as RunKnobs
    from whileai.simulations.engine import abranch as abranch
    from whileai.simulations.engine import asimulate as asimulate
    from whileai.simulations.engine import branch as branch
    from whileai.simulations.engine import simulate as simulate
    from whileai.simulations.workers import JobRunner as JobRunner
    from whileai.training import export as export
    from whileai.training import reward_function as reward_function
    from whileai.viewing import html_report as html_report
    from whileai.worlds import WorldDefaults as WorldDefaults
    from whileai.worlds import world_defaults as world_defaults


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
