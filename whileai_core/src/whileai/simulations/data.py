"""The run object ``simulate()`` returns: trajectories, exported rows, provenance, the report.

``data.trajectories`` keeps the privileged block for the judge; ``data.rows`` is the same rows
as they may leave memory (``export_row``), a sequence that is also callable. Held in memory
the rows are a list and the trajectories a ``KeptTrajectories`` (each situation's vector put on
when read); a run that streamed to ``output=`` hands back both as ``StoredRows`` over the file
(``whileai.simulations.finished``). ``save``, ``output=`` and the sidecar write exactly
``data.rows``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from whileai.response_cache import cache_line
from whileai.schema.export import export_row
from whileai.schema.files import sidecar_path, user_path, write_rows, write_sidecar
from whileai.schema.provenance import provenance_text
from whileai.schema.report import Report, fmt
from whileai.schema.rowlist import RowList
from whileai.schema.wording import counted
from whileai.simulations.finished import KeptTrajectories
from whileai.simulations.tally import RunTally
from whileai.sync import run_sync


@attrs.define(kw_only=True, repr=False)
class RunReport(Report):
    """Every knob a run ran under, as resolved, and what came of it."""

    title = "simulation run"

    run_id: str
    mode: str
    budget: int | None
    seed: int
    unique_situations: int
    requests_per_situation: int
    repeats: int
    repeat_policy: str
    hard_share: float
    #: the run's fault rate: the one you gave, or the world's default_fault_rate
    fault_rate: float
    strategy: str | None
    dimensions: dict[str, list[Any]]
    arm_weights: dict[str, float] | None
    simulator: str
    writer_model: str
    agent_model: str
    user_model: str
    grader: str
    llm_grader: str | None
    sampling: dict[str, Any] | None
    max_turns: int
    max_tool_calls: int
    logprobs: bool
    system_prompt_sha: str
    n_tasks: int
    n_traces: int
    n_seeds: int
    n_situations: int
    n_graded: int
    n_errors: int
    retries: int
    faults: dict[str, int]
    world: dict[str, Any]
    world_note: str
    #: only the advanced values you passed
    advanced: dict[str, Any]
    #: every RunKnobs field as the run resolved it
    knobs: dict[str, Any]
    model_notes: list[str]
    pass_at: Any
    output: str | None
    warnings: list[str]
    degraded: list[str]
    #: per backend (by spec): the roles it served and what it did this run (calls, retries,
    #: waits, waited_s, rate_limited, errors and failures by kind); stats None when the
    #: backend keeps no counters
    backends: dict[str, Any] = attrs.field(factory=dict)
    notes: list[str] = attrs.field(factory=list)
    #: where the rollouts ran: "in-process", or the executor name or spec given
    executor: str = "in-process"
    #: how the strategy searched (batches, asked, rejected and why, whether it stopped short);
    #: None for a replay
    search: dict[str, Any] | None = None
    #: the share of the run's situations that took the hard value (hard_share is the target)
    hard_share_realised: float | None = None
    #: where the rollouts went: budget, planned, extra (rl), cut by budget, and per group
    rollouts: dict[str, Any] | None = None
    #: the response cache this run: its directory, hits, misses, uncacheable and corrupt
    #: calls, and the input and output tokens the hits saved; None with no cache
    cache: dict[str, Any] | None = None
    #: what the run's model calls cost: USD by role (agent, user, writer, judge), the total,
    #: the models the price table had no price for (their cost is None), the table's date
    cost: dict[str, Any] | None = None
    #: why the run stopped short of its plan (budget_usd reached), None when it did not
    stopped: str | None = None
    #: whose failures the failed rollouts were: per owner (agent, user, world) the count and
    #: the share with its 95% interval over tasks; None when no rollout failed
    failures: dict[str, Any] | None = None

    def _lines(self) -> list[str]:
        rows = [
            ["run", self.run_id],
            ["mode / repeat policy", f"{self.mode} / {self.repeat_policy}"],
            [
                "situations x phrasings x repeats",
                f"{self.unique_situations} x {self.requests_per_situation} x {self.repeats}",
            ],
            ["tasks / traces / seeds", f"{self.n_tasks} / {self.n_traces} / {self.n_seeds}"],
            ["agent", self.agent_model],
            ["user", self.user_model],
            ["writer", self.writer_model],
            ["grader", self.grader + (f" (+ {self.llm_grader})" if self.llm_grader else "")],
            ["world", provenance_text("world", self.world)],
            ["executor", self.executor],
            *([["search", _search_line(self.search)]] if self.search else []),
            *(
                [
                    [
                        "hard share (asked / realised)",
                        f"{fmt(self.hard_share)} / {fmt(self.hard_share_realised)}",
                    ]
                ]
                if self.hard_share_realised is not None
                else []
            ),
            ["fault rate", fmt(self.fault_rate)],
            [
                "faults fired",
                ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())) or "none",
            ],
            ["errors / retries", f"{self.n_errors} / {self.retries}"],
            *([["cost (USD)", _cost_line(self.cost)]] if self.cost else []),
            *([["stopped", self.stopped]] if self.stopped else []),
            *([["failures by owner", _failures_line(self.failures)]] if self.failures else []),
            *(
                [
                    [
                        "response cache",
                        cache_line(self.cache),
                    ]
                ]
                if self.cache
                else []
            ),
            *(
                [
                    [
                        "rollouts planned / extra / cut",
                        f"{self.rollouts['planned']} / {self.rollouts['extra']} / "
                        f"{self.rollouts['cut_by_budget']}"
                        + (
                            f" (budget {self.rollouts['budget']})"
                            if self.rollouts["budget"]
                            else ""
                        ),
                    ]
                ]
                if self.rollouts
                else []
            ),
            *(
                [f"backend {label}", _backend_line(entry)]
                for label, entry in self.backends.items()
                if entry.get("stats")
            ),
            ["graded", f"{self.n_graded} of {self.n_traces}"],
        ]
        lines = [f"  {name:<34}{value}" for name, value in rows]
        lines.append(f"  {self.world_note}")
        if self.pass_at is not None:
            lines.extend("  " + line for line in str(self.pass_at).splitlines())
        else:
            lines.append("  pass_at: no graded rows")
        lines.extend(f"  models: {n}" for n in self.model_notes)
        if self.output:
            lines.append(f"  rows: {self.output}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        return lines


def _search_line(search: Mapping[str, Any]) -> str:
    line = (
        f"{search['strategy']} ({'learns' if search['learns'] else 'up front'}): "
        f"{counted(search['batches'], 'batch')}, {search['asked']} asked, "
        f"{search['rejected']} turned away"
    )
    if search.get("stopped_short"):
        line += f"; {search['stopped_short']}"
    return line


def _backend_line(entry: Mapping[str, Any]) -> str:
    stats = entry["stats"]
    line = (
        f"{' + '.join(entry['roles'])}: {counted(stats.get('calls', 0), 'call')}, "
        f"{counted(stats.get('retries', 0), 'retry')}, waited {stats.get('waited_s', 0.0):.1f} s"
    )
    errors = stats.get("errors") or {}
    if errors:
        line += "; " + ", ".join(f"{k} {v}" for k, v in sorted(errors.items()))
    return line


def _failures_line(failures: Mapping[str, Any]) -> str:
    parts = []
    for owner in ("agent", "user", "world"):
        entry = failures[owner]
        low, high = entry["ci95"]
        parts.append(f"{owner} {entry['n']} ({entry['share']:.0%}, 95% CI {low:.0%}-{high:.0%})")
    line = f"{failures['failed']} failed: " + ", ".join(parts)
    by = failures.get("by_source") or {}
    if by.get("judge"):
        line += f"; {by['judge']} decided by the attribution judge, {by.get('rules', 0)} by rules"
    return line


def _cost_line(cost: Mapping[str, Any]) -> str:
    def usd(value: Any) -> str:
        return "unknown" if value is None else f"{value:.4f}"

    parts = [f"{role} {usd(v)}" for role, v in cost["usd_by_role"].items()]
    line = f"{usd(cost['total_usd'])} ({', '.join(parts)}; prices of {cost['prices_date']})"
    if cost["unpriced"]:
        line += f"; no price for {', '.join(cost['unpriced'])}"
    return line


class Simulation:
    """What ``simulate()`` returns."""

    def __init__(
        self,
        *,
        trajectories: Sequence[dict[str, Any]],
        metadata: dict[str, Any],
        system_prompts: dict[str, str],
        warnings: list[str],
        degraded: list[str],
        report_fields: dict[str, Any],
        output: str | None = None,
        registry: Any = None,
        rows: Sequence[dict[str, Any]] | None = None,
        tally: RunTally | None = None,
    ) -> None:
        #: held in memory (KeptTrajectories, each situation's vector put on when read; a list
        #: when given one); for a run that streamed to ``output=``, the rows read back from
        #: the file with their privileged block and vector put back (StoredRows)
        self.trajectories = trajectories
        # the engine hands over the rows it already exported (a list, or the file read back);
        # rows given any other way are exported here
        self.rows: Sequence[dict[str, Any]] = (
            rows if rows is not None else RowList(export_row(t) for t in trajectories)
        )
        self.metadata = metadata
        self.system_prompts = system_prompts
        self.warnings = warnings
        self.degraded = degraded
        self.output = output
        self._report_fields = report_fields
        self._registry = registry
        #: the engine's count of a streamed run's rows (they are not in memory to count again)
        self._tally = tally

    def __len__(self) -> int:
        return len(self.trajectories)

    def __repr__(self) -> str:
        errors = (
            self._tally.n_errors
            if self._tally is not None
            else sum(1 for t in self._held() if t.get("error"))
        )
        return (
            f"<Simulation run {self.metadata.get('run_id')}: "
            f"{counted(len(self.trajectories), 'rollout')}, {counted(errors, 'error')}>"
        )

    def tally(self) -> RunTally:
        """The counts the report is made of: the engine's, for a run that streamed its rows;
        else counted from the trajectories as they are now."""
        return self._tally if self._tally is not None else RunTally.of(self._held())

    def _held(self) -> Sequence[dict[str, Any]]:
        """The trajectories as the run holds them: without the vectors reading them puts on
        (counting reads no vector)."""
        trajectories = self.trajectories
        return trajectories.held() if isinstance(trajectories, KeptTrajectories) else trajectories

    @property
    def pass_at(self) -> Any:
        """pass@1 with its interval, pass^k and pass@k over the graded rows."""
        from whileai.measure.pass_at import pass_at

        return pass_at(self.rows, repeat_policy=self._report_fields["repeat_policy"])

    def agreement(
        self, gold: Any = None, *, threshold: float = 0.5, field: str = "gold_reward"
    ) -> Any:
        """The judge against gold labels (``wai.judge_agreement`` on this run's rows): each
        row's ``gold_reward``, or a second scoring run passed as ``gold=``."""
        from whileai.measure.judges import judge_agreement

        return judge_agreement(self.rows, gold, threshold=threshold, field=field)

    def report(self) -> RunReport:
        """Every knob as resolved, the counts, the grader, faults, warnings and pass rates."""
        tally = self.tally()
        fields = dict(self._report_fields)
        fields.update(
            n_tasks=len(tally.scenario_ids),
            n_traces=tally.n,
            n_seeds=len(tally.seeds),
            n_situations=len(tally.situations),
            n_graded=tally.n_graded,
            n_errors=tally.n_errors,
            retries=tally.retries,
            faults=dict(tally.faults),
            pass_at=tally.pass_at(self._report_fields["repeat_policy"]),
            output=self.output,
            warnings=list(self.warnings),
            degraded=list(self.degraded),
        )
        return RunReport(**fields)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the rows (JSONL) and the sidecar; returns the rows' path."""
        target = user_path(path)
        write_rows(target, self.rows)
        write_sidecar(sidecar_path(target), self.sidecar(complete=True, plain=False))
        return target

    def sidecar(
        self, *, complete: bool, report: RunReport | None = None, plain: bool = True
    ) -> dict[str, Any]:
        """What the ``.meta.json`` beside the rows holds: metadata, prompts, knobs, report
        (``report``, when the caller has this run's :meth:`report` already). ``plain=False``
        leaves the report a :class:`RunReport`, for ``write_sidecar``, which writes it as the
        same text as its plain-data copy without making one."""
        shown: Any = None
        if len(self.trajectories):
            shown = report if report is not None else self.report()
            if plain:
                shown = shown.to_dict()
        return {
            "metadata": self.metadata,
            "system_prompts": self.system_prompts,
            "warnings": self.warnings,
            "degraded": self.degraded,
            "complete": complete,
            "report": shown,
        }

    def grade(
        self, judge: Any, *, concurrency: int | None = None, registry: Any = None
    ) -> Simulation:
        """Graded copies of this run's trajectories (privileged kept in memory), at most
        ``concurrency`` judged at once (default 16, simulate()'s max_concurrency). A rollout
        that failed (``error``) is not judged: ``judge_status: "skipped"``, no reward."""
        from whileai.backend_use import RunBackend, close_backends
        from whileai.graders import check_concurrency, grade_each, resolve_grader
        from whileai.registry import get_registry

        limit = check_concurrency(concurrency)
        grader = resolve_grader(judge, get_registry(registry or self._registry))

        async def grade_all() -> list[dict[str, Any]]:
            try:
                return await grade_each(self.trajectories, grader, limit)
            finally:
                if isinstance(judge, str) and grader.backend is not None:
                    # the judge built its backend from a spec for this call: close it here
                    await close_backends(
                        [RunBackend(grader.name, grader.backend, ["judge"], opened=True)]
                    )

        graded = run_sync(grade_all())
        fields = dict(self._report_fields)
        fields["grader"] = grader.name
        return Simulation(
            trajectories=graded,
            metadata={**self.metadata, "grader": grader.name},
            system_prompts=dict(self.system_prompts),
            warnings=list(self.warnings),
            degraded=list(self.degraded),
            report_fields=fields,
            output=None,
            registry=self._registry,
        )


def counts_by(rows: list[Mapping[str, Any]], key: str) -> dict[str, int]:
    return dict(Counter(str(r.get(key)) for r in rows))
