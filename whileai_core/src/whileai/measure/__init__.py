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
from whileai.measure.decontaminate import DecontaminationReport, Match, decontaminate
from whileai.measure.judges import JudgeAgreementReport, Rate, judge_agreement
from whileai.measure.logprobs import (
    LogprobReport,
    MeanKLReport,
    StalenessReport,
    calibrate,
    logprob_report,
    mean_kl,
    staleness_report,
)
from whileai.measure.pass_at import GroupSignalReport, PassAtReport, group_signal, pass_at
from whileai.measure.proportions import cohen_kappa, wilson_interval
from whileai.measure.select import SelectReport, select
from whileai.measure.stats import bootstrap_ci, paired_bootstrap_ci
from whileai.measure.summaries import (
    JudgeTrustReport,
    MarkerSummaryReport,
    MetricSummaryReport,
    RefusalReport,
    TraceFlagReport,
    judge_trust,
    marker_summary,
    metric_summary,
    refusal_report,
    trace_flag_report,
)
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
# decontamination, judges, logprobs, summaries, proportions
__all__ += [
    "DecontaminationReport",
    "JudgeAgreementReport",
    "JudgeTrustReport",
    "LogprobReport",
    "MarkerSummaryReport",
    "Match",
    "MeanKLReport",
    "MetricSummaryReport",
    "Rate",
    "RefusalReport",
    "StalenessReport",
    "TraceFlagReport",
    "calibrate",
    "cohen_kappa",
    "decontaminate",
    "judge_agreement",
    "judge_trust",
    "logprob_report",
    "marker_summary",
    "mean_kl",
    "metric_summary",
    "refusal_report",
    "staleness_report",
    "trace_flag_report",
    "wilson_interval",
]
