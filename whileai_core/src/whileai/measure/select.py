"""Pick the groups that carry gradient for a grouped RL update.

``select(rows, mode="rl", band=(0.2, 0.8))`` keeps whole groups (rows sharing a task key) whose
pass rate lies in the band (Lambert 2025, rlhfbook.com chapter Reasoning; DAPO,
arXiv:2503.14476): a group that all passes or all fails has no advantage to learn from. Rows go
through the gates in order, and the report counts what each gate dropped, so a set whose rows all
vanish says why:

1. hack suspected: with ``hacks="drop"``, rows whose grader flagged a suspected reward hack
   (``judge_meta["hack_suspected"]``). By default (``"keep"``) they stay: such a row is a
   failure, and a policy trained on the group should learn that the hack scores 0; drop them
   when a flag may mark a false failure you would rather not train on. Either way the report
   counts the flagged rows it kept.
2. non-binary reward: partial scores and unjudged rows (the band is over pass / fail); a note
   counts the unjudged ones, since a policy that learns to make its grader fail would escape
   its failures through this gate
3. empty or cut-off reply: ``final_text`` blank, or ``truncated`` true (cut at the token cap)
4. unanimous group: every remaining row of the task passes, or every one fails
5. outside band: the group's pass rate (over its remaining rows) is below or above the band
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from whileai.measure._tasks import HackFlags, RowCounts, task_table
from whileai.schema.report import Report, table
from whileai.schema.source import kept_rows, rows_of
from whileai.schema.wording import agreeing, counted

MODES = ("rl",)
HACK_POLICIES = ("keep", "drop")
GATES = (
    "hack suspected",
    "non-binary reward",
    "empty or cut-off reply",
    "unanimous group",
    "outside band",
)


@attrs.define(kw_only=True, repr=False)
class SelectReport(Report):
    """The kept rows (``.rows``), and for every gate the rows and groups it dropped."""

    title = "select"

    #: a list; rows read from a file stay there (a sequence over their lines)
    rows: Sequence[Mapping[str, Any]]
    mode: str
    band: tuple[float, float]
    n_rows_in: int
    n_rows_kept: int
    n_groups_in: int
    n_groups_kept: int
    #: gate -> rows it dropped
    dropped_rows: dict[str, int]
    #: gate -> groups it removed entirely (a group the row gates emptied counts there)
    dropped_groups: dict[str, int]
    #: kept rows whose grader flagged a suspected reward hack (all failures)
    n_hack_suspected_kept: int = 0
    counts: RowCounts
    notes: list[str] = attrs.field(factory=list)

    def _lines(self) -> list[str]:
        low, high = self.band
        body = [[gate, self.dropped_rows[gate], self.dropped_groups[gate]] for gate in GATES]
        body.append(["kept", self.n_rows_kept, self.n_groups_kept])
        return [
            f"  mode={self.mode}, band=[{low:g}, {high:g}]: {self.n_rows_kept} of "
            f"{counted(self.n_rows_in, 'row')} kept, {self.n_groups_kept} of "
            f"{counted(self.n_groups_in, 'group')}",
            *table(["gate", "rows dropped", "groups dropped"], body),
        ]


def _check_band(band: Any) -> tuple[float, float]:
    try:
        low, high = band
    except (TypeError, ValueError):
        raise ValueError(f"band must be a pair (low, high) of pass rates, got {band!r}") from None
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
            raise ValueError(f"band {name} must be a number, got {value!r}")
        if not 0 <= value <= 1:
            raise ValueError(f"band {name} must lie in [0, 1] (a pass rate), got {value!r}")
    if low > high:
        raise ValueError(f"band must be (low, high) with low <= high, got {band!r}")
    return float(low), float(high)


def select(
    rows: Iterable[Any] | Any,
    mode: str = "rl",
    band: tuple[float, float] = (0.2, 0.8),
    hacks: str = "keep",
) -> SelectReport:
    """Keep whole groups whose pass rate lies in ``band`` (inclusive); the report names every
    gate that dropped rows and holds the kept rows in ``.rows``, in their original order.
    ``hacks="drop"`` first removes rows flagged ``hack_suspected`` (see the module doc)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
    if hacks not in HACK_POLICIES:
        raise ValueError(
            f"hacks must be one of {', '.join(map(repr, HACK_POLICIES))}, got {hacks!r}"
        )
    low, high = _check_band(band)
    source = rows_of(rows)
    # the flags are read in the table's walk: one walk of the rows
    hacks_seen = HackFlags()
    t = task_table(hacks_seen.passing(source), with_markers=False, with_cut=True)
    reward = t.row_reward
    cut = t.row_cut
    assert cut is not None
    task = t.row_task
    flagged = hacks_seen.as_array()
    dropped_hack = flagged if hacks == "drop" else np.zeros_like(flagged)
    binary = ~np.isnan(reward) & ((reward == 0.0) | (reward == 1.0)) & ~dropped_hack
    usable = binary & ~cut
    n_tasks = t.n_tasks
    size = np.bincount(task[usable], minlength=n_tasks)
    passes = np.bincount(task[usable & (reward == 1.0)], minlength=n_tasks)
    rate = np.divide(passes, size, out=np.zeros(n_tasks), where=size > 0)
    emptied = size == 0
    unanimous = ~emptied & ((passes == 0) | (passes == size))
    outside = ~emptied & ~unanimous & ((rate < low) | (rate > high))
    keep_group = ~emptied & ~unanimous & ~outside
    keep_row = usable & keep_group[task]

    non_binary_rows = int((~binary & ~dropped_hack).sum())
    cut_rows = int((binary & cut).sum())
    dropped_rows = {
        GATES[0]: int(dropped_hack.sum()),
        GATES[1]: non_binary_rows,
        GATES[2]: cut_rows,
        GATES[3]: int((usable & unanimous[task]).sum()),
        GATES[4]: int((usable & outside[task]).sum()),
    }
    # A group the row gates emptied is charged to the gate that took its last rows.
    had_any = np.bincount(task[~dropped_hack], minlength=n_tasks) > 0
    had_binary = np.bincount(task[binary], minlength=n_tasks) > 0
    dropped_groups = {
        GATES[0]: int((emptied & ~had_any).sum()),
        GATES[1]: int((emptied & had_any & ~had_binary).sum()),
        GATES[2]: int((emptied & had_binary).sum()),
        GATES[3]: int(unanimous.sum()),
        GATES[4]: int(outside.sum()),
    }
    kept = kept_rows(source, np.flatnonzero(keep_row).tolist())
    notes: list[str] = []
    if not kept:
        worst = max(GATES, key=lambda g: dropped_rows[g])
        notes.append(
            f"no row survived: the '{worst}' gate dropped the most ({dropped_rows[worst]} of "
            f"{counted(t.counts.rows, 'row')})" + _advice(worst)
        )
    kept_flagged = int((flagged & keep_row).sum())
    if kept_flagged:
        notes.append(
            f"{kept_flagged} kept rows failed with hack_suspected (the grader's reason is in "
            "judge_meta): they stay as failures; hacks='drop' leaves them out"
        )
    unjudged = int((np.isnan(reward) & ~dropped_hack).sum())
    if unjudged:
        notes.append(
            f"{unjudged} of the non-binary rows are unjudged (their grader failed): left out of "
            "their groups, so a completion that makes its grader fail escapes the failure a "
            "wrong answer earns; read their reasons, and where the completion causes the "
            "failure (a math-verify timeout), grade with on_timeout='fail'"
        )
    singles = int((size == 1).sum())
    if singles:
        notes.append(
            f"{counted(singles, 'group')} {agreeing(singles, 'has', 'have')} one usable row: "
            "unanimous by construction; select needs "
            "several completions per prompt (repeats)"
        )
    return SelectReport(
        rows=kept,
        mode=mode,
        band=(low, high),
        n_rows_in=t.counts.rows,
        n_rows_kept=len(kept),
        n_groups_in=n_tasks,
        n_groups_kept=int(keep_group.sum()),
        dropped_rows=dropped_rows,
        dropped_groups=dropped_groups,
        n_hack_suspected_kept=kept_flagged,
        counts=t.counts,
        notes=notes,
    )


def _advice(gate: str) -> str:
    return {
        GATES[0]: "; the grader flagged them as suspected reward hacks (hacks='keep' keeps them "
        "as failures)",
        GATES[1]: "; select bands on rewards of exactly 0 or 1 (grade with a verifier, or "
        "threshold partial scores yourself)",
        GATES[2]: "; replies were blank or cut at the token cap (raise max_tokens)",
        GATES[3]: "; every group all-passed or all-failed: the set is too easy or too hard for "
        "this model, or has too few repeats",
        GATES[4]: "; widen band= or add repeats",
    }[gate]
