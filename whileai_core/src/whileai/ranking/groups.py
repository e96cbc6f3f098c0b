"""Each task's group of rows judged in pairs and fitted, a few groups at a time.

A ranking holds the rows of the groups being judged, not the run's: a group's rows are read
when its turn comes (from their file, for rows in one) and let go once its pairs are judged and
fitted. What each row's ``quality_meta`` will say is kept as numbers in arrays (a few dozen
bytes a row), and :meth:`Outcomes.ranked` puts it on the row as the rows are written.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from whileai.progress import RunProgress
from whileai.ranking.bradley_terry import DEFAULT_PRIOR_TIES, expected_win_rate, fit
from whileai.ranking.pairs import schedule_pairs
from whileai.ranking.preference import SCORE_OF_A, Preference, as_preference, combine_orders
from whileai.schema.records import task_key
from whileai.scoring import JUDGE_FAILURES

SKIP_ERROR = "rollout error"
SKIP_EMPTY = "empty final_text"
SKIP_ALONE = "only rankable row of its group"
SKIP_FAILED = "every comparison failed"

#: a row's state, one byte a row: rankable until judged, or why it is not ranked
_RANKABLE, _ERROR, _EMPTY, _ALONE, _FAILED, _RANKED = range(6)
_SKIPS = {_ERROR: SKIP_ERROR, _EMPTY: SKIP_EMPTY, _ALONE: SKIP_ALONE, _FAILED: SKIP_FAILED}
#: distinct failure reasons kept (the counts cover all of them)
MAX_FAILURES_KEPT = 5

#: quality_meta.method of a ranked row
QUALITY_METHOD = "bradley-terry"


@attrs.define
class Groups:
    """The rows' groups (by ``task_key``) in order of first appearance, each row's index in
    them, and which rows can be ranked at all: made in the one walk that checks the rows."""

    members: dict[str, array[int]] = attrs.field(factory=dict)
    state: bytearray = attrs.field(factory=bytearray)

    def add(self, row: Mapping[str, Any], index: int) -> None:
        self.members.setdefault(task_key(row, index), array("q")).append(index)
        if row.get("error"):
            self.state.append(_ERROR)
        elif not row["final_text"].strip():
            self.state.append(_EMPTY)
        else:
            self.state.append(_RANKABLE)

    def __len__(self) -> int:
        return len(self.state)


class _Numbered:
    """Distinct texts, numbered from 1 as they first come (0 stands for none): what many rows
    share is held once and a row keeps its number."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}
        self._texts: list[str] = []

    def number(self, text: str) -> int:
        found = self._numbers.get(text)
        if found is None:
            self._texts.append(text)
            found = self._numbers[text] = len(self._texts)
        return found

    def __getitem__(self, number: int) -> str:
        return self._texts[number - 1]


class Outcomes:
    """What the judging said of each row, and of the ranking as a whole."""

    def __init__(self, groups: Groups, provenance: Mapping[str, Any]) -> None:
        n = len(groups)
        self.groups = groups
        self.provenance = dict(provenance)
        self.state = bytearray(groups.state)
        self.quality = array("d", bytes(8 * n))
        self.strength = array("d", bytes(8 * n))
        #: wins, ties, losses and failed comparisons, four a row
        self.counts = array("q", bytes(8 * 4 * n))
        #: the number in ``versions`` of the version the row's verdicts carried (0: none)
        self.version_of = array("q", bytes(8 * n))
        self.versions = _Numbered()
        #: the number in ``reasons`` of each row's first failed comparison (0: none): a judge
        #: whose model is down fails every row alike, and a reason a row would cost a million
        #: rows a hundred bytes each
        self.first_failure = array("q", bytes(8 * n))
        self.reasons = _Numbered()
        #: rows ranked per group
        self.group_size: dict[str, int] = {}
        self.comparisons = 0
        self.failed_comparisons = 0
        self.flips = 0
        self.bias_known = 0
        self.subsampled_groups = 0
        #: each group's distinct failure reasons, merged in group order at the end so the
        #: report does not depend on which group finished first
        self._failures: dict[str, list[str]] = {}

    @property
    def n_ranked(self) -> int:
        return self.state.count(_RANKED)

    def skipped(self) -> dict[str, int]:
        return {why: self.state.count(code) for code, why in _SKIPS.items() if code in self.state}

    def failures(self) -> list[str]:
        seen: dict[str, None] = {}
        for key in self.groups.members:
            for reason in self._failures.get(key, ()):
                seen.setdefault(reason)
        return list(seen)[:MAX_FAILURES_KEPT]

    @property
    def position_bias(self) -> float | None:
        return self.flips / self.bias_known if self.bias_known else None

    @property
    def bias_unreported(self) -> int:
        return self.comparisons - self.failed_comparisons - self.bias_known

    def record(
        self,
        key: str,
        members: Sequence[int],
        pairs: Sequence[tuple[int, int]],
        verdicts: Sequence[Preference],
    ) -> None:
        """A group's verdicts (``pairs`` index into ``members``): counted, and fitted."""
        counts, failures = self.counts, self._failures
        outcomes: list[tuple[int, int, float]] = []
        for (i, j), verdict in zip(pairs, verdicts, strict=True):
            a, b = members[i], members[j]
            self.comparisons += 1
            if not verdict.ok:
                self.failed_comparisons += 1
                reason = str(verdict.reason)
                for row in (a, b):
                    counts[4 * row + 3] += 1
                    if not self.first_failure[row]:
                        self.first_failure[row] = self.reasons.number(reason)
                kept = failures.setdefault(key, [])
                if reason not in kept and len(kept) < MAX_FAILURES_KEPT:
                    kept.append(reason)
                continue
            if verdict.flipped is not None:
                self.bias_known += 1
                self.flips += bool(verdict.flipped)
            score = SCORE_OF_A[str(verdict.winner)]
            outcomes.append((i, j, score))
            version = verdict.meta.get("version")
            for row, own in ((a, score), (b, 1 - score)):
                if version and not self.version_of[row]:
                    self.version_of[row] = self.versions.number(str(version))
                counts[4 * row + (0 if own == 1 else 2 if own == 0 else 1)] += 1
        compared = [i for i, row in enumerate(members) if self._compared(row)]
        for row in members:
            if not self._compared(row) and counts[4 * row + 3]:
                self.state[row] = _FAILED
        if len(compared) < 2:
            return
        local = {i: n for n, i in enumerate(compared)}
        p = fit(
            len(compared),
            [(local[i], local[j], s) for i, j, s in outcomes],
            prior_ties=DEFAULT_PRIOR_TIES,
        )
        for i, q, s in zip(compared, expected_win_rate(p), p, strict=True):
            row = members[i]
            self.state[row] = _RANKED
            self.quality[row] = float(q)
            self.strength[row] = float(s)
        self.group_size[key] = len(compared)

    def _compared(self, row: int) -> bool:
        c = self.counts
        return bool(c[4 * row] or c[4 * row + 1] or c[4 * row + 2])

    def ranked(self, row: Mapping[str, Any], index: int, key: str) -> dict[str, Any]:
        """A copy of ``row`` (the row at ``index``, of group ``key``) with ``quality`` and
        ``quality_meta`` added."""
        copy = dict(row)
        meta: dict[str, Any] = dict(self.provenance)
        version = self.version_of[index]
        if version:
            meta["version"] = self.versions[version]  # a rubric read from the row
        wins, ties, losses, failed = self.counts[4 * index : 4 * index + 4]
        state = self.state[index]
        if state == _RANKED:
            meta.update(
                status="ok",
                method=QUALITY_METHOD,
                group_size=self.group_size[key],
                comparisons=wins + ties + losses,
                wins=wins,
                ties=ties,
                losses=losses,
                failed=failed,
                strength=self.strength[index],
            )
            copy["quality"] = self.quality[index]
        else:
            meta.update(
                status="skipped", skipped=_SKIPS[state], reason=self._skip_reason(row, index)
            )
            if wins + ties + losses + failed:
                meta["failed"] = failed
            copy["quality"] = None
        copy["quality_meta"] = meta
        return copy

    def _skip_reason(self, row: Mapping[str, Any], index: int) -> str:
        state = self.state[index]
        if state == _ERROR:
            return f"the rollout failed: {str(row['error'])[:200]}"
        if state == _EMPTY:
            return "no reply to rank (final_text is empty)"
        if state == _ALONE:
            return "the only rankable row of its group: nothing to compare it with"
        failed = self.counts[4 * index + 3]
        first = self.reasons[self.first_failure[index]]
        if failed == 1:
            return f"its one comparison failed: {first}"
        return f"all {failed} comparisons failed; first: {first}"


def rankable_groups(outcomes: Outcomes) -> Iterator[tuple[str, list[int]]]:
    """Each group holding two or more rows left to compare, with those rows, read as it is
    reached (a run's groups are never all listed at once); a row left alone in its group is
    marked so."""
    state = outcomes.state
    for key, group in outcomes.groups.members.items():
        members = [i for i in group if state[i] == _RANKABLE]
        if len(members) == 1:
            state[members[0]] = _ALONE
        elif members:
            yield key, members


async def judge_groups(
    rows: Sequence[Mapping[str, Any]],
    outcomes: Outcomes,
    ranker: Any,
    *,
    concurrency: int,
    seed: int,
    max_pairs: int,
    min_pairs_per_row: int,
    progress: RunProgress | None = None,
) -> None:
    """Judge every group's pairs into ``outcomes``, ``concurrency`` pairs at once, reading a
    group's rows when its turn comes (as many groups open as pairs run at once); each group
    counted on ``progress`` once judged (as an error when one of its pairs could not be)."""
    gate = asyncio.Semaphore(concurrency)
    fetch = _fetcher(rows)

    async def judged(a: Mapping[str, Any], b: Mapping[str, Any]) -> Preference:
        async with gate:
            return await _judge_pair(ranker, a, b)

    async def one(key: str, members: Sequence[int]) -> None:
        pairs, cut = schedule_pairs(
            len(members),
            max_pairs=max_pairs,
            min_pairs_per_row=min_pairs_per_row,
            # seeded per group, so one group's pairs do not depend on the others
            rng=random.Random(f"{seed}:{key}"),
        )
        outcomes.subsampled_groups += cut
        held = fetch(members)
        verdicts = await asyncio.gather(*(judged(held[i], held[j]) for i, j in pairs))
        outcomes.record(key, members, pairs, verdicts)
        if progress is not None:
            progress.advance(error=any(v.status == "error" for v in verdicts))

    waiting = rankable_groups(outcomes)

    async def worker() -> None:
        # each takes the next group when it is done with one (one thread: next() is atomic)
        for key, members in waiting:
            await one(key, members)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def _fetcher(rows: Sequence[Mapping[str, Any]]) -> Callable[[Sequence[int]], list[Any]]:
    """How a group's rows are read: from their file in one open (rows in a file), else by
    index."""
    at = getattr(rows, "at", None)
    if callable(at):
        return lambda positions: list(at(positions))
    return lambda positions: [rows[i] for i in positions]


async def _ask(ranker: Any, row_a: Mapping[str, Any], row_b: Mapping[str, Any]) -> Preference:
    what = str(getattr(ranker, "name", type(ranker).__name__))
    compare = ranker.compare
    try:
        if inspect.iscoroutinefunction(compare):
            raw = await compare(row_a, row_b)
        else:
            # a blocking judge (a local model call) stays off the event loop
            raw = await asyncio.to_thread(compare, row_a, row_b)
            if inspect.isawaitable(raw):
                raw = await raw
        return as_preference(raw, what)
    except JUDGE_FAILURES as exc:  # a judge's sys.exit fails its comparison, not the ranking
        return Preference.error(f"{type(exc).__name__}: {exc}")


async def _judge_pair(
    ranker: Any, row_a: Mapping[str, Any], row_b: Mapping[str, Any]
) -> Preference:
    if getattr(ranker, "both_orders", False):
        return await _ask(ranker, row_a, row_b)
    first = await _ask(ranker, row_a, row_b)
    second = await _ask(ranker, row_b, row_a)
    return combine_orders(first, second)
