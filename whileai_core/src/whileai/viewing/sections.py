"""The report's sections for one run: what it ran under, what it measured, where it failed.

Every number comes from the measurements (``pass_at``, ``metric_summary``, ``marker_summary``,
``judge_agreement``, ``compare_runs``), so the page says what ``whileai report`` says, with the
same intervals over tasks and the same notes; the page only lays them out.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from whileai.schema.marker_bounds import Bounds
from whileai.schema.provenance import RUN_PROVENANCE, provenance_text
from whileai.schema.report import fmt, fmt_ci
from whileai.schema.wording import counted
from whileai.viewing.digest import FaultTally, RunDigest
from whileai.viewing.page import Section, esc, figure, html_table, notes
from whileai.viewing.svg import Estimate, Series, count_bars, interval_plot, k_plot

Row = Mapping[str, Any]

#: the run report's fields shown as knobs (the rest are results, shown in their sections)
KNOBS = (
    "mode",
    "seed",
    "budget",
    "unique_situations",
    "requests_per_situation",
    "repeats",
    "repeat_policy",
    "hard_share",
    "hard_share_realised",
    "fault_rate",
    "strategy",
    "dimensions",
    "arm_weights",
    "simulator",
    "grader",
    "llm_grader",
    "sampling",
    "max_turns",
    "max_tool_calls",
    "logprobs",
    "executor",
    "advanced",
)
#: most k values a pass@k plot computes (log-spaced beyond this)
MAX_K_POINTS = 16


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _ci(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    low, high = value
    return float(low), float(high)


def summary_section(run: RunDigest, meta: Mapping[str, Any], pass_report: Any) -> Section:
    errored, judged = run.errored, run.judged
    p = pass_report
    k = "k" if p.k is None else str(p.k)

    table = html_table(
        ["", "value", "95% interval", "tasks"],
        [
            ["pass@1", fmt(p.pass_at_1), fmt_ci(p.ci95), p.n_tasks],
            [f"pass^{k}", fmt(p.pass_pow_k), fmt_ci(p.pass_pow_k_ci95), p.n_k_groups],
            [f"pass@{k}", fmt(p.pass_at_k), fmt_ci(p.pass_at_k_ci95), p.n_k_groups],
        ],
    )
    state = meta.get("complete")
    status = (
        "<p class='note'>The run did not finish: the same <code>simulate()</code> call with "
        "<code>resume=True</code>, or <code>whileai run CONFIG.toml --resume</code>, continues "
        "it.</p>"
        if state is False
        else ""
    )
    counts = (
        f"<p>{counted(run.rows, 'rollout')}: {judged} graded, {errored} errored, "
        f"{run.rows - judged - errored} unscored.</p>"
    )
    warnings = [f"warning: {w}" for w in meta.get("warnings") or []]
    return Section("summary", "Summary", counts + status + table + notes([*p.notes, *warnings]))


def knobs_section(meta: Mapping[str, Any]) -> Section:
    metadata = meta.get("metadata") or {}
    report = meta.get("report") or {}
    provenance = [
        [k, provenance_text(k, metadata[k])] for k in RUN_PROVENANCE if metadata.get(k) is not None
    ]
    knobs = [[k, _shown(report[k])] for k in KNOBS if report.get(k) not in (None, {}, [])]
    resolved = report.get("knobs") or {}
    body = "<h3>Provenance</h3>" + (
        html_table(["", "value"], provenance, numeric=False)
        if provenance
        else "<p class='muted'>These rows carry no sidecar: no provenance beyond the rows.</p>"
    )
    if knobs:
        body += "<h3>Knobs</h3>" + html_table(["knob", "value"], knobs, numeric=False)
    if resolved:
        body += (
            "<details><summary>every advanced knob as the run resolved it</summary>"
            + html_table(
                ["knob", "value"], [[k, _shown(v)] for k, v in sorted(resolved.items())], False
            )
            + "</details>"
        )
    return Section("knobs", "Knobs and provenance", body)


def _k_values(largest: int) -> list[int]:
    if largest <= MAX_K_POINTS:
        return list(range(1, largest + 1))
    ks = {1, largest}
    step = largest ** (1 / (MAX_K_POINTS - 1))
    ks.update(round(step**i) for i in range(MAX_K_POINTS))
    return sorted(k for k in ks if 1 <= k <= largest)


def pass_at_k_section(run: RunDigest, pass_report: Any) -> Section:
    from whileai.measure.pass_at import MIN_REPEATS, pass_at_from_table

    largest = max(run.binary_by_task_id.values(), default=0)
    at_k: list[tuple[int, float | None, tuple[float, float] | None]] = []
    pow_k: list[tuple[int, float | None, tuple[float, float] | None]] = []
    table = []
    for k in _k_values(largest):
        if k == 1:
            point = (1, pass_report.pass_at_1, _ci(pass_report.ci95))
            at_k.append(point)
            pow_k.append(point)
            table.append(
                [1, fmt(pass_report.pass_at_1), fmt(pass_report.pass_at_1), pass_report.n_tasks]
            )
            continue
        report = pass_at_from_table(run.table, k=k)
        at_k.append((k, report.pass_at_k, _ci(report.pass_at_k_ci95)))
        pow_k.append((k, report.pass_pow_k, _ci(report.pass_pow_k_ci95)))
        table.append([k, fmt(report.pass_at_k), fmt(report.pass_pow_k), report.n_k_groups])
    plot = k_plot(
        "pass@k and pass^k over k, with 95% intervals over tasks",
        [Series("pass@k (any of k passes)", at_k), Series("pass^k (all k pass)", pow_k)],
    )
    body = figure(
        plot,
        "pass-at-k",
        f"k=1 is pass@1 over every task; for k>1 only tasks with at least max(k, {MIN_REPEATS}) "
        "attempts count. Shaded: the 95% interval.",
    )
    body += html_table(["k", "pass@k", "pass^k", "tasks"], table)
    if largest < 2:
        body += notes(["every task has a single attempt: pass@k needs repeats"])
    elif largest < MIN_REPEATS:
        body += notes(
            [
                f"the largest group has {largest} attempts: for k>1 only tasks with at least "
                f"{MIN_REPEATS} count, so the curve is pass@1 alone (run {MIN_REPEATS} or more "
                "repeats for the rest)"
            ]
        )
    return Section("pass-at-k", "pass@k over k", body)


def _reward_estimate(label: str, run: RunDigest, members: array[int]) -> tuple[Estimate, list[str]]:
    """The group's mean reward over its tasks, as ``metric_summary`` gives it for the group's
    rows that have a reward."""
    from whileai.measure.summaries import summarise_table

    at = np.frombuffer(members, dtype=np.int64)
    judged = at[np.frombuffer(run.has_reward, dtype=np.int8)[at].astype(bool)]
    if not len(judged):
        return Estimate(label, None, None, text=f"unjudged ({counted(len(at), 'row')})"), []
    lines, _, _, said = summarise_table(run.table.of_rows(judged), "reward", True, 0.95)
    line = lines.get("reward")
    if line is None:
        # every judged row's judge errored or skipped: no reward to average
        return Estimate(label, None, None, text=f"unjudged ({counted(len(at), 'row')})"), said
    text = f"{fmt(line.mean)} {fmt_ci(line.ci95)} ({counted(line.n_tasks, 'task')})"
    return Estimate(label, line.mean, _ci(line.ci95), text=text), said


def arms_section(run: RunDigest) -> Section:
    groups = run.arms
    if not groups:
        return Section(
            "by-arm",
            "Reward by arm",
            "<p class='muted'>No row names an arm: arms come from a search strategy "
            "(<code>strategy='bandit'</code>, <code>arm_weights=</code>).</p>",
        )
    items, said = [], []
    for arm, members in groups.items():
        estimate, why = _reward_estimate(arm, run, members)
        items.append(estimate)
        said.extend(why)
    plot = interval_plot("mean reward by arm (95% interval over tasks)", items, low=0, high=1)
    return Section(
        "by-arm", "Reward by arm", figure(plot, "reward-by-arm") + notes(sorted(set(said)))
    )


def dimensions_section(run: RunDigest) -> Section:
    if not run.dimensions:
        return Section(
            "by-dimension",
            "Reward by dimension",
            "<p class='muted'>No row carries scenario_dimensions: the situations were not "
            "written over a dimension grid.</p>",
        )
    body, said = [], []
    for name, groups in run.dimensions.items():
        items = []
        for value, members in groups.items():
            estimate, why = _reward_estimate(value, run, members)
            items.append(estimate)
            said.extend(why)
        plot = interval_plot(
            f"mean reward by {name} (95% interval over tasks)", items, low=0, high=1
        )
        body.append(figure(plot, f"reward-by-{name}"))
    return Section("by-dimension", "Reward by dimension", "".join(body) + notes(sorted(set(said))))


def faults_section(run: RunDigest) -> Section:
    met = run.faults
    lines = [*met.items(), *([("no fault", run.clean)] if run.clean.rollouts else [])]

    def outcome(members: FaultTally) -> tuple[int, int, int, float | None]:
        judged = members.rewards
        mean = sum(judged) / len(judged) if judged else None
        return members.passed, len(judged) - members.passed, members.rollouts - len(judged), mean

    bars, table = [], []
    for kind, members in lines:
        passed, failed, unscored, mean = outcome(members)
        bars.append((kind, passed, failed))
        table.append([kind, members.rollouts, passed, failed, unscored, fmt(mean)])
    plot = count_bars(
        "rollouts by the fault kinds they met, and how they ended",
        bars,
        labels=("passed", "not passed"),
    )
    body = figure(
        plot,
        "faults-vs-outcome",
        "Counts of rollouts, not an estimate: a rollout that met two kinds counts under each.",
    )
    body += html_table(
        ["fault kind", "rollouts", "passed", "not passed", "unscored", "mean reward"], table
    )
    if not met:
        body += "<p class='muted'>No fault fired in this run.</p>"
    return Section("faults", "Faults and outcomes", body)


def markers_section(run: RunDigest, bounds: Mapping[str, Bounds] | None = None) -> Section:
    """Each marker's mean over tasks with its interval (inside the ``bounds`` the run recorded
    for it), flags and counts plotted apart."""
    from whileai.measure.summaries import summarise_table

    if not run.any_markers:
        return Section("markers", "Markers", "<p class='muted'>No row carries markers.</p>")
    metrics, _, _, said = summarise_table(run.table, None, False, 0.95, bounds)
    if not metrics:
        said.append("no row carries markers")
    flags: list[tuple[str, Any, Estimate]] = []
    counts: list[tuple[str, Any, Estimate]] = []
    for name, line in metrics.items():
        is_flag = run.marker_flags[name]
        text = f"{fmt(line.mean)} {fmt_ci(line.ci95)}"
        estimate = Estimate(name, line.mean, _ci(line.ci95), text)
        (flags if is_flag else counts).append((name, line, estimate))
    body = ""
    if flags:
        plot = interval_plot(
            "share of rollouts with each flag (95% interval over tasks)",
            [e for _, _, e in flags],
            low=0,
            high=1,
        )
        body += figure(plot, "markers")
    body += html_table(
        ["marker", "mean", "95% interval (tasks)", "tasks", "rows"],
        [
            [name, fmt(line.mean), fmt_ci(line.ci95), line.n_tasks, line.n_rows]
            for name, line, _ in [*flags, *counts]
        ],
    )
    return Section("markers", "Markers", body + notes(said))


def judge_section(run: RunDigest, rows: Sequence[Row]) -> Section:
    """Judge agreement over ``rows`` (the run's, read again) when any carries gold."""
    from whileai.measure.judges import judge_agreement

    if not run.any_gold:
        return Section(
            "judge",
            "Judge agreement",
            "<p class='muted'>No row carries a gold label (<code>gold_reward</code>), so there "
            "is nothing to hold the judge to. <code>wai.judge_agreement(rows, gold=...)</code> "
            "takes a second, trusted scoring run.</p>",
        )
    report = judge_agreement(rows)
    (pp, pf), (fp, ff) = report.confusion.as_table()
    rates = html_table(
        ["", "count", "share", "95% Wilson"],
        [
            ["agreement", *report.agreement.cells()],
            ["pass when gold fails", *report.pass_when_gold_fail.cells()],
            ["fail when gold passes", *report.fail_when_gold_pass.cells()],
        ],
    )
    confusion = (
        "<table class='cm'><thead><tr><th></th><th>gold pass</th><th>gold fail</th></tr></thead>"
        f"<tbody><tr><th>judge pass</th><td>{pp}</td><td>{pf}</td></tr>"
        f"<tr><th>judge fail</th><td>{fp}</td><td>{ff}</td></tr></tbody></table>"
    )
    kappa = "-" if report.kappa is None else f"{report.kappa:.3f}"
    body = (
        f"<p>{counted(report.n_gold, 'row')} with gold ({esc(report.gold_source)}); "
        f"Cohen's kappa {kappa} "
        "(point estimate).</p>" + rates + "<h3>Confusion</h3>" + confusion
    )
    return Section("judge", "Judge agreement", body + notes(report.notes))


def _delta_estimate(name: str, delta: Any, headline: str) -> Estimate:
    ci = _ci(delta.ci95)
    text = ("- " if delta.delta is None else f"{delta.delta:+.3f} ") + (
        "no interval" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"
    )
    label = f"{name} *" if name == headline else name
    return Estimate(label, delta.delta, ci, text + f" ({counted(delta.n_paired, 'task')})")


def _on_unit_scale(delta: Any) -> bool:
    means = [m for m in (delta.mean_a, delta.mean_b) if m is not None]
    return all(0.0 <= m <= 1.0 for m in means)


def compare_section(report: Any, baseline: str, candidate: str, floor: Any = None) -> Section:
    """Forest plots of the paired differences (b - a per metric): the reward and the 0-1
    markers on one axis, each count marker on its own, the noise band on the headline."""
    from whileai.measure.compare import VERDICT_READINGS

    unit = [(n, d) for n, d in report.metrics.items() if _on_unit_scale(d)]
    counts = [(n, d) for n, d in report.metrics.items() if not _on_unit_scale(d)]
    band = report.noise_band
    axis = "difference" + ("; shaded: the headline's noise band" if band else "")
    plots = []
    if unit:
        rows = [n for n, _ in unit]
        plots.append(
            figure(
                interval_plot(
                    "paired differences, candidate - baseline (95% interval over tasks)",
                    [_delta_estimate(n, d, report.headline) for n, d in unit],
                    zero=True,
                    band=band,
                    band_row=rows.index(report.headline) if report.headline in rows else None,
                    axis=axis,
                ),
                "compare-forest",
                "* marks the headline metric; a metric whose means lie outside 0-1 has a plot "
                "of its own below.",
            )
        )
    for name, delta in counts:
        plots.append(
            figure(
                interval_plot(
                    f"paired difference in {name}, candidate - baseline",
                    [_delta_estimate(name, delta, report.headline)],
                    zero=True,
                    band=band,
                    band_row=0 if name == report.headline else None,
                    axis=f"difference in {name}",
                ),
                f"compare-{name}",
            )
        )
    reading = VERDICT_READINGS.get(report.verdict, report.verdict)
    head = "-" if report.delta is None else f"{report.delta:+.3f}"
    body = (
        f"<p>Baseline (a) <code>{esc(baseline)}</code>, candidate (b) "
        f"<code>{esc(candidate)}</code>; "
        f"{counted(report.n_paired, 'task')} paired, {report.only_a} only in the baseline and "
        f"{report.only_b} only in the candidate.</p>"
        f"<p><b>Headline ({esc(report.headline)}): {head}</b>, {esc(reading)}"
        + ("" if band is None else f" (noise band +/-{band:.3f})")
        + ".</p>"
        + "".join(plots)
    )
    if band is None:
        body += notes(
            [
                "no noise band: give three or more re-runs of the baseline "
                "(whileai view --floor R1 R2 R3) to see what re-running alone moves"
            ]
        )
    body += notes([*report.warnings, *report.notes])
    if floor is not None:
        body += f"<h3>Noise floor</h3><pre>{esc(str(floor))}</pre>"
    return Section("compare", "Compared with the baseline", body)
