"""Measurements over rows: every call reads the five row keys and groups by ``task_key``."""

from whileai.measure.compare import (
    CompareReport,
    CompareRunsReport,
    Delta,
    DeltaReport,
    compare,
    compare_runs,
    delta_report,
)
from whileai.measure.pass_at import GroupSignalReport, PassAtReport, group_signal, pass_at
from whileai.measure.select import SelectReport, select
from whileai.measure.stats import bootstrap_ci, paired_bootstrap_ci
from whileai.measure.variance import (
    EvalVarianceReport,
    HoldoutSizeReport,
    NoiseBandReport,
    RunSpread,
    eval_variance,
    holdout_size,
    noise_band,
)

__all__ = [
    "CompareReport",
    "CompareRunsReport",
    "Delta",
    "DeltaReport",
    "EvalVarianceReport",
    "GroupSignalReport",
    "HoldoutSizeReport",
    "NoiseBandReport",
    "PassAtReport",
    "RunSpread",
    "SelectReport",
    "bootstrap_ci",
    "compare",
    "compare_runs",
    "delta_report",
    "eval_variance",
    "group_signal",
    "holdout_size",
    "noise_band",
    "paired_bootstrap_ci",
    "pass_at",
    "select",
]
