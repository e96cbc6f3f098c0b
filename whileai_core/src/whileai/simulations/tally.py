"""What a run's report needs of every finished row, counted as the row goes by.

A run that streams its rows to ``output=`` does not keep them: the report (counts, faults,
pass@1 and pass^k, whose failures they were), the extra repeats of ``repeat_policy="rl"`` and
the rows' order in the plan are read off this tally instead, at a few bytes a row (typed
arrays, no dict per row). A run held in memory counts its rows the same way, so both paths
give one report. Every number here is the one the measurement would give on the rows
themselves: pass@1 goes through the same table and intervals as ``wai.pass_at``, in the same
row order (tests/simulations/test_streaming.py holds the two equal).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from whileai.schema.records import UNJUDGED_STATUS, check_row, situation_key, task_key

_OWNERS = ("agent", "user", "world")

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


def plan_place(row: Mapping[str, Any]) -> tuple[int, int, int]:
    """Where a row sits in the plan: situation, phrasing, repeat (0 where it does not say)."""
    lineage = row.get("lineage")
    if not isinstance(lineage, Mapping):
        return (0, 0, 0)
    return (
        int(lineage.get("situation", 0)),
        int(lineage.get("phrasing", 0)),
        int(lineage.get("repeat", 0)),
    )


class RunTally:
    """Counts and per-row columns of the rows a run has finished, in the order they came."""

    def __init__(self) -> None:
        self.n = 0
        self.n_graded = 0
        self.n_errors = 0
        self.retries = 0
        self.faults: Counter[str] = Counter()
        self.scenario_ids: set[Any] = set()
        self.seeds: set[Any] = set()
        self.situations: set[Any] = set()
        #: the first model_version in plan order, with its place
        self._version: tuple[tuple[int, int, int], Any] | None = None
        # pass@1's columns: each row's task (into ``keys``) and reward as task_table reads it
        self.keys: list[str] = []
        self._index_of: dict[str, int] = {}
        self._task_situation: list[str | None] = []
        self._row_task = array("i")
        self._row_reward = array("d")
        #: the raw reward where it is exactly 0 or 1 (-1 otherwise): the groups that split
        self._row_binary = array("b")
        # where each row sits in the plan: situation, phrasing, repeat (4 bytes each: an
        # index past two billion is an OverflowError, not a wrong order)
        self._situation = array("i")
        self._phrasing = array("i")
        self._repeat = array("i")
        # failed rows with an owner: the row, the owner (index into _OWNERS), the source
        self._owned_row = array("q")
        self._owned_owner = array("b")
        self.owner_sources: Counter[str] = Counter()
        #: plan_order() as last computed (rows only ever come in, so its length tells)
        self._order: npt.NDArray[np.int64] | None = None

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> RunTally:
        tally = cls()
        for row in rows:
            tally.add(row)
        return tally

    def add(self, row: Mapping[str, Any]) -> None:
        """Count one finished row (a trajectory or its exported row: the fields read here are
        the same in both)."""
        i = self.n
        self.n += 1
        reward = row.get("reward")
        if reward is not None:
            self.n_graded += 1
        if row.get("error"):
            self.n_errors += 1
        usage = row.get("usage") or {}
        self.retries += int(usage.get("retries") or 0)
        for fault in row.get("faults") or []:
            self.faults[str(fault.get("kind"))] += 1
        self.scenario_ids.add(row.get("scenario_id"))
        self.seeds.add(row.get("seed"))
        lineage = row.get("lineage")
        self.situations.add(lineage.get("situation") if isinstance(lineage, Mapping) else None)
        place = plan_place(row)
        self._situation.append(place[0])
        self._phrasing.append(place[1])
        self._repeat.append(place[2])
        version = row.get("model_version")
        if version and (self._version is None or place < self._version[0]):
            self._version = (place, version)
        # pass@1 reads what task_table reads, and refuses what it refuses
        check_row(row, i)
        key = task_key(row, i)
        t = self._index_of.get(key)
        if t is None:
            t = self._index_of[key] = len(self.keys)
            self.keys.append(key)
            self._task_situation.append(situation_key(row))
        self._row_task.append(t)
        judged = reward is not None and row.get("judge_status") not in UNJUDGED_STATUS
        self._row_reward.append(float(reward) if judged else float("nan"))  # type: ignore[arg-type]
        self._row_binary.append(int(reward) if reward in (0, 1) else -1)
        owner = row.get("failure_owner")
        if isinstance(owner, Mapping):
            self._owned_row.append(i)
            self._owned_owner.append(
                _OWNERS.index(owner["owner"]) if owner.get("owner") in _OWNERS else -1
            )
            self.owner_sources[str(owner.get("source", "rules"))] += 1

    # -- what the report reads ------------------------------------------------------------

    def plan_order(self) -> npt.NDArray[np.int64]:
        """The rows' positions (0 = first to finish) sorted into plan order: situation,
        phrasing, repeat, ties in the order they finished."""
        import numpy as np  # here: importing the engine must not import numpy

        if self._order is not None and len(self._order) == self.n:
            return self._order
        self._order = np.lexsort(
            (
                np.frombuffer(self._repeat, dtype=np.int32),
                np.frombuffer(self._phrasing, dtype=np.int32),
                np.frombuffer(self._situation, dtype=np.int32),
            )
        ).astype(np.int64, copy=False)
        return self._order

    @property
    def model_version(self) -> Any:
        return None if self._version is None else self._version[1]

    def pass_at(self, repeat_policy: str) -> Any:
        """``wai.pass_at`` over the rows in plan order, from the columns (None with no
        graded row)."""
        from whileai.measure._tasks import table_from_columns
        from whileai.measure.pass_at import _check_policy, _pass_at_from_table
        from whileai.measure.stats import DEFAULT_RESAMPLES

        if not self.n_graded:
            return None
        keys, row_task, row_reward, situations = self._in_plan_order()
        table = table_from_columns(keys, row_task, row_reward, situations)
        return _pass_at_from_table(table, None, _check_policy(repeat_policy), DEFAULT_RESAMPLES, 0)

    def _in_plan_order(
        self,
    ) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.float64], list[str | None]]:
        """The pass@1 columns re-read in plan order, tasks numbered by first appearance
        there, as task_table numbers them reading the rows in that order."""
        import numpy as np  # here: importing the engine must not import numpy

        order = self.plan_order()
        task = np.frombuffer(self._row_task, dtype=np.int32)[order].astype(np.int64)
        reward = np.frombuffer(self._row_reward, dtype=np.float64)[order]
        _, first = np.unique(task, return_index=True)
        old_in_order = task[np.sort(first)]
        renumber = np.empty(len(self.keys), dtype=np.int64)
        renumber[old_in_order] = np.arange(len(old_in_order), dtype=np.int64)
        keys = [self.keys[t] for t in old_in_order.tolist()]
        situations = [self._task_situation[t] for t in old_in_order.tolist()]
        return keys, renumber[task], reward, situations

    def split_groups(self) -> dict[str, float]:
        """Task keys whose exactly-0-or-1 rewards disagree, with their pass rate."""
        import numpy as np  # here: importing the engine must not import numpy

        task = np.frombuffer(self._row_task, dtype=np.int32).astype(np.int64)
        binary = np.frombuffer(self._row_binary, dtype=np.int8)
        has = binary >= 0
        n = np.bincount(task[has], minlength=len(self.keys))
        passed = np.bincount(task[has], weights=binary[has], minlength=len(self.keys))
        split = np.flatnonzero((passed > 0) & (passed < n))
        return {self.keys[t]: float(passed[t] / n[t]) for t in split.tolist()}

    def owner_shares(self) -> dict[str, Any] | None:
        """``report()["failures"]``: per owner the failed rollouts and the share with its 95%
        interval over tasks, situations where phrasings share one (as
        ``whileai.simulations.attribution.owner_shares``)."""
        import numpy as np  # here: importing the engine must not import numpy

        if not len(self._owned_row):
            return None
        # after the check: a run with no failed rollout reports without importing the
        # measures' statistics
        from whileai.measure._tasks import situation_clusters
        from whileai.measure.proportions import clustered_share_of_counts

        rank = np.empty(self.n, dtype=np.int64)
        rank[self.plan_order()] = np.arange(self.n, dtype=np.int64)
        owned = np.frombuffer(self._owned_row, dtype=np.int64)
        owners = np.frombuffer(self._owned_owner, dtype=np.int8)
        by_place = np.argsort(rank[owned], kind="stable")
        # each failed row's unit: its task's situation (phrasings share one), else its task
        clustered = situation_clusters(self._task_situation)
        unit_of_task = np.arange(len(self.keys)) if clustered is None else clustered
        task = np.frombuffer(self._row_task, dtype=np.int32)[owned[by_place]]
        unit = unit_of_task[task.astype(np.int64)]
        owners = owners[by_place]
        # clusters in the order their first failed row comes in the plan
        _, first = np.unique(unit, return_index=True)
        clusters = unit[np.sort(first)]
        sizes = np.bincount(unit, minlength=len(self.keys))[clusters]
        out: dict[str, Any] = {"failed": len(owned)}
        out["by_source"] = dict(sorted(self.owner_sources.items()))
        for code, name in enumerate(_OWNERS):
            hit = owners == code
            hits = np.bincount(unit[hit], minlength=len(self.keys))[clusters]
            share, low, high = clustered_share_of_counts(sizes, hits)
            out[name] = {"n": int(hit.sum()), "share": share, "ci95": (low, high)}
        return out
