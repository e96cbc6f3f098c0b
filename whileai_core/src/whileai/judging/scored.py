"""What grading returns: :class:`ScoredData`, the graded rows with who graded them and how
far to trust it, and :class:`GradeReport`, its summary for a person.

``scored.trajectories`` keeps the privileged block in memory (a second judge can still read the
reference); ``scored.rows`` is the same rows as they may leave memory (``export_row``), a list
that is also callable, exactly as on a run. ``save`` writes ``scored.rows`` and the
``.meta.json`` sidecar the same way a run does.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from whileai.response_cache import cache_line
from whileai.schema.export import export_row
from whileai.schema.files import sidecar_path, user_path, write_rows, write_sidecar
from whileai.schema.report import Report, fmt
from whileai.schema.rowlist import RowList
from whileai.schema.wording import counted

#: judge_status values that mean the judge said nothing about the row
UNJUDGED = ("error", "skipped")


@attrs.define
class GradeCounts:
    """What the report counts of graded rows: counted as each row is written when the rows
    go to a file, so that a report, a sidecar or a ``repr`` does not read the file again
    (``asyncio.run`` itself formats the repr of the result it returns)."""

    rows: int = 0
    graded: int = 0
    failed: int = 0
    errors: int = 0
    #: whether any row holds the judge's reward (pass rates have something to read)
    judged: bool = False
    statuses: Counter[str] = attrs.field(factory=Counter)
    #: rows per judge_meta.version
    versions: Counter[str] = attrs.field(factory=Counter)

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> GradeCounts:
        counts = cls()
        for row in rows:
            counts.add(row)
        return counts

    def add(self, row: Mapping[str, Any]) -> None:
        """Count ``row`` as it reads (exported, as written)."""
        self.rows += 1
        status = row.get("judge_status")
        self.statuses[str(status)] += 1
        meta = row.get("judge_meta")
        if isinstance(meta, Mapping) and meta.get("version") is not None:
            self.versions[str(meta["version"])] += 1
        reward = row.get("reward")
        self.graded += status == "ok" and reward is not None
        self.judged = self.judged or (reward is not None and status not in UNJUDGED)
        if row.get("error"):
            self.failed += 1
        elif status == "error":
            self.errors += 1


@attrs.define(kw_only=True, repr=False)
class GradeReport(Report):
    """Who graded the rows, how that went, and the pass rates it gives."""

    title = "graded rows"

    #: where the rows came from: a count, a file, a run, or the agent evaluate() ran
    source: str
    #: the judge_name written on the rows
    judge: str
    #: judge_meta.model on the rows (None for a judge that names no model)
    judge_model: str | None
    #: judge_meta.version when every graded row shares one, else None (see versions)
    judge_version: str | None
    #: rows per judge_meta.version: a rubric edit, or a new version=, is a new judge
    versions: dict[str, int]
    label_source: str
    n_rows: int
    #: rows the judge scored (judge_status "ok" with a reward)
    n_graded: int
    #: rows the judge failed on (judge_status "error"; reason says why)
    n_errors: int
    #: rows never sent to the judge: the rollout or completion itself failed
    n_failed_rollouts: int
    status_counts: dict[str, int]
    #: the judge's model is the model that wrote the rows (on n_self_judged of them)
    self_judged: bool
    n_self_judged: int
    pass_at: Any
    warnings: list[str]
    #: for evaluate(): the agent and how many times each prompt was answered
    agent: str | None = None
    repeats: int | None = None
    notes: list[str] = attrs.field(factory=list)
    #: the response cache (cache=): its directory, hits, misses, uncacheable and corrupt
    #: calls, tokens saved; None with no cache
    cache: dict[str, Any] | None = None

    def _lines(self) -> list[str]:
        rows: list[tuple[str, str]] = [("rows", self.source)]
        if self.agent is not None:
            per_prompt = (
                "" if self.repeats is None else f", {counted(self.repeats, 'answer')} per prompt"
            )
            rows.append(("agent", f"{self.agent}{per_prompt}"))
        if self.cache:
            rows.append(("response cache", cache_line(self.cache)))
        rows += [
            ("judge", f"{self.judge} ({self.label_source})"),
            ("judge model", self.judge_model or "-"),
            ("judge version", self.judge_version or _versions_line(self.versions)),
            ("graded / rows", f"{self.n_graded} of {self.n_rows}"),
            ("judge errors", fmt(self.n_errors)),
            ("failed rollouts (not judged)", fmt(self.n_failed_rollouts)),
            ("judge_status", ", ".join(f"{k} {v}" for k, v in sorted(self.status_counts.items()))),
            (
                "self_judged",
                f"yes, on {self.n_self_judged} of {counted(self.n_rows, 'row')}"
                if self.self_judged
                else "no",
            ),
        ]
        lines = [f"  {name:<30}{value}" for name, value in rows]
        if self.pass_at is not None:
            lines.extend("  " + line for line in str(self.pass_at).splitlines())
        else:
            lines.append("  pass_at: no graded rows")
        lines.extend(f"warning: {w}" for w in self.warnings)
        return lines


def _versions_line(versions: Mapping[str, int]) -> str:
    if not versions:
        return "-"
    return "; ".join(f"{v} ({counted(n, 'row')})" for v, n in sorted(versions.items()))


class ScoredData:
    """What ``wai.grade``, ``wai.run_judge`` and ``wai.evaluate`` return: the graded rows,
    their pass rates, the judge's agreement with gold labels, and a report."""

    def __init__(
        self,
        *,
        trajectories: Sequence[dict[str, Any]],
        metadata: dict[str, Any],
        warnings: list[str],
        system_prompts: dict[str, str] | None = None,
        notes: list[str] | None = None,
        source: str = "",
        repeat_policy: str | None = None,
        agent: str | None = None,
        repeats: int | None = None,
        rows: Sequence[dict[str, Any]] | None = None,
        counts: GradeCounts | None = None,
    ) -> None:
        self.trajectories = trajectories
        #: ``rows``: given when the trajectories are already exported (read back from the
        #: file they were graded into), else exported here
        self.rows: Sequence[dict[str, Any]] = (
            rows if rows is not None else RowList(export_row(t) for t in trajectories)
        )
        self.metadata = metadata
        self.system_prompts = dict(system_prompts or {})
        self.warnings = warnings
        self.notes = list(notes or [])
        self.source = source
        self.repeat_policy = repeat_policy
        self.agent = agent
        self.repeats = repeats
        #: the rows' counts, kept when they were counted as written to a file (rows in a
        #: list may be changed by their reader, so they are counted when asked)
        self._counts = counts
        self._pass_at: Any = None

    def __len__(self) -> int:
        return len(self.trajectories)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The exported rows, as every measurement call reads them."""
        return iter(self.rows)

    def __getitem__(self, index: int | slice) -> Any:
        """``scored[0]``: an exported row, as in the list it iterates as."""
        return self.rows[index]

    def __repr__(self) -> str:
        statuses = self._counted().statuses
        return (
            f"<ScoredData by {self.metadata.get('judge')}: "
            f"{counted(len(self.trajectories), 'row')}, "
            f"{statuses.get('ok', 0)} graded, {statuses.get('error', 0)} judge errors"
            f"{', self-judged' if self.self_judged else ''}>"
        )

    @property
    def self_judged(self) -> bool:
        """Whether the judge's model also wrote (some of) the rows; ``warnings`` says so."""
        return bool(self.metadata.get("n_self_judged"))

    def _counted(self) -> GradeCounts:
        return self._counts if self._counts is not None else GradeCounts.of(self.trajectories)

    @property
    def pass_at(self) -> Any:
        """pass@1 with its interval, pass^k and pass@k over the graded rows."""
        from whileai.measure.pass_at import pass_at

        if self._pass_at is not None:
            return self._pass_at
        measured = pass_at(self.rows, repeat_policy=self.repeat_policy)  # type: ignore[arg-type]
        if self._counts is not None:
            # rows in a file as graded: read once for it, however often it is asked
            self._pass_at = measured
        return measured

    def agreement(
        self, gold: Any = None, *, threshold: float = 0.5, field: str = "gold_reward"
    ) -> Any:
        """The judge against gold labels (``wai.judge_agreement`` on these rows): each row's
        ``gold_reward``, or a second scoring run passed as ``gold=`` (rows, a run, a
        ScoredData). Below 50 gold rows the report says the floor is not met."""
        from whileai.measure.judges import judge_agreement

        return judge_agreement(self.rows, gold, threshold=threshold, field=field)

    def report(self) -> GradeReport:
        """Judge name, model and version, counts by status, self_judged, warnings, pass rates."""
        counts = self._counted()
        versions = counts.versions
        return GradeReport(
            source=self.source,
            judge=str(self.metadata.get("judge")),
            judge_model=self.metadata.get("judge_model"),
            judge_version=next(iter(versions)) if len(versions) == 1 else None,
            versions=dict(versions),
            label_source=str(self.metadata.get("label_source")),
            n_rows=counts.rows,
            n_graded=counts.graded,
            n_errors=counts.errors,
            n_failed_rollouts=counts.failed,
            status_counts=dict(counts.statuses),
            self_judged=self.self_judged,
            n_self_judged=int(self.metadata.get("n_self_judged") or 0),
            pass_at=self.pass_at if counts.judged else None,
            warnings=list(self.warnings),
            agent=self.agent,
            repeats=self.repeats,
            notes=list(self.notes),
            cache=self.metadata.get("cache"),
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``rows`` (JSONL) and the ``.meta.json`` sidecar; returns the rows' path."""
        target = user_path(path)
        write_rows(target, self.rows)
        write_sidecar(sidecar_path(target), self.sidecar())
        return target

    def sidecar(self) -> dict[str, Any]:
        """What the ``.meta.json`` beside the rows holds: metadata, prompts, warnings, report."""
        metadata = dict(self.metadata)
        if self.repeat_policy is not None:
            metadata["repeat_policy"] = self.repeat_policy
        return {
            "metadata": metadata,
            "system_prompts": self.system_prompts,
            "warnings": self.warnings,
            "degraded": ["self_judged"] if self.self_judged else [],
            "complete": True,
            "report": self.report().to_dict(),
        }
