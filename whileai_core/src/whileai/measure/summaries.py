"""Summaries of what was measured on the rows: metric and marker means with intervals over
tasks, each trajectory flag's clean share, the refusal share, and how far the judge can be
trusted on these rows.

Means are per task first, then across tasks, and their intervals are over tasks (Miller 2024,
arXiv:2411.00640): the bounded form for values in [0, 1] (every row's, not only the task
means), Student's t with Hall's correction for skewness for counts (which a percentile
bootstrap over tasks matches at a few dozen tasks; tests/measure/test_summaries.py, and
tests/measure/test_count_intervals.py for their coverage from 5 tasks).
Shares of rows (a flag's clean share, the refusal share, the judge's error rate) carry Wilson
intervals at the rows' effective count over tasks: a task's repeats are correlated, so they
count as the independent rows their design effect leaves (:meth:`Rate.over_tasks`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from whileai.measure._tasks import TaskTable, task_table
from whileai.measure.intervals import (
    SMALL_SAMPLE,
    clipped,
    mean_interval,
    small_sample_note,
    unit_count,
)
from whileai.measure.judges import GOLD_FLOOR, Pair, Rate, TaskTallies, _agreement, _reward_of
from whileai.measure.stats import DEFAULT_RESAMPLES
from whileai.schema.marker_bounds import Bounds, recorded_bounds
from whileai.schema.provenance import self_judged as judged_by_its_own_model
from whileai.schema.records import check_reward, check_row, situation_key, task_key
from whileai.schema.report import Report, fmt, fmt_ci, table
from whileai.schema.source import row_source, rows_of
from whileai.schema.wording import agreeing, counted

Interval = tuple[float, float]


def _repeats_note(n: int, clustered: bool) -> str:
    unit = "situations" if clustered else "tasks"
    return (
        f"{counted(n, 'task')} {agreeing(n, 'has', 'have')} repeats, which are correlated: "
        f"the Wilson intervals count the rows as the independent ones they are worth over "
        f"{unit} (their design effect), not as one each"
    )


@attrs.frozen(repr=False)
class MetricLine(Report):
    """One metric: its mean over tasks (each task's rows averaged first) and its interval."""

    title = "metric"

    name: str
    mean: float
    ci95: Interval | None
    n_tasks: int
    n_rows: int

    def _lines(self) -> list[str]:
        return [
            f"  {self.name}: {fmt(self.mean)} {fmt_ci(self.ci95)} over "
            f"{counted(self.n_tasks, 'task')}, {counted(self.n_rows, 'row')}"
        ]


@attrs.frozen(repr=False)
class MetricSummaryReport(Report):
    """Mean and interval over tasks of each metric."""

    title = "metric_summary"

    metrics: dict[str, MetricLine]
    n_rows: int
    n_tasks: int
    notes: list[str]

    def _lines(self) -> list[str]:
        body = [
            (m.name, fmt(m.mean), fmt_ci(m.ci95), m.n_tasks, m.n_rows)
            for m in self.metrics.values()
        ]
        return table(("metric", "mean", "95% CI (tasks)", "tasks", "rows"), body)


@attrs.frozen(repr=False)
class MarkerSummaryReport(MetricSummaryReport):
    """``metric_summary`` over the markers alone."""

    title = "marker_summary"


def _summarise(
    rows: Any,
    names: Sequence[str] | None,
    include_reward: bool,
    n_resamples: int,
    seed: int,
    confidence: float,
) -> tuple[dict[str, MetricLine], int, int, list[str]]:
    source = row_source(rows)
    bounds = recorded_bounds(source.metadata)
    return summarise_table(task_table(source.rows), names, include_reward, confidence, bounds)


def summarise_table(
    tasks: TaskTable,
    names: Sequence[str] | str | None,
    include_reward: bool,
    confidence: float,
    bounds: Mapping[str, Bounds] | None = None,
) -> tuple[dict[str, MetricLine], int, int, list[str]]:
    """:func:`metric_summary`'s lines, rows, tasks and notes from a table already built (a
    report that reads a run once gives every summary its table). ``bounds``: the markers'
    declared bounds, as their run recorded them (``recorded_bounds(metadata)``)."""
    wanted: list[str]
    if names is None:
        wanted = (["reward"] if include_reward else []) + sorted(tasks.markers)
    else:
        if isinstance(names, str):
            names = [names]
        wanted = [n.removeprefix("marker:") for n in names]
        unknown = [n for n in wanted if n != "reward" and n not in tasks.markers]
        if unknown:
            raise ValueError(
                f"no row carries marker {unknown[0]!r}; markers present: "
                f"{', '.join(sorted(tasks.markers)) or 'none'}"
            )
    lines: dict[str, MetricLine] = {}
    notes: list[str] = []
    few: list[str] = []
    alike: list[str] = []
    #: the metrics whose interval rests on fewer than SMALL_SAMPLE units, and on how many
    units_of: dict[str, int] = {}
    for name in wanted:
        if name == "reward":
            _, means = tasks.reward_means()
            has = tasks.n_judged > 0
            n_rows = int(tasks.n_judged.sum())
            bounded, declared = True, None
        else:
            _, means = tasks.marker_means(name)
            has = tasks.markers[name][0] > 0
            n_rows = int(tasks.markers[name][0].sum())
            declared = (bounds or {}).get(name)
            bounded = tasks.marker_bounded(name, declared)
        if len(means) == 0:
            notes.append(f"{name}: no row carries a value")
            continue
        ci = None
        clusters = tasks.clusters_of(has)
        units = unit_count(len(means), clusters)
        if units >= 2:
            ci = clipped(
                mean_interval(means, n_rows, clusters, confidence, bounded=bounded), declared
            )
            if ci is not None and ci[0] == ci[1]:
                # a count every task gave alike: Student's t has no spread to size an interval
                # by, and an interval of width 0 would claim the mean is known exactly
                ci = None
                alike.append(name)
            elif units < SMALL_SAMPLE:
                units_of[name] = units
        else:
            few.append(name)
        lines[name] = MetricLine(name, float(means.mean()), ci, len(means), n_rows)
    if few:
        notes.append(
            f"one situation for {', '.join(few)}: an interval over tasks needs two or more, "
            "so a point estimate"
        )
    if alike:
        notes.append(
            f"no interval for {', '.join(alike)}: every task gave the same value, so there is "
            "no spread to size one by"
        )
    if units_of:
        fewest = min(units_of.values())
        notes.append(
            small_sample_note(", ".join(units_of), fewest, clustered=tasks.clusters is not None)
        )
    if tasks.counts.unjudged and include_reward and "reward" in lines:
        notes.append(f"{tasks.counts.unjudged} unjudged rows left out of reward")
    return lines, tasks.counts.rows, tasks.n_tasks, notes


def metric_summary(
    rows: Any,
    metrics: Sequence[str] | str | None = None,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> MetricSummaryReport:
    """Mean and interval over tasks of ``reward`` and every marker (or the ``metrics`` named:
    ``"reward"``, a marker name, or ``"marker:<name>"``)."""
    lines, n_rows, n_tasks, notes = _summarise(rows, metrics, True, n_resamples, seed, confidence)
    return MetricSummaryReport(metrics=lines, n_rows=n_rows, n_tasks=n_tasks, notes=notes)


def marker_summary(
    rows: Any,
    markers: Sequence[str] | str | None = None,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> MarkerSummaryReport:
    """Mean and interval over tasks of every marker (flags count as 0 / 1), each interval
    inside the bounds the marker declared when a run recorded them."""
    source = row_source(rows)
    return marker_summary_from_table(
        task_table(source.rows),
        markers,
        confidence=confidence,
        bounds=recorded_bounds(source.metadata),
    )


def marker_summary_from_table(
    table: TaskTable,
    markers: Sequence[str] | str | None = None,
    *,
    confidence: float = 0.95,
    bounds: Mapping[str, Bounds] | None = None,
) -> MarkerSummaryReport:
    """:func:`marker_summary` from the table of the rows, built once: a report that also
    measures pass rates reads the run once."""
    lines, n_rows, n_tasks, notes = summarise_table(table, markers, False, confidence, bounds)
    if not lines and markers is None:
        notes.append("no row carries markers")
    return MarkerSummaryReport(metrics=lines, n_rows=n_rows, n_tasks=n_tasks, notes=notes)


def _is_flag(value: Any) -> bool:
    return isinstance(value, bool) or value in (0, 1)


@attrs.frozen(repr=False)
class TraceFlagReport(Report):
    """Each flag marker: the share of rows where it did not fire (clean), with Wilson."""

    title = "trace_flag_report"

    flags: dict[str, Rate]
    not_flags: list[str]
    n_rows: int
    notes: list[str]

    def _lines(self) -> list[str]:
        body = [(name, *rate.cells()) for name, rate in self.flags.items()]
        return table(("flag", "clean", "share", "95% Wilson"), body)


def trace_flag_report(rows: Any, *, confidence: float = 0.95) -> TraceFlagReport:
    """Every marker whose values are all flags (bool, or 0 / 1): its clean share (the flag is
    False / 0) over the rows that carry it, with a Wilson interval over tasks (the rows'
    effective count, their repeats' correlation taken out)."""
    rows = rows_of(rows)
    tasks = task_table(rows)
    flags = {
        name: Rate.over_tasks(seen - fired, seen, tasks.clusters, confidence)
        for name, (seen, fired) in sorted(tasks.markers.items())
        if _flags_only(tasks, name)
    }
    non_flag = sorted(name for name in tasks.markers if name not in flags)
    notes = []
    if not flags:
        notes.append("no flag markers (bool or 0/1 values) on these rows")
    if non_flag:
        notes.append(
            f"not flags (values other than 0/1), see marker_summary: {', '.join(non_flag)}"
        )
    repeats = int((tasks.n_rows > 1).sum()) if flags else 0
    if repeats:
        notes.append(_repeats_note(repeats, tasks.clusters is not None))
    return TraceFlagReport(flags=flags, not_flags=non_flag, n_rows=len(rows), notes=notes)


def _flags_only(tasks: TaskTable, name: str) -> bool:
    """Whether every value of marker ``name`` was 0 or 1: its per-task totals then count the
    rows that fired, and nothing between 0 and 1 was added into them."""
    low, high = tasks.marker_ranges[name]
    return low >= 0 and high <= 1 and name not in tasks.fractional


#: The detection rule when a row has no ``refusal`` marker: the reply opens (after whitespace
#: and quotes) with an apology or a statement that the model cannot or will not do the task.
REFUSAL_RULE = re.compile(
    r"""^\W*(i'?m\s+sorry|i\s+am\s+sorry|sorry\b|i\s+apologi[sz]e|my\s+apologies|"""
    r"""i\s+(can\s*not|can'?t|won'?t|will\s+not|am\s+not\s+able|am\s+unable|'?m\s+not\s+able|"""
    r"""'?m\s+unable|must\s+decline|do\s+not\s+feel\s+comfortable|don'?t\s+feel\s+comfortable)\b|"""
    r"""as\s+an\s+ai\b|unfortunately,?\s+i\s+(can'?t|cannot|am\s+unable))""",
    re.IGNORECASE,
)


def detect_refusal(text: str) -> bool:
    """True when ``text`` opens as a refusal (:data:`REFUSAL_RULE`); curly quotes count as
    straight ones. "I can't wait to help" reads as a refusal too: a rule this simple trades a
    few false alarms for no model call; a ``refusal`` marker overrides it."""
    return bool(REFUSAL_RULE.match(text.replace("\u2019", "'").lstrip()[:200]))


@attrs.frozen(repr=False)
class RefusalReport(Report):
    """Share of rows that refuse, with Wilson over tasks, and where each verdict came from."""

    title = "refusal_report"

    refusals: Rate
    from_marker: int
    detected: int
    source: str
    per_task_any: int
    n_tasks: int
    notes: list[str]

    def _lines(self) -> list[str]:
        lines = table(("", "count", "share", "95% Wilson"), [("refusal", *self.refusals.cells())])
        lines.append(
            f"  read from markers['refusal'] on {counted(self.from_marker, 'row')}, detected by "
            f"rule on {self.detected}; {self.per_task_any} of {counted(self.n_tasks, 'task')} "
            "refused at least once"
        )
        return lines


def refusal_report(
    rows: Any, *, marker: str = "refusal", confidence: float = 0.95
) -> RefusalReport:
    """Share of refusals. Reads ``markers[marker]`` where a row has it; elsewhere applies
    :func:`detect_refusal` to ``final_text``, and the report says how many of each."""
    rows = rows_of(rows)
    if not rows:
        raise ValueError("rows is empty: there is nothing to measure")
    from_marker = 0
    refused_tasks: set[str] = set()
    tasks = task_table(rows, with_markers=False)
    hits = np.zeros(len(rows))
    for i, row in enumerate(rows):
        value = (row.get("markers") or {}).get(marker)
        if value is not None:
            if not _is_flag(value):
                raise ValueError(
                    f"row {i}: markers[{marker!r}] is {value!r}; a refusal marker is a flag "
                    "(bool or 0/1)"
                )
            from_marker += 1
            hit = bool(value)
        else:
            hit = detect_refusal(row["final_text"])
        hits[i] = hit
        if hit:
            refused_tasks.add(tasks.keys[int(tasks.row_task[i])])
    n = len(rows)
    detected = n - from_marker
    source = "marker" if detected == 0 else "detected" if from_marker == 0 else "mixed"
    notes = []
    if detected:
        notes.append(
            f"{counted(detected, 'row')} {agreeing(detected, 'carries', 'carry')} no "
            f"markers[{marker!r}]: refusal detected by a simple rule "
            "on final_text (opens with an apology or 'I can't / won't / am unable'); see "
            "whileai.measure.summaries.REFUSAL_RULE"
        )
    repeats = int((tasks.n_rows > 1).sum())
    if repeats:
        notes.append(_repeats_note(repeats, tasks.clusters is not None))
    per_task = np.bincount(tasks.row_task, weights=hits, minlength=tasks.n_tasks)
    return RefusalReport(
        refusals=Rate.over_tasks(per_task, tasks.n_rows, tasks.clusters, confidence),
        from_marker=from_marker,
        detected=detected,
        source=source,
        per_task_any=len(refused_tasks),
        n_tasks=tasks.n_tasks,
        notes=notes,
    )


@attrs.frozen(repr=False)
class JudgeTrustReport(Report):
    """How far the judge's labels on these rows can be trusted.

    - ``errors``: rows the judge failed on (``judge_status`` error) or skipped, of the rows it
      was asked about; ``n_unjudged``: rows with no reward that no judge was asked about.
    - ``disagreement`` and ``pass_when_gold_fail``: against ``gold_reward`` where rows carry it
      (None otherwise), Wilson intervals, with the 50-row floor.
    - ``passed_while_flagged``: per flag marker, the share of rows where the flag fired that
      the judge still passed: a judge that passes a refusal or a failed tool call is lenient
      exactly where a training run would learn the failure.
    - ``self_judged``: rows whose judge model is the model that wrote them.
    """

    title = "judge_trust"

    n_rows: int
    judges: list[str]
    errors: Rate
    n_unjudged: int
    disagreement: Rate | None
    pass_when_gold_fail: Rate | None
    n_gold: int
    floor_met: bool
    passed_while_flagged: dict[str, Rate]
    self_judged: int
    notes: list[str]

    def _lines(self) -> list[str]:
        body: list[tuple[str, str, str, str]] = [("judge errors/skips", *self.errors.cells())]
        if self.disagreement is not None:
            body.append(("disagreement with gold", *self.disagreement.cells()))
        if self.pass_when_gold_fail is not None:
            body.append(("pass_when_gold_fail", *self.pass_when_gold_fail.cells()))
        for name, rate in self.passed_while_flagged.items():
            body.append((f"passed while {name} fired", *rate.cells()))
        lines = [f"  judge: {', '.join(self.judges) or 'unnamed'}; {counted(self.n_rows, 'row')}"]
        lines.extend(table(("", "count", "share", "95% Wilson"), body))
        return lines


def judge_trust(
    rows: Any, *, threshold: float = 0.5, field: str = "gold_reward", confidence: float = 0.95
) -> JudgeTrustReport:
    """What a reader needs before believing the judge's rewards on ``rows``: its failure rate,
    its error against gold labels when rows carry them (``field``), how often it passed rows a
    flag marker says went wrong, and whether it judged its own model. Rates carry Wilson
    intervals; a reward at or above ``threshold`` is a pass."""
    rows = rows_of(rows)
    if not rows:
        raise ValueError("rows is empty: there is nothing to measure")
    judges: set[str] = set()
    failed = 0
    never = 0  # no reward and no judge status: never sent to a judge
    self_judged = 0
    pairs: list[Pair] = []
    # per task: the judge's failures among the rows sent to it; per flag marker, the rows it
    # fired on that the judge passed (``flag:<name>``)
    tallies = TaskTallies()
    rows_of_task: Counter[str] = Counter()
    non_flag: set[str] = set()
    for i, row in enumerate(rows):
        check_row(row, i)
        task = task_key(row, i)
        situation = situation_key(row)
        rows_of_task[task] += 1
        found = row.get("judge_meta")
        meta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        # The version names model and prompt (<model>@<prompt sha>): a rubric edit shows.
        name = meta.get("version") or row.get("judge_name") or meta.get("model")
        if name:
            judges.add(str(name))
        if judged_by_its_own_model(row):
            self_judged += 1
        judged = _reward_of(row)
        if row.get("judge_status") in ("error", "skipped"):
            failed += 1
            tallies.add("errors", task, True, situation)
        elif judged is None:
            never += 1
        else:
            tallies.add("errors", task, False, situation)
        gold = row.get(field)
        check_reward(gold, field, i)
        if gold is not None and judged is not None:
            pairs.append((task, situation, judged, float(gold)))
        for marker, value in (row.get("markers") or {}).items():
            if value is not None and not _is_flag(value):
                non_flag.add(marker)
            if judged is None or value is None or not value:
                continue
            tallies.add(f"flag:{marker}", task, judged >= threshold, situation)
    notes = []
    disagreement = pass_fail = None
    floor_met = False
    if pairs:
        agreement = _agreement(pairs, field, threshold, {}, confidence)
        agreed = agreement.agreement
        # the agreement's complement, its interval mirrored (Wilson's is symmetric in p, 1 - p)
        disagreement = Rate(
            agreement.n_gold - agreed.count,
            agreement.n_gold,
            1 - float(agreed),
            None if agreed.ci95 is None else (1 - agreed.ci95[1], 1 - agreed.ci95[0]),
        )
        pass_fail = agreement.pass_when_gold_fail
        floor_met = agreement.floor_met
        if not floor_met:
            notes.append(
                f"floor not met: {counted(len(pairs), 'row')} "
                f"{agreeing(len(pairs), 'carries', 'carry')} {field}, {GOLD_FLOOR} is the floor"
            )
    else:
        notes.append(
            f"no row carries {field}: the judge's accuracy is unmeasured; hand-label at least "
            f"{GOLD_FLOOR} rows into {field} and call judge_agreement"
        )
    if never:
        notes.append(
            f"{counted(never, 'row')} {agreeing(never, 'carries', 'carry')} no reward: never "
            "judged, left out of every rate"
        )
    if len(judges) > 1:
        notes.append(
            f"{len(judges)} judge versions on these rows (a rubric edit is a new judge): "
            + ", ".join(sorted(judges))
        )
    if self_judged:
        notes.append(
            f"{counted(self_judged, 'row')} {agreeing(self_judged, 'was', 'were')} judged by the "
            f"model that wrote {agreeing(self_judged, 'it', 'them')} (self_judged): a judge "
            "prefers its own model's writing"
        )
    flags = [
        name.removeprefix("flag:")
        for name in tallies.names()
        if name.startswith("flag:") and name.removeprefix("flag:") not in non_flag
    ]
    repeats = sum(n > 1 for n in rows_of_task.values())
    if repeats:
        notes.append(_repeats_note(repeats, tallies.clustered()))
    return JudgeTrustReport(
        n_rows=len(rows),
        judges=sorted(judges),
        errors=tallies.rate("errors", confidence),
        n_unjudged=never,
        disagreement=disagreement,
        pass_when_gold_fail=pass_fail,
        n_gold=len(pairs),
        floor_met=floor_met,
        passed_while_flagged={name: tallies.rate(f"flag:{name}", confidence) for name in flags},
        self_judged=self_judged,
        notes=notes,
    )


__all__ = [
    "REFUSAL_RULE",
    "JudgeTrustReport",
    "MarkerSummaryReport",
    "MetricLine",
    "MetricSummaryReport",
    "RefusalReport",
    "TraceFlagReport",
    "detect_refusal",
    "judge_trust",
    "marker_summary",
    "metric_summary",
    "refusal_report",
    "trace_flag_report",
]
