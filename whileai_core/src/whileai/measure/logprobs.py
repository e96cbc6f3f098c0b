"""Logprobs on the rows: how much was captured, whether reward tracks the policy's confidence,
the sampled KL to a reference model, and which rows came from an older policy.

``simulate(logprobs=True)`` records on every agent turn the summed log-probability of the
tokens the policy generated and how many there were (``step["logprob"]``,
``step["n_tokens"]``), with totals on the row. A row's figures are its own totals when it has
them, else the sum over its agent steps (``role == "assistant"``) when every one of them carries
both. A trainer needs them to form the importance ratio ``exp(new_logprob - logprob)``; without
them an update on the rows is off-policy and nothing says so (Lambert, rlhfbook.com, ch. 6).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from whileai.measure._tasks import situation_clusters
from whileai.measure.intervals import (
    SMALL_SAMPLE,
    skew_corrected_t_interval,
    small_sample_note,
    unit_count,
)
from whileai.measure.stats import DEFAULT_RESAMPLES, MIN_TASKS_FOR_INTERVAL, t_quantile
from whileai.schema.records import RowError, check_row, situation_key, task_key
from whileai.schema.report import Report, fmt, fmt_ci, table
from whileai.schema.source import rows_of
from whileai.schema.wording import agreeing, counted

Interval = tuple[float, float]
FloatArray = npt.NDArray[np.float64]


def _number(value: Any, index: int, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RowError(f"row {index}: {field} must be a finite number, got {value!r}")
    return float(value)


def _logprob(value: Any, index: int, field: str) -> float:
    number = _number(value, index, field)
    if number > 1e-6:  # a sum of log-probabilities is never positive
        raise RowError(f"row {index}: {field} is {number!r}; a summed log-probability is <= 0")
    return number


def _count(value: Any, index: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RowError(f"row {index}: {field} must be a whole number >= 1, got {value!r}")
    return value


def _agent_steps(row: Mapping[str, Any], index: int) -> list[Mapping[str, Any]]:
    steps = row.get("steps") or []
    if not isinstance(steps, Sequence) or isinstance(steps, str):
        raise RowError(f"row {index}: steps must be a list of turns")
    out = []
    for j, step in enumerate(steps):
        if not isinstance(step, Mapping):
            raise RowError(f"row {index}: steps[{j}] is a {type(step).__name__}, not a mapping")
        if step.get("role") == "assistant":
            out.append(step)
    return out


def row_logprob(row: Mapping[str, Any], index: int, field: str = "logprob") -> float | None:
    """The row's summed ``field`` over its generated tokens: its total, else the sum over its
    agent steps when every one carries it; None when it is not there."""
    if row.get(field) is not None:
        return _logprob(row[field], index, field)
    steps = _agent_steps(row, index)
    if steps and all(s.get(field) is not None for s in steps):
        return sum(_logprob(s[field], index, f"steps[].{field}") for s in steps)
    return None


def row_tokens(row: Mapping[str, Any], index: int) -> int | None:
    """The row's generated token count: ``n_tokens``, else the sum over its agent steps."""
    if row.get("n_tokens") is not None:
        return _count(row["n_tokens"], index, "n_tokens")
    steps = _agent_steps(row, index)
    if steps and all(s.get("n_tokens") is not None for s in steps):
        return sum(_count(s["n_tokens"], index, "steps[].n_tokens") for s in steps)
    return None


def _task_index(keys: list[str]) -> tuple[list[str], npt.NDArray[np.int64]]:
    order: dict[str, int] = {}
    owner = [order.setdefault(k, len(order)) for k in keys]
    return list(order), np.asarray(owner, dtype=np.int64)


def _pearson(sums: FloatArray) -> FloatArray:
    """Pearson's r from rows of (n, Σx, Σy, Σx², Σy², Σxy)."""
    n, sx, sy, sxx, syy, sxy = sums.T
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((sxy - sx * sy / n) / np.sqrt((sxx - sx * sx / n) * (syy - sy * sy / n)))


def task_correlation_ci(
    x: FloatArray,
    y: FloatArray,
    task: npt.NDArray[np.int64],
    n_tasks: int,
    confidence: float = 0.95,
) -> Interval | None:
    """Interval for Pearson's r over rows whose tasks cluster them: Fisher's z = atanh(r), its
    standard error from a jackknife that leaves out one task at a time (so a task's correlated
    rows count once), and a t quantile on n_tasks - 1 degrees of freedom, mapped back by tanh.

    Each leave-one-task-out r comes from the per-task sums, so the whole jackknife is one
    subtraction. None when r or a leave-one-out r is undefined or ±1.
    """
    sums = np.zeros((n_tasks, 6))
    for column, values in enumerate((np.ones_like(x), x, y, x * x, y * y, x * y)):
        sums[:, column] = np.bincount(task, weights=values, minlength=n_tasks)
    total = sums.sum(axis=0)
    r = float(_pearson(total[None, :])[0])
    left_out = _pearson(total[None, :] - sums)
    if not np.isfinite(r) or abs(r) >= 1 or not np.isfinite(left_out).all():
        return None
    if (np.abs(left_out) >= 1).any():
        return None
    z_out = np.arctanh(left_out)
    se = math.sqrt((n_tasks - 1) / n_tasks * float(((z_out - z_out.mean()) ** 2).sum()))
    half = t_quantile(n_tasks - 1, confidence) * se
    z = math.atanh(r)
    return (math.tanh(z - half), math.tanh(z + half))


@attrs.frozen(repr=False)
class LogprobReport(Report):
    """How much of the policy's logprobs the rows captured, and whether reward tracks them."""

    title = "logprob_report"

    n_rows: int
    n_turns: int
    n_turns_captured: int
    captured_share: float | None
    n_rows_with_logprob: int
    n_truncated_turns: int
    mean_logprob_per_token: float | None
    n_rows_correlated: int
    reward_correlation: float | None
    reward_correlation_ci95: Interval | None
    tracks_confidence: bool | None
    notes: list[str]

    def _lines(self) -> list[str]:
        return table(
            ("", "value", "detail"),
            [
                (
                    "agent turns with logprobs",
                    fmt(self.captured_share),
                    f"{self.n_turns_captured}/{self.n_turns}",
                ),
                ("rows with logprob", self.n_rows_with_logprob, f"of {self.n_rows}"),
                ("mean logprob per token", fmt(self.mean_logprob_per_token), ""),
                (
                    "corr(reward, logprob/token)",
                    fmt(self.reward_correlation),
                    f"{fmt_ci(self.reward_correlation_ci95)} over tasks, "
                    f"{counted(self.n_rows_correlated, 'row')}",
                ),
                ("turns cut at the token cap", self.n_truncated_turns, ""),
            ],
        )


def logprob_report(rows: Any, *, confidence: float = 0.95) -> LogprobReport:
    """Share of agent turns (steps with role "assistant"; a row without steps is one turn) that
    carry a logprob, and Pearson's r between each judged row's mean logprob per token and its
    reward, with a Fisher-z interval whose standard error is a jackknife over tasks
    (:func:`task_correlation_ci`)."""
    rows = rows_of(rows)
    if not rows:
        raise ValueError("rows is empty: there is nothing to measure")
    n_turns = captured = truncated = with_logprob = 0
    xs: list[float] = []
    ys: list[float] = []
    keys: list[str] = []
    per_token: list[float] = []
    for i, row in enumerate(rows):
        check_row(row, i)
        steps = _agent_steps(row, i)
        if steps:
            n_turns += len(steps)
            # a row may keep its logprob (or its truncation) as a row total rather than per
            # step; counted either way, so this agrees with staleness_report on the same rows
            on_steps = sum(s.get("logprob") is not None for s in steps)
            captured += len(steps) if on_steps == 0 and row.get("logprob") is not None else on_steps
            cut = sum(s.get("truncated") is True for s in steps)
            truncated += 1 if cut == 0 and row.get("truncated") is True else cut
        else:
            n_turns += 1
            captured += row.get("logprob") is not None
            truncated += row.get("truncated") is True
        total, count = row_logprob(row, i), row_tokens(row, i)
        if total is None:
            continue
        with_logprob += 1
        if count is None:
            raise RowError(f"row {i}: has logprob but no n_tokens to divide it by")
        per_token.append(total / count)
        reward = row.get("reward")
        if reward is not None and row.get("judge_status") not in ("error", "skipped"):
            xs.append(total / count)
            ys.append(float(reward))
            keys.append(task_key(row, i))
    notes: list[str] = []
    r = ci = None
    tracks = None
    if len(xs) >= 3:
        x, y = np.asarray(xs), np.asarray(ys)
        if x.std() > 0 and y.std() > 0:
            r = float(np.corrcoef(x, y)[0, 1])
            names, task = _task_index(keys)
            if len(names) >= MIN_TASKS_FOR_INTERVAL:
                ci = task_correlation_ci(x, y, task, len(names), confidence)
            if ci is None:
                notes.append("correlation is a point estimate: too few tasks for an interval")
            else:
                tracks = not (ci[0] <= 0.0 <= ci[1])
                if tracks:
                    notes.append(
                        "reward tracks the policy's confidence (the interval excludes 0): on a "
                        "fair judge it should not; check whether the judge rewards fluent, "
                        "confident text rather than correct text"
                    )
        else:
            notes.append("no correlation: reward or logprob per token is constant on these rows")
    else:
        notes.append("no correlation: fewer than 3 judged rows carry logprobs")
    if with_logprob == 0:
        notes.append("no row carries logprobs: run simulate(logprobs=True) to record them")
    elif captured < n_turns:
        notes.append(
            f"{n_turns - captured} agent turns lack logprobs: an update on those rows cannot "
            "form the importance ratio"
        )
    return LogprobReport(
        n_rows=len(rows),
        n_turns=n_turns,
        n_turns_captured=captured,
        captured_share=captured / n_turns if n_turns else None,
        n_rows_with_logprob=with_logprob,
        n_truncated_turns=truncated,
        mean_logprob_per_token=float(np.mean(per_token)) if per_token else None,
        n_rows_correlated=len(xs),
        reward_correlation=r,
        reward_correlation_ci95=ci,
        tracks_confidence=tracks,
        notes=notes,
    )


def _row_kl(row: Mapping[str, Any], index: int, ref: str) -> tuple[float | None, str | None]:
    """(sampled KL per token, None) or (None, what is missing)."""
    own = row_logprob(row, index)
    if own is None:
        return None, "logprob"
    other = row_logprob(row, index, ref)
    if other is None:
        return None, ref
    count = row_tokens(row, index)
    if count is None:
        return None, "n_tokens"
    return (own - other) / count, None


@attrs.frozen(repr=False)
class MeanKLReport(Report):
    """Sampled KL(policy || reference) per generated token."""

    title = "mean_kl"

    ref: str
    mean_kl: float
    ci95: Interval | None
    token_weighted: float
    per_task: dict[str, float]
    n_tasks: int
    n_rows: int
    skipped: dict[str, int]
    notes: list[str]

    def _lines(self) -> list[str]:
        lines = table(
            ("", "value", "95% CI (tasks)"),
            [
                ("mean KL per token (tasks)", fmt(self.mean_kl, 4), fmt_ci(self.ci95, 4)),
                ("pooled over all tokens", fmt(self.token_weighted, 4), ""),
            ],
        )
        lines.append(
            f"  {counted(self.n_rows, 'row')}, {counted(self.n_tasks, 'task')}; "
            f"reference: {self.ref}"
        )
        worst = sorted(self.per_task.items(), key=lambda kv: -kv[1])[:3]
        if worst:
            lines.append("  highest per task: " + ", ".join(f"{k} {fmt(v, 4)}" for k, v in worst))
        return lines


def mean_kl(
    rows: Any,
    ref: str = "ref_logprob",
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> MeanKLReport:
    """Sampled KL per generated token, ``(logprob - ref) / n_tokens`` on each row, averaged per
    task and then across tasks, with its interval over tasks (situations, when phrasings share
    one): Student's t corrected for skewness, as a count's mean takes (KL is skewed: a few
    tasks where the policy moved far). ``n_resamples`` and ``seed`` are kept for calls that
    pass them; the interval draws nothing.

    This is the single-sample estimator of KL(policy || reference) on tokens the policy drew
    (k1 in Schulman's "Approximating KL divergence"): unbiased on average, so one row's value can
    be negative. Rows without ``logprob``, ``ref`` or ``n_tokens`` are skipped and counted.
    """
    rows = rows_of(rows)
    if not isinstance(ref, str) or not ref:
        raise ValueError(f"ref must name the row field holding the reference logprob, got {ref!r}")
    skipped: dict[str, int] = {}
    values: list[float] = []
    keys: list[str] = []
    situations: dict[str, str | None] = {}
    diff_total = 0.0
    token_total = 0
    for i, row in enumerate(rows):
        check_row(row, i)
        kl, missing = _row_kl(row, i, ref)
        if kl is None:
            reason = f"no {missing}"
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        values.append(kl)
        key = task_key(row, i)
        keys.append(key)
        if key not in situations:
            situations[key] = situation_key(row) if row.get("lineage") is not None else None
        count = row_tokens(row, i)
        assert count is not None
        diff_total += kl * count
        token_total += count
    if not values:
        detail = ", ".join(f"{counted(n, 'row')} {r}" for r, n in skipped.items()) or "no rows"
        raise ValueError(
            f"no row carries logprob, {ref} and n_tokens ({detail}): record logprobs with "
            f"simulate(logprobs=True) and score the rows under a reference model into {ref}"
        )
    names, task = _task_index(keys)
    sums = np.bincount(task, weights=np.asarray(values), minlength=len(names))
    means = sums / np.bincount(task, minlength=len(names))
    ci = None
    notes: list[str] = []
    clusters = situation_clusters([situations[name] for name in names])
    units = unit_count(len(names), clusters)
    if units >= 2:
        ci = skew_corrected_t_interval(means, clusters, confidence)
        if units < SMALL_SAMPLE:
            notes.append(small_sample_note("mean_kl", units, clustered=clusters is not None))
    else:
        noun = "situation" if clusters is not None else "task"
        notes.append(f"one {noun}: point estimate, no interval (an interval needs two or more)")
    overall = float(means.mean())
    if overall < 0:
        notes.append(
            "the mean is negative: KL is not, so either too few samples or the reference did "
            f"not score the same tokens the policy generated (check {ref})"
        )
    for reason, count in skipped.items():
        notes.append(f"{counted(count, 'row')} skipped: {reason}")
    return MeanKLReport(
        ref=ref,
        mean_kl=overall,
        ci95=ci,
        token_weighted=diff_total / token_total,
        per_task=dict(zip(names, means.tolist(), strict=True)),
        n_tasks=len(names),
        n_rows=len(values),
        skipped=skipped,
        notes=notes,
    )


def calibrate(rows: Any, ref: str = "ref_logprob") -> list[dict[str, Any]]:
    """New rows, each with ``calibration.mean_kl``: its sampled KL per generated token against
    ``ref`` (see :func:`mean_kl`). The rows given are not changed. Every row must carry
    ``logprob``, ``ref`` and ``n_tokens``; a row without them is an error naming it."""
    rows = rows_of(rows)
    if not isinstance(ref, str) or not ref:
        raise ValueError(f"ref must name the row field holding the reference logprob, got {ref!r}")
    out = []
    for i, row in enumerate(rows):
        check_row(row, i)
        kl, missing = _row_kl(row, i, ref)
        if kl is None:
            raise RowError(
                f"row {i}: no {missing}, so its KL to the reference cannot be computed "
                f"(calibrate needs logprob, {ref} and n_tokens on every row)"
            )
        calibration = row.get("calibration")
        if calibration is not None and not isinstance(calibration, Mapping):
            raise RowError(f"row {i}: calibration must be a mapping, got {calibration!r}")
        out.append({**row, "calibration": {**(calibration or {}), "mean_kl": kl}})
    return out


@attrs.frozen(repr=False)
class StalenessReport(Report):
    """Rows sampled by a policy other than ``base_model``, and which of them a trainer can
    still correct for."""

    title = "staleness_report"

    base_model: str
    n_rows: int
    n_current: int
    n_stale: int
    n_usable: int
    n_unusable: int
    n_unversioned: int
    by_version: dict[str, dict[str, int]]
    stale: list[int]
    usable: list[int]
    unusable: list[int]
    unversioned: list[int]
    notes: list[str]

    @property
    def stale_share(self) -> float:
        return (self.n_stale + self.n_unversioned) / self.n_rows if self.n_rows else 0.0

    def _lines(self) -> list[str]:
        body = [
            (
                version + (" (base)" if version == self.base_model else ""),
                counts["rows"],
                counts["usable"] if version != self.base_model else "-",
            )
            for version, counts in self.by_version.items()
        ]
        lines = [
            f"  {self.n_current} current, {self.n_stale} stale ({self.n_usable} usable, "
            f"{self.n_unusable} not), {self.n_unversioned} unversioned, of "
            f"{counted(self.n_rows, 'row')}"
        ]
        lines.extend(table(("model_version", "rows", "usable"), body))
        return lines


def staleness_report(rows: Any, base_model: str) -> StalenessReport:
    """The off-policy check (Lambert, rlhfbook.com, ch. 6). Rows whose ``model_version`` differs
    from ``base_model`` are stale; a stale row is usable when it carries its ``logprob`` and
    ``n_tokens`` (row totals or on every agent step), so the importance ratio
    ``exp(new_logprob - logprob)`` can be formed. A row with no ``model_version`` cannot be
    shown to be on-policy and is counted apart, as unversioned."""
    if not isinstance(base_model, str) or not base_model:
        raise ValueError(f"base_model must name the current policy's model, got {base_model!r}")
    rows = rows_of(rows)
    stale: list[int] = []
    usable: list[int] = []
    unusable: list[int] = []
    unversioned: list[int] = []
    by_version: dict[str, dict[str, int]] = {}
    for i, row in enumerate(rows):
        check_row(row, i)
        version = row.get("model_version")
        if version is None or version == "":
            unversioned.append(i)
            continue
        version = str(version)
        tally = by_version.setdefault(version, {"rows": 0, "usable": 0})
        tally["rows"] += 1
        if version == base_model:
            continue
        stale.append(i)
        if row_logprob(row, i) is not None and row_tokens(row, i) is not None:
            usable.append(i)
            tally["usable"] += 1
        else:
            unusable.append(i)
    notes = []
    if unusable:
        notes.append(
            f"{len(unusable)} stale rows carry no logprob / n_tokens: an update on them is "
            "off-policy with no importance ratio; drop them or re-sample"
        )
    if usable:
        notes.append(
            f"{len(usable)} stale rows are usable: score their tokens under {base_model} and "
            "weight each by exp(new_logprob - logprob)"
        )
    if unversioned:
        notes.append(
            f"{counted(len(unversioned), 'row')} {agreeing(len(unversioned), 'carries', 'carry')} "
            "no model_version: nothing shows which policy sampled "
            + agreeing(len(unversioned), "it", "them")
        )
    if base_model not in by_version:
        notes.append(f"no row was sampled by {base_model}")
    n_current = by_version.get(base_model, {"rows": 0})["rows"]
    return StalenessReport(
        base_model=base_model,
        n_rows=len(rows),
        n_current=n_current,
        n_stale=len(stale),
        n_usable=len(usable),
        n_unusable=len(unusable),
        n_unversioned=len(unversioned),
        by_version=by_version,
        stale=stale,
        usable=usable,
        unusable=unusable,
        unversioned=unversioned,
        notes=notes,
    )
