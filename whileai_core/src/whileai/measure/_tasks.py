"""Rows into per-task numpy arrays, in one linear pass.

Every measurement reads the same keys and groups under ``task_key(row)``. This module does the
one pass over the rows every call needs: it validates each row (``check_row``, so a bad row is
an error naming its index), assigns it to its task, and sorts its reward into binary (0 or 1),
partial (strictly between) or unjudged (None, or a judge that errored or skipped). Everything
after that pass is numpy over tasks.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from whileai.schema.marker_bounds import Bounds, bounds_text, unit_bounded, within
from whileai.schema.records import (
    UNJUDGED_STATUS,
    RowError,
    check_row,
    rollout_identity,
    situation_key,
    task_key,
)
from whileai.schema.report import Report

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_UNJUDGED_STATUS = UNJUDGED_STATUS


def hack_suspected(rows: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Per row: did its grader flag the verdict as a suspected reward hack
    (``judge_meta["hack_suspected"]``, which CodeExec sets with the reason)? A separate pass,
    so measurements that do not ask pay nothing for it."""
    return [_flagged(row) for row in rows]


def _flagged(row: Any) -> bool:
    meta = row.get("judge_meta") if isinstance(row, Mapping) else None
    return bool(meta.get("hack_suspected")) if isinstance(meta, Mapping) else False


class HackFlags:
    """:func:`hack_suspected` gathered a row at a time, beside a walk made for something
    else (a file's rows are parsed on every walk); a byte a row."""

    def __init__(self) -> None:
        self.flags = array("b")

    def passing(self, rows: Iterable[Any]) -> Iterator[Any]:
        """``rows`` as they are, each read here once the walk has taken it (and checked it)."""
        add = self.flags.append
        for row in rows:
            yield row
            add(_flagged(row))

    def as_array(self) -> npt.NDArray[np.bool_]:
        return np.frombuffer(self.flags, dtype=np.int8).astype(np.bool_)


@attrs.define(kw_only=True, repr=False)
class RowCounts(Report):
    """What one pass saw: how many rows, and how their rewards sorted."""

    title = "rows"

    rows: int
    binary: int
    partial: int
    unjudged: int

    def _lines(self) -> list[str]:
        return [
            f"  {self.rows} read: {self.binary} binary, {self.partial} partial, "
            f"{self.unjudged} unjudged"
        ]


@attrs.define(kw_only=True)
class TaskTable:
    """Per-task arrays from one pass over the rows; index ``i`` is task ``keys[i]``."""

    keys: list[str]
    #: every row of the task, whatever its reward
    n_rows: IntArray
    #: rows with reward exactly 0 or 1, and how many of those are 1
    n_binary: IntArray
    n_pass: IntArray
    #: rows with any reward (binary or partial) and the sum of those rewards
    n_judged: IntArray
    reward_sum: FloatArray
    #: marker name -> (rows carrying it per task, sum of its values per task)
    markers: dict[str, tuple[IntArray, FloatArray]]
    counts: RowCounts
    #: per row: its task index and its reward class (see ``task_table``); kept for ``select``
    row_task: IntArray
    row_reward: FloatArray
    #: per row, when asked for: reply empty or cut at the token cap
    row_cut: npt.NDArray[np.bool_] | None = None
    #: per task, a label of its situation when phrasings of one situation are several
    #: tasks (rows from simulate() with requests_per_situation > 1); None when every task is
    #: a situation of its own
    clusters: IntArray | None = None
    #: marker name -> the smallest and largest value a row gave it
    marker_ranges: dict[str, tuple[float, float]] = attrs.field(factory=dict)
    #: the markers some row gave a value strictly between 0 and 1 (a share, not a flag)
    fractional: frozenset[str] = frozenset()

    @property
    def n_tasks(self) -> int:
        return len(self.keys)

    def of_rows(self, positions: npt.ArrayLike) -> TaskTable:
        """The table ``task_table(with_markers=False)`` builds from the rows at ``positions``
        (ascending) alone: their tasks in the order they first appear there, each task's
        situation its first row's in the whole table (the same whenever a task's rows agree
        on their situation, as one run's rows do). A report that groups a run's rows (by arm,
        by a dimension) measures each group from the one table, without the rows."""
        at = np.asarray(positions, dtype=np.int64)
        if not len(at):
            raise ValueError("rows is empty: there is nothing to measure")
        task = self.row_task[at]
        present, first, local = np.unique(task, return_index=True, return_inverse=True)
        # number the tasks in order of first appearance, as task_table does
        order = np.argsort(first, kind="stable")
        renumber = np.empty(len(order), dtype=np.int64)
        renumber[order] = np.arange(len(order), dtype=np.int64)
        tasks = present[order].tolist()
        return _assemble(
            [self.keys[t] for t in tasks],
            renumber[local.reshape(-1)],
            self.row_reward[at],
            # the tasks' situations as the whole table's labels of them
            [None] * len(tasks)
            if self.clusters is None
            else [str(label) for label in self.clusters[present[order]].tolist()],
            {},
            None,
        )

    def clusters_of(self, has: npt.NDArray[np.bool_]) -> IntArray | None:
        """The situation labels of the tasks where ``has`` holds."""
        return None if self.clusters is None else self.clusters[has]

    def reward_means(self) -> tuple[list[str], FloatArray]:
        """Tasks with at least one judged row, and their mean reward."""
        has = self.n_judged > 0
        keys = [k for k, h in zip(self.keys, has.tolist(), strict=True) if h]
        return keys, self.reward_sum[has] / self.n_judged[has]

    def marker_bounded(self, name: str, declared: Bounds | None = None) -> bool:
        """Whether marker ``name``'s mean takes the bounded interval (a flag, a share, a
        score) rather than a count's Student's t: by the bounds its run recorded when it
        declared them, else by its rows, every value in [0, 1]. Read from the rows, not the
        task means: tool errors averaging 0.5 a task are still a count when a row had 2.
        Rows holding a value outside the declared bounds are not that run's rows as it wrote
        them: a ValueError naming the marker, since an interval cut at those bounds would be
        wrong."""
        low, high = self.marker_ranges[name]
        if declared is None:
            return low >= 0 and high <= 1
        if not (within(low, declared) and within(high, declared)):
            raise ValueError(
                f"marker {name!r}: the rows hold values from {low:g} to {high:g}, outside the "
                f"bounds its run recorded for it ({bounds_text(declared)}); were these rows "
                "edited, or written by another run than the sidecar's?"
            )
        return unit_bounded(declared)

    def marker_means(self, name: str) -> tuple[list[str], FloatArray]:
        """Tasks where marker ``name`` was measured, and its mean there."""
        count, total = self.markers[name]
        has = count > 0
        keys = [k for k, h in zip(self.keys, has.tolist(), strict=True) if h]
        return keys, total[has] / count[has]


def task_table(
    rows: Iterable[Any], *, what: str = "rows", with_markers: bool = True, with_cut: bool = False
) -> TaskTable:
    """Validate and group ``rows`` in one pass.

    Each row's reward lands in ``row_reward``: its value when judged, NaN when unjudged (no
    reward, or ``judge_status`` error / skipped). Binary means exactly 0 or 1.
    """
    index_of: dict[str, int] = {}
    keys: list[str] = []
    # typed arrays, not lists: 8 bytes a row each, where a list holds a pointer to an int or
    # float object (40 bytes or more a row; seven markers over a million rows were 0.4 GB)
    row_task = array("q")
    row_reward = array("d")
    row_cut = array("b")
    situations: list[str | None] = []
    # marker name -> (rows carrying it, the sum of its values) per task, added up in row order
    # as the rows come (np.bincount over per-row arrays, bit for bit), so a marker costs
    # memory per task rather than 16 bytes a row (seven markers over a million rows: 112 MB)
    # (and the smallest and largest value, which say whether it is a count)
    marker_sums: dict[str, tuple[array[int], array[float], list[float]]] = {}
    nan = float("nan")
    # Bound methods as locals: this loop is the only per-row Python work a measurement does.
    index = index_of.get
    add_task, add_reward = row_task.append, row_reward.append
    check, key_of, unjudged = check_row, task_key, _UNJUDGED_STATUS
    try:
        for i, row in enumerate(rows):
            # check_row is the authority on what a valid row is. The test below accepts only
            # rows check_row certainly accepts (a dict, two strings, no markers, a reward that
            # is None or an int / float in [0, 1]) and sends every other row to check_row, so
            # its errors and rules stay the only ones; the shortcut halves the cost per row.
            # tests/measure/test_rows.py checks the two agree.
            if type(row) is dict:
                reward = row.get("reward")
                if not (
                    type(row.get("prompt")) is str
                    and type(row.get("final_text")) is str
                    and row.get("markers") is None
                    and (
                        reward is None
                        or ((type(reward) is float or type(reward) is int) and 0 <= reward <= 1)
                    )
                ):
                    check(row, i)
            else:
                check(row, i)
                reward = row.get("reward")
            # The same for task_key: a non-empty string scenario_id, else task_id, is the key;
            # anything else (absent, empty, not a string) goes through task_key itself.
            key = row.get("scenario_id")
            if key is None:
                key = row.get("task_id")
            if type(key) is not str or not key:
                key = key_of(row, i)
            t = index(key)
            if t is None:
                t = index_of[key] = len(keys)
                keys.append(key)
                lineage = row.get("lineage")
                situations.append(None if lineage is None else situation_key(row))
            add_task(t)
            add_reward(nan if reward is None or row.get("judge_status") in unjudged else reward)
            if with_cut:
                row_cut.append(row.get("truncated") is True or not row["final_text"].strip())
            if with_markers:
                found = row.get("markers")
                if found:
                    for name, value in found.items():
                        if value is None:
                            continue
                        value = float(value)
                        sums = marker_sums.get(name)
                        if sums is None:
                            sums = marker_sums[name] = (
                                array("q"),
                                array("d"),
                                [value, value, 0.0],
                            )
                        count, total, seen = sums
                        if t >= len(count):
                            grow = bytes(8 * (t + 1 - len(count)))
                            count.frombytes(grow)
                            total.frombytes(grow)
                        count[t] += 1
                        total[t] += value
                        if value < seen[0]:
                            seen[0] = value
                        elif value > seen[1]:
                            seen[1] = value
                        if 0.0 < value < 1.0:
                            seen[2] = 1.0
    except RowError as exc:
        # Name the arm or run too when a call reads more than one set of rows.
        if what == "rows":
            raise
        raise RowError(f"{what}: {exc}") from None
    if not row_task:
        raise ValueError(f"{what} is empty: there is nothing to measure")
    return _assemble(
        keys,
        np.frombuffer(row_task, dtype=np.int64),
        np.frombuffer(row_reward, dtype=np.float64),
        situations,
        marker_sums,
        np.frombuffer(row_cut, dtype=np.int8).astype(np.bool_) if with_cut else None,
    )


def table_from_columns(
    keys: list[str],
    row_task: npt.ArrayLike,
    row_reward: npt.ArrayLike,
    situations: list[str | None],
) -> TaskTable:
    """The table ``task_table`` would build (``with_markers=False``) from rows already
    reduced to columns: each row's task index into ``keys`` and its reward as ``task_table``
    reads it (NaN when unjudged), and each task's situation key. The rows are the caller's
    to have checked, in the order ``task_table`` would have read them."""
    task = np.asarray(row_task, dtype=np.int64)
    if not len(task):
        raise ValueError("rows is empty: there is nothing to measure")
    return _assemble(keys, task, np.asarray(row_reward, dtype=np.float64), situations, {}, None)


def _assemble(
    keys: list[str],
    task: IntArray,
    reward: FloatArray,
    situations: list[str | None],
    marker_sums: Mapping[str, tuple[array[int], array[float], list[float]]],
    row_cut: npt.NDArray[np.bool_] | None,
) -> TaskTable:
    n_tasks = len(keys)
    judged = ~np.isnan(reward)
    binary = judged & ((reward == 0.0) | (reward == 1.0))
    markers: dict[str, tuple[IntArray, FloatArray]] = {}
    for name, (count, total, _) in marker_sums.items():
        # (a marker's arrays end at the last task that carried it)
        counts = np.zeros(n_tasks, dtype=np.int64)
        counts[: len(count)] = np.frombuffer(count, dtype=np.int64)
        totals = np.zeros(n_tasks, dtype=np.float64)
        totals[: len(total)] = np.frombuffer(total, dtype=np.float64)
        markers[name] = (counts, totals)
    n_binary = int(binary.sum())
    n_judged_rows = int(judged.sum())
    return TaskTable(
        keys=keys,
        n_rows=np.bincount(task, minlength=n_tasks).astype(np.int64),
        n_binary=np.bincount(task[binary], minlength=n_tasks).astype(np.int64),
        n_pass=np.bincount(task[binary & (reward == 1.0)], minlength=n_tasks).astype(np.int64),
        n_judged=np.bincount(task[judged], minlength=n_tasks).astype(np.int64),
        reward_sum=np.bincount(task[judged], weights=reward[judged], minlength=n_tasks).astype(
            np.float64
        ),
        markers=markers,
        counts=RowCounts(
            rows=len(task),
            binary=n_binary,
            partial=n_judged_rows - n_binary,
            unjudged=len(task) - n_judged_rows,
        ),
        row_task=task,
        row_reward=reward,
        row_cut=row_cut,
        clusters=situation_clusters(situations),
        marker_ranges={name: (seen[0], seen[1]) for name, (_, _, seen) in marker_sums.items()},
        fractional=frozenset(name for name, (_, _, seen) in marker_sums.items() if seen[2]),
    )


def situation_clusters(situations: list[str | None]) -> IntArray | None:
    """Cluster labels when some situation holds more than one task, else None; a task whose
    rows do not name a situation is a cluster of its own."""
    if not any(situations):
        return None
    labels: dict[object, int] = {}
    out = [
        labels.setdefault(key if key is not None else i, len(labels))
        for i, key in enumerate(situations)
    ]
    if len(labels) == len(out):
        return None
    return np.asarray(out, dtype=np.int64)


#: the rollout keys' digest is kept to 64 bits
_DIGEST_MASK = (1 << 64) - 1


class Provenance:
    """What produced the rows, as the sets of values seen: the deploy prompt's hash, the judge
    (an LLM judge's model; a verifier's or world's name and version), the writer and the user
    model. Rows that do not say are left out of the sets. Gathered a row at a time, beside a
    walk made for something else (a file's rows are parsed on every walk).

    Which rollouts the rows are is kept as a count and an order-free digest of their run and
    ``lineage.rollout_key`` (the sum and the exclusive or of their hashes; a key alone is a
    place in a plan, which two runs of one seed both fill): two arms of a
    million rows are told to be the same rollouts without either's keys held in memory."""

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {
            "system prompt (lineage.system_prompt_sha)": set(),
            "judge (judge_meta.model, or judge_name and its version)": set(),
            "writer model (writer_model)": set(),
            "user model (user_model)": set(),
        }
        self.keyed = 0
        self.unkeyed = 0
        #: rows that are branches of a recorded rollout (``lineage.branched_from``)
        self.branched = 0
        self._key_sum = 0
        self._key_xor = 0

    def same_rollouts(self, other: Provenance) -> int:
        """How many rollouts both hold when every row of each names its rollout and the two
        name the same ones (0 otherwise). Hashes are salted per process, so only two walks in
        one process compare."""
        alike = (self.keyed, self._key_sum, self._key_xor) == (
            other.keyed,
            other._key_sum,
            other._key_xor,
        )
        return self.keyed if alike and self.keyed and not (self.unkeyed or other.unkeyed) else 0

    def passing(self, rows: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
        """``rows`` as they are, each read here once the walk has taken it (and checked it)."""
        for row in rows:
            yield row
            self.add(row)

    def add(self, row: Mapping[str, Any]) -> None:
        prompt, judge, writer, user = self.seen.values()
        lineage = row.get("lineage")
        key = rollout_identity(row)
        if isinstance(lineage, Mapping) and lineage.get("branched_from"):
            self.branched += 1
        if key:
            hashed = hash(key)
            self.keyed += 1
            self._key_sum = (self._key_sum + hashed) & _DIGEST_MASK
            self._key_xor ^= hashed
        else:
            self.unkeyed += 1
        if isinstance(lineage, Mapping) and lineage.get("system_prompt_sha"):
            prompt.add(str(lineage["system_prompt_sha"]))
        meta = row.get("judge_meta")
        meta = meta if isinstance(meta, Mapping) else {}
        if meta.get("model"):
            judge.add(str(meta["model"]))
        elif row.get("judge_name"):
            # A verifier's or world's version says how it grades (a world whose check changed
            # grades the same rollout otherwise); an LLM judge's is per rubric, so per row.
            version = meta.get("version")
            name = str(row["judge_name"])
            judge.add(f"{name} version {version}" if version not in (None, "") else name)
        if row.get("writer_model"):
            writer.add(str(row["writer_model"]))
        if row.get("user_model"):
            user.add(str(row["user_model"]))
