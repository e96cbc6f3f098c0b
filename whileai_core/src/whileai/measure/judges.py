"""How far to trust a judge: its labels against gold labels.

A judge is a reward model, so its accuracy rides with every label it writes. Hand-label a
sample into ``gold_reward`` (or pass a second scoring run as ``gold=``) and ``judge_agreement``
gives agreement, Cohen's kappa, the confusion counts and ``pass_when_gold_fail``: the gold
failures the judge passed. Those are the rows a training run learns the failure from, so that
rate matters more than the headline agreement.

Labels are compared as pass / fail: a reward at or above ``threshold`` (0.5) is a pass, so a
partial score is read as the side of the line it falls on, and the report counts how many were.
Rates carry Wilson intervals at the gold rows' effective count over tasks
(:meth:`Rate.over_tasks`): a judge wrong on a hard task is wrong on its every repeat, so a
task's rows count as fewer independent ones; one row a task, the rows themselves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from whileai.measure._tasks import situation_clusters
from whileai.measure.intervals import effective_attempts
from whileai.measure.proportions import cohen_kappa, effective_wilson_interval, wilson_interval
from whileai.schema.records import RowError, check_reward, check_row, situation_key, task_key
from whileai.schema.report import Report, fmt, fmt_ci, table
from whileai.schema.source import rows_of
from whileai.schema.wording import agreeing, counted

#: Fewer gold rows than this and the agreement figures describe the sample, not the judge.
GOLD_FLOOR = 50
_UNJUDGED_STATUS = frozenset({"error", "skipped"})

Interval = tuple[float, float]


@attrs.frozen(repr=False)
class Rate(Report):
    """``count`` of ``n`` with its share and Wilson interval (None when ``n`` is 0)."""

    title = "rate"

    count: int
    n: int
    share: float | None
    ci95: Interval | None

    @classmethod
    def of(cls, count: int, n: int, confidence: float = 0.95) -> Rate:
        if n == 0:
            return cls(count, n, None, None)
        return cls(count, n, count / n, wilson_interval(count, n, confidence))

    @classmethod
    def over_tasks(
        cls,
        counts: npt.ArrayLike,
        ns: npt.ArrayLike,
        clusters: npt.ArrayLike | None = None,
        confidence: float = 0.95,
    ) -> Rate:
        """The share of rows, ``counts[i]`` of task ``i``'s ``ns[i]``, its Wilson interval at
        the count of independent rows they are worth: a task's repeats are correlated (one
        task keeps failing the same way), so rows clustered in tasks (situations, with
        ``clusters``) count as fewer, by their design effect (Kish 1965), as pass@1's
        attempts do. One row a task, the rows themselves."""
        c = np.asarray(counts, dtype=np.float64)
        m = np.asarray(ns, dtype=np.float64)
        count, n = int(c.sum()), int(m.sum())
        if n == 0:
            return cls(count, n, None, None)
        has = m > 0
        groups = None if clusters is None else np.asarray(clusters)[has]
        _, effective = effective_attempts(m[has], c[has], groups, confidence)
        return cls(count, n, count / n, effective_wilson_interval(count / n, effective, confidence))

    def __float__(self) -> float:
        """The share, so a rate reads as the number it reports (``float(report.agreement)``)."""
        if self.share is None:
            raise ValueError(f"a rate of {self.count} in {self.n} has no share")
        return float(self.share)

    def cells(self) -> tuple[str, str, str]:
        return (f"{self.count}/{self.n}", fmt(self.share), fmt_ci(self.ci95))

    def _lines(self) -> list[str]:
        count, share, ci = self.cells()
        return [f"  {count} = {share}, 95% Wilson {ci}"]


@attrs.frozen(repr=False)
class Confusion(Report):
    """Judge against gold, as pass / fail counts."""

    title = "confusion"

    judge_pass_gold_pass: int
    judge_pass_gold_fail: int
    judge_fail_gold_pass: int
    judge_fail_gold_fail: int

    def _lines(self) -> list[str]:
        (pp, pf), (fp, ff) = self.as_table()
        return table(
            ("", "gold pass", "gold fail"), [("judge pass", pp, pf), ("judge fail", fp, ff)]
        )

    def as_table(self) -> list[list[int]]:
        """Rows: judge pass, judge fail; columns: gold pass, gold fail."""
        return [
            [self.judge_pass_gold_pass, self.judge_pass_gold_fail],
            [self.judge_fail_gold_pass, self.judge_fail_gold_fail],
        ]


@attrs.frozen(repr=False)
class JudgeAgreementReport(Report):
    """The judge's labels against gold ones."""

    title = "judge_agreement"

    n_gold: int
    floor: int
    floor_met: bool
    gold_source: str
    threshold: float
    agreement: Rate
    kappa: float | None
    pass_when_gold_fail: Rate
    fail_when_gold_pass: Rate
    confusion: Confusion
    n_partial: int
    skipped: dict[str, int]
    notes: list[str]

    def _lines(self) -> list[str]:
        lines = [
            f"  {counted(self.n_gold, 'row')} with gold ({self.gold_source}); pass = reward >= "
            f"{fmt(self.threshold, 2)}"
        ]
        lines.extend(
            table(
                ("", "count", "share", "95% Wilson"),
                [
                    ("agreement", *self.agreement.cells()),
                    ("pass_when_gold_fail", *self.pass_when_gold_fail.cells()),
                    ("fail_when_gold_pass", *self.fail_when_gold_pass.cells()),
                ],
            )
        )
        lines.append(f"  Cohen's kappa {fmt(self.kappa)} (point estimate)")
        lines.extend(self.confusion._lines())
        return lines


def _reward_of(row: Mapping[str, Any]) -> float | None:
    """The judge's reward, or None when the judge did not judge (no reward, error, skipped)."""
    if row.get("judge_status") in _UNJUDGED_STATUS:
        return None
    value = row.get("reward")
    return None if value is None else float(value)


class TaskTallies:
    """Counts of rows per task for named rates, each read as :meth:`Rate.over_tasks`: a
    measurement that walks rows once adds each row's part (``add``), then asks for the rates.
    Tasks that are phrasings of one situation are one unit of the interval, as they are for
    pass@1 (a judge wrong on a situation is wrong on its every phrasing)."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        #: each task's situation (:func:`~whileai.schema.records.situation_key`), by index
        self._situations: list[str | None] = []
        self._rows: dict[str, dict[int, list[int]]] = {}

    def add(self, rate: str, task: str, counted: bool, situation: str | None = None) -> None:
        """One row of ``task`` (a phrasing of ``situation``, when it names one) in ``rate``'s
        denominator, in its count when ``counted``. A task keeps the situation its first row
        named."""
        t = self._index.get(task)
        if t is None:
            t = self._index[task] = len(self._index)
            self._situations.append(situation)
        cell = self._rows.setdefault(rate, {}).setdefault(t, [0, 0])
        cell[0] += 1
        cell[1] += counted

    def rate(self, rate: str, confidence: float = 0.95) -> Rate:
        cells = self._rows.get(rate, {})
        tasks = sorted(cells)
        ns = np.asarray([cells[t][0] for t in tasks], dtype=np.float64)
        cs = np.asarray([cells[t][1] for t in tasks], dtype=np.float64)
        clusters = situation_clusters([self._situations[t] for t in tasks])
        return Rate.over_tasks(cs, ns, clusters, confidence)

    def names(self) -> list[str]:
        return sorted(self._rows)

    def clustered(self) -> bool:
        """Whether some situation holds more than one task: the rates' units are then
        situations."""
        return situation_clusters(self._situations) is not None


#: (task key, its situation or None, the judge's reward, the gold reward)
Pair = tuple[str, str | None, float, float]


def _pairs_from_gold_field(
    rows: Sequence[Mapping[str, Any]], field: str, skipped: dict[str, int]
) -> list[Pair]:
    pairs = []
    for i, row in enumerate(rows):
        check_row(row, i)
        gold = row.get(field)
        check_reward(gold, field, i)
        judged = _reward_of(row)
        if gold is None:
            skipped[f"no {field}"] = skipped.get(f"no {field}", 0) + 1
        elif judged is None:
            skipped["not judged"] = skipped.get("not judged", 0) + 1
        else:
            pairs.append((task_key(row, i), situation_key(row), judged, float(gold)))
    return pairs


def _positions(rows: Sequence[Mapping[str, Any]], what: str) -> dict[tuple[str, int], int]:
    """(task key, position among the task's rows) -> row index."""
    seen: dict[str, int] = {}
    out = {}
    for i, row in enumerate(rows):
        try:
            check_row(row, i)
            key = task_key(row, i)
        except RowError as exc:
            raise RowError(f"{what}: {exc}") from None
        position = seen.get(key, 0)
        seen[key] = position + 1
        out[(key, position)] = i
    return out


def _pairs_from_gold_run(
    rows: Sequence[Mapping[str, Any]],
    gold: Sequence[Mapping[str, Any]],
    skipped: dict[str, int],
) -> list[Pair]:
    mine = _positions(rows, "rows")
    theirs = _positions(gold, "gold")
    pairs = []
    for place, i in mine.items():
        j = theirs.get(place)
        if j is None:
            skipped["no gold row at its task and position"] = (
                skipped.get("no gold row at its task and position", 0) + 1
            )
            continue
        judged, reference = _reward_of(rows[i]), _reward_of(gold[j])
        if judged is None:
            skipped["not judged"] = skipped.get("not judged", 0) + 1
        elif reference is None:
            skipped["gold row not judged"] = skipped.get("gold row not judged", 0) + 1
        else:
            pairs.append((place[0], situation_key(rows[i]), judged, reference))
    extra = len(set(theirs) - set(mine))
    if extra:
        skipped["gold rows with no row to pair"] = extra
    return pairs


def judge_agreement(
    rows: Any,
    gold: Any = None,
    *,
    threshold: float = 0.5,
    field: str = "gold_reward",
    confidence: float = 0.95,
) -> JudgeAgreementReport:
    """Agreement of the judge's ``reward`` with gold labels.

    Gold is each row's ``gold_reward`` (``field=``), or, given ``gold=``, a second scoring run's
    rewards, paired row by row on (task key, position among that task's rows).
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ValueError(f"threshold must be a number in (0, 1], got {threshold!r}")
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must lie in (0, 1], got {threshold!r}")
    rows = rows_of(rows)
    skipped: dict[str, int] = {}
    if gold is None:
        pairs = _pairs_from_gold_field(rows, field, skipped)
        source = field
    else:
        pairs = _pairs_from_gold_run(rows, rows_of(gold, "gold"), skipped)
        source = "a second scoring run, paired by task and position"
    return _agreement(pairs, source, threshold, skipped, confidence)


def _agreement(
    pairs: list[Pair],
    source: str,
    threshold: float,
    skipped: dict[str, int],
    confidence: float,
) -> JudgeAgreementReport:
    counts = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    # the rates per task: a task's rows are correlated (a judge wrong on a hard task is wrong
    # on its every repeat), so their intervals are over tasks
    tallies = TaskTallies()
    n_partial = 0
    for key, situation, judged, reference in pairs:
        passed, gold_passed = judged >= threshold, reference >= threshold
        counts[(passed, gold_passed)] += 1
        tallies.add("agreement", key, passed == gold_passed, situation)
        tallies.add(
            "fail_when_gold_pass" if gold_passed else "pass_when_gold_fail",
            key,
            passed != gold_passed,
            situation,
        )
        n_partial += (0 < judged < 1) or (0 < reference < 1)
    confusion = Confusion(
        counts[(True, True)], counts[(True, False)], counts[(False, True)], counts[(False, False)]
    )
    n = len(pairs)
    gold_fail = confusion.judge_pass_gold_fail + confusion.judge_fail_gold_fail
    kappa = cohen_kappa(confusion.as_table()) if n else math.nan
    notes = []
    floor_met = n >= GOLD_FLOOR
    if not floor_met:
        notes.append(
            f"floor not met: {n} gold rows, {GOLD_FLOOR} is the floor; these figures describe "
            "the sample more than the judge"
        )
    if n and gold_fail == 0:
        notes.append("no gold failures: pass_when_gold_fail cannot be measured on this sample")
    if math.isnan(kappa):
        notes.append("kappa undefined: judge and gold each gave a single label throughout")
    if n_partial:
        notes.append(
            f"{counted(n_partial, 'pair')} {agreeing(n_partial, 'carries', 'carry')} a partial "
            f"score, read as pass at >= {fmt(threshold, 2)}"
        )
    for reason, count in skipped.items():
        notes.append(f"{counted(count, 'row')} skipped: {reason}")
    return JudgeAgreementReport(
        n_gold=n,
        floor=GOLD_FLOOR,
        floor_met=floor_met,
        gold_source=source,
        threshold=float(threshold),
        agreement=tallies.rate("agreement", confidence),
        kappa=None if math.isnan(kappa) else kappa,
        pass_when_gold_fail=tallies.rate("pass_when_gold_fail", confidence),
        fail_when_gold_pass=tallies.rate("fail_when_gold_pass", confidence),
        confusion=confusion,
        n_partial=n_partial,
        skipped=skipped,
        notes=notes,
    )
