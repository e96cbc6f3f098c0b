"""``simulate()``: resolve the knobs, plan situations, run rollouts concurrently, grade them,
stream rows to disk, and return the run object.

The plan is deterministic given the parameters: situation ``i``, phrasing ``p`` and repeat
``r`` always get the same key, seed and situation, which is what lets ``resume=True`` continue
a killed run without duplicating or losing a row.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import inspect
import json
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import attrs

from whileai.backend_use import (
    RunBackend,
    add_backend,
    close_backends,
    retries_so_far,
    snapshot,
    usage_report,
    wait_warnings,
)
from whileai.backends import (
    Sampling,
)
from whileai.executors import Job, RegistrySpec, RunSpec, check_shippable, ship_problems
from whileai.graders import Graders, MarkerSet, resolve_graders
from whileai.pricing import PriceTable, price_table, shipped_table
from whileai.progress import RunProgress
from whileai.registry import Registry, get_registry, has_observers, notify
from whileai.response_cache import CachingBackends, caching
from whileai.schema.files import (
    RESUME_HINT,
    OutputLock,
    RowWriter,
    iter_jsonl,
    may_hold_stale_temporaries,
    read_sidecar,
    remove_stale_temporaries,
    resume_mismatch,
    sidecar_path,
    write_sidecar,
)
from whileai.schema.records import prompt_hash
from whileai.schema.secrets import Redactor, url_secrets
from whileai.schema.wording import agreeing, counted, did_you_mean
from whileai.simulations.attribution_judge import Attributor
from whileai.simulations.behavior import Embedder, SituationVectors
from whileai.simulations.branching import (
    Branch,
    check_rows,
    inherited,
    plan_from_branch,
    read_source,
)
from whileai.simulations.costs import RunCosts
from whileai.simulations.data import Simulation
from whileai.simulations.defaults import RunKnobs
from whileai.simulations.finished import ExistingRows, FinishedRows
from whileai.simulations.models import ResolvedModels, resolve_models
from whileai.simulations.params import (
    ALIASES,
    RunParams,
    merge_aliases,
    resolve_params,
    spellings,
)
from whileai.simulations.plan import PlannedJobs, PlannedSituation, jobs_for, plan_from_tasks
from whileai.simulations.rollout import RolloutContext
from whileai.simulations.search import Search
from whileai.simulations.tally import plan_place
from whileai.simulations.workers import (
    InProcessExecutor,
    JobRunner,
    close_executor,
    open_attributor,
    resolve_executor,
    run_spec,
)
from whileai.sync import run_sync
from whileai.version import __version__
from whileai.worlds import FaultPlan, World, WorldDefaults, world_defaults

P = ParamSpec("P")
T = TypeVar("T")

#: RunKnobs a resumed run may change: they set how fast a run goes, never what its rows say.
KNOBS_THAT_DO_NOT_CHANGE_ROWS = frozenset(
    {"max_concurrency", "progress_refresh_per_second", "fsync_rows", "cache", "budget_usd"}
)

#: Bumped whenever the same parameters would plan different situations or seeds.
PLAN_VERSION = 2

# -- one run ----------------------------------------------------------------------------


@attrs.define
class _RunState:
    run_id: str
    #: the rows finished so far: on disk with only their offsets and counts kept (output=),
    #: or in memory
    finished: FinishedRows
    #: the rollout keys a resumed run found on disk (not played again)
    done_keys: Collection[str]
    warnings: list[str]
    progress: RunProgress
    registry: Registry
    total: int
    #: every secret the run's backends hold, kept out of rows, warnings and reports
    redactor: Redactor = attrs.field(factory=Redactor)
    #: the rows of the batch a learning strategy is about to be told, while it plays
    batch: list[dict[str, Any]] | None = None
    #: a resumed run whose strategy learns: where each row found on disk starts, by key, so
    #: its batch can be told them again
    existing_at: dict[str, int] = attrs.field(factory=dict)
    #: the response cache's counters when the run started
    cache_start: dict[str, int] = attrs.field(factory=dict)
    #: where the rollouts run, and the cache counts its workers had handed back by then
    executor: Any = None
    executor_cache_start: dict[str, int] = attrs.field(factory=dict)
    #: prices the rows and backends; budget_usd, and why the run stopped short of its plan
    costs: RunCosts | None = None
    budget_usd: float | None = None
    #: the executor asks _within_budget before each job starts (in process)
    gated: bool = False
    backends: list[RunBackend] = attrs.field(factory=list)
    before: Mapping[int, Any] = attrs.field(factory=dict)
    stopped: str | None = None


def _within_budget(state: _RunState) -> bool:
    """Whether the run may start another rollout: False once its model calls have cost
    budget_usd (and from then on), saying so in ``state.stopped``."""
    if state.stopped:
        return False
    if state.budget_usd is None or state.costs is None:
        return True
    spent = state.costs.spent(state.backends, state.before)
    if spent is None or spent < state.budget_usd:
        return True
    # rollouts already started finish and are counted when the run ends, not here: a row that
    # finished may not have reached the driver yet
    state.stopped = f"budget_usd={state.budget_usd:g} reached: ${spent:.4f} spent"
    return False


def _check_budget_priced(call: _Call) -> None:
    """A budget in money needs a price for every model the run calls: said before any call."""
    costs = _run_costs(call)
    missing = [
        entry.label
        for entry in call.backends
        if costs.table.lookup(entry.label) is None
        and costs.table.lookup(getattr(entry.backend, "model", None)) is None
    ]
    uncounted = [e.label for e in call.backends if getattr(e.backend, "stats", None) is None]
    if uncounted:
        raise ValueError(
            f"advanced['budget_usd']={call.knobs.budget_usd!r} needs every backend the run "
            "calls to count its tokens (a backend.stats, whileai.backends.BackendStats, as the "
            "built-in backends keep); " + ", ".join(repr(m) for m in uncounted) + " keeps none"
        )
    if missing:
        raise ValueError(
            f"advanced['budget_usd']={call.knobs.budget_usd!r} needs a price for every model "
            f"the run calls; the price table (dated {costs.table.date}) has none for "
            + ", ".join(repr(m) for m in missing)
            + ": add them with advanced={'prices': {<model>: {'input': ..., 'output': ...}}} "
            "(USD per million tokens)"
        )


def _run_costs(call: _Call) -> RunCosts:
    models = call.resolved.models
    return RunCosts(call.prices, models.agent_label, models.user_label, models.agent_is_callable)


def _cache_counts(call: _Call) -> dict[str, int]:
    wrapper = call.registry.backend_wrapper
    return wrapper.cache.stats.as_dict() if isinstance(wrapper, CachingBackends) else {}


def _warn_once(warnings: list[str], message: str) -> None:
    if message not in warnings:
        warnings.append(message)


#: The usage counts the progress line adds up as a run's tokens.
_COUNTED_TOKENS = ("input_tokens", "output_tokens", "user_input_tokens", "user_output_tokens")


async def _execute(
    jobs: Sequence[Job],
    executor: Any,
    run: RunSpec,
    state: _RunState,
    knobs: RunKnobs,
) -> None:
    """Hand the jobs not yet done to the executor; each row it yields is streamed to disk,
    keyed for resume, counted and announced here, whichever process ran it."""
    pending = (
        jobs.without(state.done_keys)
        if isinstance(jobs, PlannedJobs)
        else [job for job in jobs if job.key not in state.done_keys]
    )
    if not pending:
        return
    if state.stopped:
        return
    watched = has_observers(state.registry.pm, "whileai_rollout_finished")
    rows = executor.run(pending, knobs.max_concurrency, run)
    try:
        async for row in rows:
            state.redactor.in_place(row)
            if state.costs is not None:
                state.costs.price_row(row)
            # one export serves the file (or data.rows) and the observers
            exported = state.finished.add(row)
            if state.batch is not None:
                state.batch.append(row)
            usage = row.get("usage") or {}
            tokens = 0
            for counted in _COUNTED_TOKENS:
                tokens += int(usage.get(counted) or 0)
            state.progress.advance(
                retries=int(usage.get("retries") or 0),
                error=bool(row.get("error")),
                tokens=tokens,
                waited_s=float(usage.get("waited_s") or 0.0),
            )
            if watched:
                # a streamed row is let go once written: observers may have it; one kept in
                # memory for data.rows gets a copy of its own to them
                for warning in notify(
                    state.registry.pm,
                    "whileai_rollout_finished",
                    run_id=state.run_id,
                    row=exported if state.finished.streams else dict(exported),
                    done=len(state.finished),
                    total=state.total,
                ):
                    _warn_once(state.warnings, warning)
            if state.budget_usd is not None and not state.gated and not _within_budget(state):
                # an executor that cannot be asked before each job: what it has not yielded
                # yet is cancelled (a resume plays it); the finished rows are on disk
                break
    finally:
        aclose = getattr(rows, "aclose", None)
        if aclose is not None:
            await aclose()
        for warning in getattr(executor, "warnings", None) or []:
            _warn_once(state.warnings, warning)


def _resume_plan(call: _Call, sha: str) -> dict[str, Any]:
    """What must match between a run and the run resuming it: how situations are drawn,
    and what the rollouts are played under (the agent, the turn limit, the fault rate)."""
    params, world = call.params, call.world
    return {
        # How situations are drawn from the seed: 2 since phrasings of a situation share its
        # seed. A run started under another version would resume with other situations.
        "plan_version": PLAN_VERSION,
        "seed": params.seed,
        "unique_situations": params.unique_situations,
        "requests_per_situation": params.requests_per_situation,
        "rollouts_per_request": params.rollouts_per_request,
        "repeat_policy": params.repeat_policy,
        "world": world.name,
        "dimensions": params.dimensions,
        "strategy": params.strategy if isinstance(params.strategy, str | None) else "object",
        "hard_share": params.hard_share,
        "system_prompt_sha": sha,
        "agent_model": call.resolved.agent_spec,
        "user_model": call.resolved.user_spec,
        "max_turns": params.max_turns,
        "max_tool_calls": params.max_tool_calls,
        "fault_rate": params.fault_rate,
        "sampling": params.sampling,
        "logprobs": params.logprobs,
        "judge": params.judge if isinstance(params.judge, str | None) else "object",
        "llm_grade": params.llm_grade,
        **{
            f"advanced.{name}": value
            for name, value in call.knobs.as_dict().items()
            if name not in KNOBS_THAT_DO_NOT_CHANGE_ROWS
        },
        "tasks": None
        if params.tasks is None
        else prompt_hash(
            json.dumps([t if isinstance(t, str) else t.get("prompt") for t in params.tasks])
        ),
    }


@attrs.frozen
class _Call:
    """What every run of one ``simulate()`` call shares, resolved once."""

    params: RunParams
    knobs: RunKnobs
    advanced: Mapping[str, Any]
    registry: Registry
    world: World
    defaults: WorldDefaults
    resolved: ResolvedModels
    graders: Graders
    backends: list[RunBackend]
    executor: _Executor
    embedder: Embedder = attrs.field(factory=Embedder)
    prices: PriceTable = attrs.field(factory=shipped_table)
    #: set when the call is a ``branch()``: the rows and the step they are replayed to
    branch: Branch | None = None
    #: the judge for failures the rules leave to the agent, when the run asked for one
    attributor: Attributor | None = None

    @property
    def system_prompt(self) -> str:
        return self.params.prompt


@attrs.define
class _Opened:
    """The output file as the run found it: the rows already there and the run they belong
    to (resume), or a fresh run id."""

    output: str | None
    run_id: str
    created: str
    #: the rows already in the output (resume), counted as they were read
    existing: ExistingRows = attrs.field(factory=ExistingRows)
    #: the exclusive lock on the output, held until the run closes
    lock: OutputLock | None = None


@attrs.define
class _Planned:
    """The run's situations, and what the report says about how they were chosen. A run that
    searches starts with none: its strategy proposes them batch by batch (``search``)."""

    plans: list[PlannedSituation]
    strategy: str
    dimensions: dict[str, list[Any]]
    search: Search | None = None
    #: every situation's vector, by scenario id (memory only)
    vectors: SituationVectors = attrs.field(factory=SituationVectors)
    #: prompts already on disk (resume), kept as they were
    known_prompts: dict[str, str] = attrs.field(factory=dict)
    #: which run of ``runs=N`` this is (0 for the first): later runs draw fresh rollout seeds
    run_index: int = 0
    #: extra repeats each split group got under repeat_policy="rl", and those the budget cut
    extra: Counter[str] = attrs.field(factory=Counter)
    cut: dict[str, int] = attrs.field(factory=dict)

    def rollouts(self, params: RunParams) -> dict[str, Any]:
        """Where the rollouts went, per group: planned, extra, cut by budget."""
        groups = {
            plan.scenario_id: {
                "planned": params.rollouts_per_request,
                "extra": self.extra.get(plan.scenario_id, 0),
                "cut_by_budget": self.cut.get(plan.scenario_id, 0),
            }
            for plan in self.plans
        }
        return {
            "budget": params.budget,
            "planned": sum(g["planned"] for g in groups.values()),
            "extra": sum(self.extra.values()),
            "cut_by_budget": sum(self.cut.values()),
            "groups": groups,
        }

    def planned_rollouts(self, params: RunParams) -> int:
        if self.search is None:
            return len(self.plans) * params.rollouts_per_request
        situations = params.unique_situations * params.requests_per_situation
        return situations * params.rollouts_per_request


async def _run_once(
    call: _Call,
    plans: list[PlannedSituation] | None,
    output: str | None,
    replayed_from: str | None,
    run_index: int = 0,
) -> tuple[Simulation, list[PlannedSituation]]:
    """One run, in the order a reader follows it: open the output (resume), plan the
    situations, describe the run, start it, execute its jobs (and the extra repeats), report
    and close."""
    warnings = list(call.resolved.warnings)
    sha = prompt_hash(call.system_prompt)
    opened = _open(call, output, sha, warnings)
    try:
        planned = await _plan(call, plans, opened, replayed_from, warnings)
        planned.run_index = run_index
        ctx = _context(call, opened.run_id, sha)
        markers, marker_problems = MarkerSet.from_registry(call.registry)
        warnings.extend(marker_problems)
        # In process, the rows are graded by the run's own live judges, world and markers.
        runs_on = call.executor.executor or InProcessExecutor(
            JobRunner(
                ctx,
                call.graders.grader,
                call.graders.llm_grader,
                markers,
                warnings=warnings,
                attributor=call.attributor,
            )
        )
        total = planned.planned_rollouts(call.params)
        record = _record(call, opened, planned, sha, total, replayed_from)
        # what the measurements read a marker's mean with, on the rows in memory or on disk
        record.metadata["marker_bounds"] = markers.recorded()

        def simulation(finished: FinishedRows) -> Simulation:
            record.metadata["model_version"] = finished.tally.model_version
            situations = {p.scenario_id: p.situation for p in planned.plans}
            trajectories, rows = finished.handed_back(situations, planned.vectors)
            return Simulation(
                trajectories=trajectories,
                metadata=record.metadata,
                system_prompts={sha: call.system_prompt},
                warnings=warnings,
                degraded=list(call.resolved.degraded),
                report_fields=record.report_fields,
                output=output,
                registry=call.registry,
                rows=rows,
                # rows streamed to disk are counted once, here; rows in memory are counted
                # again from data.trajectories, as they are when the report is read
                tally=finished.tally if finished.streams else None,
            )

        state = _start(call, opened, planned, record, simulation, total, warnings)
        before = snapshot(call.backends)
        state.cache_start = _cache_counts(call)
        state.executor = runs_on
        state.executor_cache_start = dict(getattr(runs_on, "cache_counts", None) or {})
        state.costs = _run_costs(call)
        state.budget_usd = call.knobs.budget_usd
        state.backends = call.backends
        state.before = before
        if state.budget_usd is not None and isinstance(runs_on, InProcessExecutor):
            # no rollout starts once the budget is spent; those already started finish
            runs_on.may_start = lambda: _within_budget(state)
            state.gated = True
        watcher = asyncio.ensure_future(
            _watch_retries(
                state.progress, call.backends, before, 1.0 / call.knobs.progress_refresh_per_second
            )
        )
        try:
            with state.progress.shown(lambda: _what_is_kept(output, state.progress.done)):
                await _execute_plan(
                    call, planned, state, runs_on, _describe(call, ctx), replayed_from
                )
                await _extra_repeats(call, planned, state, record, runs_on, ctx, replayed_from)
                state.progress.backend_retries(retries_so_far(call.backends, before))
        finally:
            watcher.cancel()
            if state.finished.writer is not None:
                state.finished.writer.close()
        data = _report(call, planned, record, state, before, simulation, warnings)
        _close(call, opened, data, warnings)
        return data, planned.plans
    finally:
        if opened.lock is not None:
            opened.lock.release()


def _what_is_kept(output: str | None, done: int) -> str:
    """What a run stopped part way keeps of its rollouts, and how it goes on."""
    if output is None:
        return (
            "its rows were held in memory only (no output=) and are gone; a run given output= "
            "keeps each row on disk as it finishes"
        )
    return f"the {done} finished are in output={output!r}; {RESUME_HINT} with the rest"


def _run_fault_plan(call: _Call) -> FaultPlan | None:
    """The fault plan the run hands each episode: the caller's, when ``fault_rate=`` or
    ``advanced["fault_kinds"]`` says anything; otherwise None, so the world's own plan (a
    world configured with one, as ``"shop:timeout"`` is) applies."""
    if call.params.fault_rate is None and "fault_kinds" not in call.advanced:
        return None
    return FaultPlan(kinds=call.knobs.fault_kinds, rate=call.params.fault_rate)


def _fault_report(call: _Call) -> tuple[FaultPlan, float, str]:
    """The plan that fires, its rate, and the report's sentence saying which applied."""
    world, given = call.world, _run_fault_plan(call)
    own = getattr(world, "fault_plan", None)
    plan = given or (own if isinstance(own, FaultPlan) else None) or FaultPlan()
    rate = plan.effective_rate(world.default_fault_rate)
    if given is not None and call.params.fault_rate is not None:
        note = (
            f"fault_rate={call.params.fault_rate} given: the fault plan fires at it (the "
            f"world's default_fault_rate, {world.default_fault_rate}, applies to plans with no "
            "rate)"
        )
    elif given is None and isinstance(own, FaultPlan):
        note = (
            f"no fault_rate or fault_kinds given: the world's own fault plan applies "
            f"({', '.join(own.kinds)} at {rate})"
        )
    else:
        note = (
            "no fault_rate given: the fault plan has no rate of its own, so it fires at the "
            f"world's default_fault_rate {world.default_fault_rate}"
        )
    return plan, rate, note


def _open(call: _Call, output: str | None, sha: str, warnings: list[str]) -> _Opened:
    """Take the output for this run and read what it already holds: refuse to overwrite a
    run, refuse a second writer, or resume a run when its plan matches and its rows are its
    own (its run id, its rows, each once)."""
    opened = _Opened(
        output, uuid.uuid4().hex[:12], dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    )
    if output is None:
        return opened
    opened.lock = OutputLock.take(output)
    try:
        _read_existing(call, opened, output, sha, warnings)
    except BaseException:
        opened.lock.release()
        raise
    return opened


def _read_existing(
    call: _Call, opened: _Opened, output: str, sha: str, warnings: list[str]
) -> None:
    params = call.params
    assert opened.lock is not None
    removed = (
        remove_stale_temporaries(output) if may_hold_stale_temporaries(output, opened.lock) else 0
    )
    if removed:
        warnings.append(
            f"removed {counted(removed, 'temporary file')} a killed run left beside {output}"
        )
    side = read_sidecar(sidecar_path(output))
    # one row at a time: a resumed run of a million rows holds their counts, not the rows
    rows = iter_jsonl(
        output, what="output", tail="cut" if params.resume else "drop", missing_ok=True
    )
    if not params.resume or side is None:
        on_disk = sum(1 for _ in rows)
        if (on_disk or side) and not params.resume:
            raise FileExistsError(
                f"output={output!r} already holds a run ({counted(on_disk, 'row')}); pass "
                "resume=True "
                "to continue it, or choose another path"
            )
        if on_disk:
            raise ValueError(
                f"resume=True, but {output!r} has {counted(on_disk, 'row')} and no sidecar "
                f"({sidecar_path(output).name}) saying which run wrote them, so nothing shows "
                "they belong to this one; restore the sidecar, or start a fresh output"
            )
        return
    plan = _resume_plan(call, sha)
    diff = resume_mismatch(side.get("metadata", {}).get("resume_plan", {}), plan)
    if diff:
        raise ValueError(
            f"resume=True, but {output!r} was started with other settings: " + "; ".join(diff)
        )
    opened.run_id = str(side["metadata"].get("run_id", opened.run_id))
    opened.created = str(side["metadata"].get("created", opened.created))
    on_disk = strangers = 0
    for row, _line, offset in rows:
        on_disk += 1
        if (row.get("lineage") or {}).get("run_id") != opened.run_id:
            strangers += 1
        elif not strangers:
            opened.existing.add(row, offset)
    if strangers:
        raise ValueError(
            f"resume=True, but {strangers} of the {counted(on_disk, 'row')} in {output!r} "
            f"{agreeing(strangers, 'belongs', 'belong')} to another run than {opened.run_id} "
            f"(its sidecar's); {agreeing(strangers, 'it', 'they')} would mix into this one: "
            f"remove {agreeing(strangers, 'it', 'them')}, or start a fresh output"
        )
    if len(opened.existing) < on_disk:
        warnings.append(
            f"{counted(on_disk - len(opened.existing), 'duplicate row')} in {output} ignored"
        )


async def _plan(
    call: _Call,
    plans: list[PlannedSituation] | None,
    opened: _Opened,
    replayed_from: str | None,
    warnings: list[str],
) -> _Planned:
    """The run's situations: replayed from ``tasks=`` or from the first run of the call,
    or chosen by the strategy and worded by the writer."""
    params, world = call.params, call.world
    known = opened.existing.prompts
    if plans is not None:
        dimensions = params.dimensions or {k: list(v) for k, v in world.dimensions().items()}
        planned = _Planned(plans, f"replay of run {replayed_from}", dimensions)
    elif call.branch is not None:
        plans = plan_from_branch(params, world, call.branch)
        planned = _Planned(plans, f"branch at step {call.branch.at}", params.dimensions or {})
    elif params.tasks is not None:
        plans = plan_from_tasks(params, world, params.tasks)
        planned = _Planned(plans, "tasks= (replayed)", params.dimensions or {})
    else:
        search = Search.open(
            params,
            call.knobs,
            world,
            call.registry,
            call.resolved.writer,
            call.defaults.writer_prompt,
            warnings,
            call.embedder,
        )
        return _Planned([], search.name, search.dimensions, search, search.vectors, known)
    # nothing plays these by their vectors: only data.trajectories reads them
    await call.embedder.add(
        planned.vectors,
        ((p.scenario_id, p.situation.prompt, p.spec) for p in planned.plans),
        warnings,
        now=False,
    )
    planned.known_prompts = known
    return planned


async def _execute_plan(
    call: _Call,
    planned: _Planned,
    state: _RunState,
    runs_on: Any,
    run: RunSpec,
    replayed_from: str | None,
) -> None:
    """Play the planned situations; a run that searches plays them batch by batch, telling
    its strategy each batch's rows before it asks for the next."""
    repeats = range(call.params.rollouts_per_request)
    search = planned.search
    if search is None:
        jobs = jobs_for(
            planned.plans,
            repeats,
            call.params.seed,
            replayed_from=replayed_from,
            run_index=planned.run_index,
        )
        await _execute(jobs, runs_on, run, state, call.knobs)
        return
    while not search.done and not state.stopped:
        batch = await search.next_batch(planned.known_prompts)
        if not batch:
            break
        jobs = jobs_for(batch, repeats, call.params.seed, replayed_from=replayed_from)
        # only a strategy that learns is told rows: only then are a batch's rows held
        state.batch = [] if search.learns else None
        await _execute(jobs, runs_on, run, state, call.knobs)
        if state.batch is not None:
            search.tell(_batch_rows(state, jobs))
        state.batch = None
    planned.plans = list(search.plans)


def _batch_rows(state: _RunState, jobs: PlannedJobs) -> list[dict[str, Any]]:
    """The batch's rows a strategy is told, in plan order: those it played, and those a
    resumed run found on disk (read back from there)."""
    found = [state.existing_at[k] for k in jobs.job_keys() if k in state.existing_at]
    rows = [*state.finished.at(found), *(state.batch or [])] if found else list(state.batch or [])
    return sorted(rows, key=plan_place)


def _context(call: _Call, run_id: str, sha: str) -> RolloutContext:
    """What every rollout of the run shares."""
    params, knobs = call.params, call.knobs
    agent_sampling = Sampling.coerce(
        {
            "temperature": knobs.agent_temperature,
            "max_tokens": knobs.agent_max_tokens,
            **(params.sampling or {}),
        }
    )
    return RolloutContext(
        run_id=run_id,
        world=call.world,
        models=call.resolved.models,
        system_prompt=call.system_prompt,
        system_prompt_sha=sha,
        system_prompt_head=call.system_prompt[: knobs.system_prompt_head_chars],
        agent_sampling=agent_sampling,
        user_sampling=Sampling(
            temperature=knobs.user_temperature, max_tokens=knobs.user_max_tokens
        ),
        declared_sampling=params.sampling,
        fault_plan=_run_fault_plan(call),
        max_turns=params.max_turns,
        max_tool_calls=params.max_tool_calls,
        max_tool_rounds=knobs.max_tool_rounds,
        logprobs=params.logprobs,
        user_persona=knobs.user_persona,
        user_patience=knobs.user_patience,
        user_prompt=call.defaults.user_prompt,
        user_context_chars=knobs.user_context_chars,
    )


def _describe(call: _Call, ctx: RolloutContext) -> RunSpec:
    """The run as plain data, for an executor's workers to rebuild."""
    params, resolved = call.params, call.resolved
    return run_spec(
        ctx,
        world=call.knobs.world,
        world_options=call.knobs.world_options,
        attribution_model=call.knobs.attribution_model,
        registry=call.executor.registry_spec or RegistrySpec.of(call.registry),
        agent_model=params.agent_model
        if resolved.models.agent_is_callable
        else resolved.agent_spec,
        agent_label=resolved.agent_spec,
        user_model=resolved.user_spec,
        user_label=resolved.user_spec,
        judge=params.judge,
        llm_grade=params.llm_grade,
        judge_model=resolved.judge_spec,
        concurrency=call.knobs.max_concurrency,
    )


@attrs.frozen
class _Record:
    """The run's metadata (sidecar, rows' provenance) and its report's fields."""

    metadata: dict[str, Any]
    report_fields: dict[str, Any]


def _record(
    call: _Call,
    opened: _Opened,
    planned: _Planned,
    sha: str,
    total: int,
    replayed_from: str | None,
) -> _Record:
    params, knobs, world, resolved = call.params, call.knobs, call.world, call.resolved
    grader, llm_grader = call.graders.grader, call.graders.llm_grader
    grader_name = grader.name if grader is not None else f"world:{world.name}"
    writer_model = _writer_model(call, planned)
    fault_plan, fault_rate, world_note = _fault_report(call)
    metadata: dict[str, Any] = {
        "run_id": opened.run_id,
        "created": opened.created,
        "whileai_version": __version__,
        "agent_model": resolved.agent_spec,
        "model_version": None,
        "writer_model": writer_model,
        "user_model": resolved.user_spec if params.max_turns > 1 else None,
        "judge": grader_name,
        #: the model the judge runs on, when it runs on one
        "judge_model": _judge_model(call),
        "world": {"name": world.name, "version": getattr(world, "version", None)},
        "system_prompt_sha": sha,
        "planned_rollouts": total,
        "resume_plan": _resume_plan(call, sha),
        "replayed_from_run": replayed_from,
    }
    report_fields: dict[str, Any] = {
        "run_id": opened.run_id,
        "mode": params.mode,
        "budget": params.budget,
        "seed": params.seed,
        "unique_situations": _situation_count(call, planned),
        "requests_per_situation": params.requests_per_situation,
        "repeats": params.rollouts_per_request,
        "repeat_policy": params.repeat_policy,
        "hard_share": params.hard_share,
        "fault_rate": fault_rate,
        "strategy": planned.strategy,
        "dimensions": planned.dimensions,
        "arm_weights": params.arm_weights,
        "simulator": resolved.simulator,
        "writer_model": writer_model,
        "agent_model": resolved.agent_spec,
        "user_model": resolved.user_spec if params.max_turns > 1 else "none (single message)",
        "grader": grader_name,
        "llm_grader": llm_grader.name if llm_grader is not None else None,
        "sampling": params.sampling,
        "max_turns": params.max_turns,
        "max_tool_calls": params.max_tool_calls,
        "logprobs": params.logprobs,
        "system_prompt_sha": sha,
        "world": {
            "name": world.name,
            "version": getattr(world, "version", None),
            "default_fault_rate": world.default_fault_rate,
            "fault_kinds": list(fault_plan.kinds),
        },
        "world_note": world_note,
        "advanced": dict(call.advanced),
        "knobs": knobs.as_dict(),
        "model_notes": list(resolved.notes) + call.graders.notes,
        "backends": {},
        "executor": call.executor.label,
        "search": None,
        "hard_share_realised": None,
        "rollouts": None,
    }
    return _Record(metadata, report_fields)


def run_redactor(call: _Call) -> Redactor:
    """The run's secrets, from every backend it uses that lists its own (``secrets()``) and
    from the model specs it was given (a URL's credentials and secret query values)."""
    found: list[str] = []
    for entry in call.backends:
        listed = getattr(entry.backend, "secrets", None)
        if callable(listed):
            found.extend(str(s) for s in listed() if s)
    for spec in (call.params.agent_model, call.params.user_model, call.params.simulator):
        if isinstance(spec, str):
            found.extend(url_secrets(spec))
    return Redactor(found)


def _judge_model(call: _Call) -> str | None:
    graders = (call.graders.grader, call.graders.llm_grader)
    if any(g is not None and g.backend is not None for g in graders):
        return call.resolved.judge_spec
    return None


def _writer_model(call: _Call, planned: _Planned) -> str:
    """Who wrote the situations: read off the plans once they exist; before a search has
    written any, the writer it will use."""
    if planned.search is not None and not planned.plans:
        return call.resolved.writer.label
    return ", ".join(sorted({p.situation.writer_model for p in planned.plans}))


def _situation_count(call: _Call, planned: _Planned) -> int:
    if planned.search is not None and not planned.plans:
        return call.params.unique_situations
    return len({p.index for p in planned.plans})


def _start(
    call: _Call,
    opened: _Opened,
    planned: _Planned,
    record: _Record,
    simulation: Callable[[FinishedRows], Simulation],
    total: int,
    warnings: list[str],
) -> _RunState:
    """Open the row writer, count the rows a resumed run already has (and let them go),
    write the incomplete sidecar and announce the run."""
    output = opened.output
    writer = RowWriter(output, fsync=bool(call.knobs.fsync_rows)) if output is not None else None
    existing = opened.existing
    finished = FinishedRows(writer, existing)
    n_existing = len(existing)
    learns = planned.search is not None and planned.search.learns
    if output is not None:
        write_sidecar(
            sidecar_path(output),
            simulation(finished).sidecar(complete=False),
            durable=bool(call.knobs.fsync_rows),
        )
    for warning in notify(
        call.registry.pm,
        "whileai_run_started",
        run_id=opened.run_id,
        knobs=record.report_fields,
        total=total,
    ):
        _warn_once(warnings, warning)
    progress = RunProgress(total, refresh_per_second=call.knobs.progress_refresh_per_second)
    progress.done += n_existing
    return _RunState(
        opened.run_id,
        finished,
        existing.keys,
        warnings,
        progress,
        call.registry,
        total,
        run_redactor(call),
        # a strategy that learns is told the rows of its batches, these among them
        existing_at=existing.where(writer.path) if learns and writer is not None else {},
    )


async def _extra_repeats(
    call: _Call,
    planned: _Planned,
    state: _RunState,
    record: _Record,
    runs_on: Any,
    ctx: RolloutContext,
    replayed_from: str | None,
) -> None:
    """Under repeat_policy="rl", more repeats for the groups whose repeats disagree."""
    if call.params.repeat_policy != "rl" or call.knobs.adaptive_extra_repeats <= 0:
        return
    if state.stopped:
        return
    extra, cut = _extra_jobs(
        call.params, call.knobs, planned.plans, state, replayed_from, planned.run_index
    )
    planned.extra = Counter(job.scenario_id for job in extra)
    planned.cut = cut
    if not extra:
        return
    state.total += len(extra)
    state.progress.grow(len(extra))
    record.metadata["planned_rollouts"] = state.total
    await _execute(extra, runs_on, _describe(call, ctx), state, call.knobs)


def _report(
    call: _Call,
    planned: _Planned,
    record: _Record,
    state: _RunState,
    before: Mapping[int, Any],
    simulation: Callable[[FinishedRows], Simulation],
    warnings: list[str],
) -> Simulation:
    """The finished run: where its situations came from, what each backend did, its
    warnings, rows in plan order (with their situation's vector, in memory)."""
    fields = record.report_fields
    fields["unique_situations"] = _situation_count(call, planned)
    fields["rollouts"] = planned.rollouts(call.params)
    fields["writer_model"] = record.metadata["writer_model"] = _writer_model(call, planned)
    if planned.search is not None:
        outcome = planned.search.outcome()
        fields["search"] = outcome.as_dict()
        fields["hard_share_realised"] = outcome.hard_share_realised
        done = len(planned.plans) * call.params.rollouts_per_request
        if outcome.stopped_short and record.metadata["planned_rollouts"] > done:
            record.metadata["planned_rollouts"] = done
    usage = usage_report(call.backends, before)
    if state.costs is not None:
        fields["cost"] = state.costs.report(call.backends, before)
        if state.costs.unpriced:
            _warn_once(
                warnings,
                "No price for "
                + ", ".join(repr(m) for m in state.costs.unpriced)
                + " in the price table (dated "
                + str(state.costs.table.date)
                + "), so their cost is None, not 0: add them with advanced={'prices': {...}}.",
            )
    if state.stopped:
        state.stopped = (
            f"{state.stopped}; {len(state.finished)} of {counted(state.total, 'rollout')} finished"
        )
    fields["stopped"] = state.stopped
    fields["failures"] = state.finished.tally.owner_shares()
    if state.stopped:
        _warn_once(
            warnings,
            f"The run stopped short: {state.stopped}; the finished rows are kept, and "
            "resume=True with a larger budget_usd plays the rest.",
        )
    wrapper = call.registry.backend_wrapper
    if isinstance(wrapper, CachingBackends):
        # this run's share of what the cache did (a call with runs=N shares one cache)
        cached = wrapper.report()
        for name, start in state.cache_start.items():
            cached[name] -= start
        # what workers in other processes (or runners the executor rebuilt) counted
        for name, value in (getattr(state.executor, "cache_counts", None) or {}).items():
            if name in cached:
                cached[name] += value - state.executor_cache_start.get(name, 0)
        fields["cache"] = cached
        if "unusable" in cached:
            _warn_once(
                warnings,
                f"The response cache could not be used ({cached['unusable']}); every model "
                "call went to the model.",
            )
    record.report_fields["backends"] = usage
    for sentence in wait_warnings(usage):
        _warn_once(warnings, sentence[0].upper() + sentence[1:] + ".")
    redact = state.redactor
    if redact:
        warnings[:] = [redact.text(w) for w in warnings]
        record.report_fields.update(redact.value(dict(record.report_fields)))
        record.metadata.update(redact.value(dict(record.metadata)))
    return simulation(state.finished)


def _close(call: _Call, opened: _Opened, data: Simulation, warnings: list[str]) -> None:
    """Mark the sidecar complete (unless the run stopped short of its plan, which a resume
    continues) and announce the finished run."""
    observed = has_observers(call.registry.pm, "whileai_run_finished")
    if opened.output is None and not observed:
        return
    # one report for the sidecar and the observers: each computes pass@1 over every task
    report = data.report()
    if opened.output is not None:
        sidecar = data.sidecar(complete=not report.stopped, report=report, plain=False)
        write_sidecar(sidecar_path(opened.output), sidecar, durable=bool(call.knobs.fsync_rows))
    if not observed:
        # the report as plain data walks a table of every task: not for no one
        return
    for warning in notify(
        call.registry.pm,
        "whileai_run_finished",
        run_id=opened.run_id,
        report=report.to_dict(),
    ):
        _warn_once(warnings, warning)


async def _watch_retries(
    progress: RunProgress,
    backends: list[RunBackend],
    before: Mapping[int, Any],
    interval: float,
) -> None:
    """Keep the progress line's retry count current while rollouts wait on a backend, so a
    run held up by rate limits shows it before any of its rollouts finishes."""
    while True:
        await asyncio.sleep(interval)
        progress.backend_retries(retries_so_far(backends, before))


def _extra_jobs(
    params: RunParams,
    knobs: RunKnobs,
    plans: list[PlannedSituation],
    state: _RunState,
    replayed_from: str | None,
    run_index: int,
) -> tuple[list[Job], dict[str, int]]:
    """Under repeat_policy="rl", more repeats for groups whose repeats disagree, the most
    split first (pass rate nearest one half, where a grouped update learns most), within
    budget; and per group the extra repeats the budget cut."""
    split = state.finished.tally.split_groups()
    room = None if params.budget is None else params.budget - state.total
    base = params.rollouts_per_request
    extra: list[Job] = []
    cut: dict[str, int] = {}
    order = sorted(
        (plan for plan in plans if plan.scenario_id in split),
        key=lambda plan: abs(split[plan.scenario_id] - 0.5),
    )
    for plan in order:
        wanted = count = knobs.adaptive_extra_repeats
        if room is not None:
            count = max(0, min(count, room - len(extra)))
        if count < wanted:
            cut[plan.scenario_id] = wanted - count
        if count <= 0:
            continue
        extra.extend(
            jobs_for(
                [plan],
                range(base, base + count),
                params.seed,
                replayed_from=replayed_from,
                run_index=run_index,
            )
        )
    return extra, cut


def _run_output(output: str | None, run: int, runs: int) -> str | None:
    if output is None or runs == 1:
        return output
    from pathlib import Path

    path = Path(output)
    suffix = path.suffix or ".jsonl"
    return str(path.with_name(f"{path.stem}-run{run + 1}{suffix}"))


@attrs.frozen
class _Executor:
    """``executor=`` resolved: None for in-process, with the report's label."""

    executor: Any
    label: str
    #: the registry as workers rebuild it (checked once, up front)
    registry_spec: RegistrySpec | None = None


def _refuse_unknown_keywords(
    name: str, given: Mapping[str, Any], accepted: Collection[str]
) -> None:
    """A keyword the call does not take, refused under the call's own name, with the names it
    may have meant (``uniq`` is a typo of ``unique``)."""
    for key in given:
        if key not in accepted:
            raise TypeError(
                f"{name}() got an unexpected keyword argument {key!r}" + did_you_mean(key, accepted)
            )


def _keywords_checked(
    fn: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """``fn`` (a coroutine function) refusing a mistyped keyword as its synchronous twin
    does, with the names it may have meant, when the call is awaited."""
    accepted = tuple(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        _refuse_unknown_keywords(fn.__name__, kwargs, accepted)
        return await fn(*args, **kwargs)

    return run


@_keywords_checked
async def asimulate(
    system_prompt: str | None = None,
    *,
    unique_situations: int | None = None,
    requests_per_situation: int | None = None,
    rollouts_per_request: int | None = None,
    fault_rate: float | None = None,
    mode: str = "eval",
    budget: int | None = None,
    seed: int = 0,
    hard_share: float = 0.25,
    strategy: Any = None,
    dimensions: Mapping[str, Sequence[Any]] | None = None,
    arm_weights: Mapping[str, float] | None = None,
    simulator: Any = None,
    agent_model: Any = None,
    user_model: Any = None,
    sampling: Mapping[str, Any] | None = None,
    max_turns: int = 4,
    max_tool_calls: int = 8,
    repeat_policy: str | None = None,
    judge: Any = None,
    llm_grade: bool = False,
    logprobs: bool = False,
    tasks: Sequence[Any] | None = None,
    runs: int = 1,
    output: str | None = None,
    resume: bool = False,
    advanced: Mapping[str, Any] | None = None,
    registry: Registry | None = None,
    executor: Any = None,
    policy: str | None = None,
    unique: int | None = None,
    phrasings: int | None = None,
    n: int | None = None,
    repeats: int | None = None,
    risk: float | None = None,
) -> Any:
    """``simulate`` for code already inside an event loop: the same parameters, awaitable."""
    given = {k: v for k, v in locals().items() if k not in ("advanced", "registry")}
    alias_values = {a: given.pop(a) for a in list(given) if a in ALIASES}
    spelled = spellings(given, alias_values)
    return await _simulate_call(
        merge_aliases(given, alias_values), advanced, registry, spelled=spelled
    )


@_keywords_checked
async def abranch(
    source: Any,
    at: int,
    *,
    agent_model: Any = None,
    repeats: int = 1,
    system_prompt: str | None = None,
    sampling: Mapping[str, Any] | None = None,
    user_model: Any = None,
    seed: int = 0,
    judge: Any = None,
    llm_grade: bool = False,
    fault_rate: float | None = None,
    max_turns: int | None = None,
    max_tool_calls: int | None = None,
    output: str | None = None,
    resume: bool = False,
    advanced: Mapping[str, Any] | None = None,
    registry: Registry | None = None,
    executor: Any = None,
) -> Simulation:
    """``branch`` for code already inside an event loop: the same parameters, awaitable."""
    read = read_source(source)
    check_rows(read.rows, at)
    given = {
        "agent_model": agent_model,
        "rollouts_per_request": repeats,
        "system_prompt": system_prompt,
        "sampling": sampling,
        "user_model": user_model,
        "seed": seed,
        "judge": judge,
        "llm_grade": llm_grade,
        "fault_rate": fault_rate,
        "max_turns": max_turns,
        "max_tool_calls": max_tool_calls,
        "output": output,
        "resume": resume,
        "executor": executor,
        "simulator": "template",
    }
    params, knobs = inherited(read, given, dict(advanced or {}))
    for name, default in (("max_turns", 4), ("max_tool_calls", 8)):
        if params[name] is None:
            params[name] = default
    params["tasks"] = read.rows
    result = await _simulate_call(params, knobs, registry, Branch(tuple(read.rows), at))
    assert isinstance(result, Simulation)
    return result


async def _simulate_call(
    given: Mapping[str, Any],
    advanced: Mapping[str, Any] | None,
    registry: Registry | None,
    branch: Branch | None = None,
    *,
    spelled: Mapping[str, str] | None = None,
) -> Simulation | list[Simulation]:
    params = resolve_params(given, spelled)
    knobs = RunKnobs.from_advanced(advanced)
    prices = price_table(knobs.prices)
    reg = get_registry(registry)
    cache = caching(knobs.cache)
    if cache is not None:
        # every backend the run resolves (agent, user, writer, judge) answers from the cache
        reg = reg.with_backend_wrapper(cache)
    world = reg.resolve("world", knobs.world, **knobs.world_options)
    # What the caller left to the world: the deploy prompt, the difficulty dimension.
    defaults = world_defaults(world)
    params = params.for_world(defaults)
    knobs = knobs.for_world(defaults)
    # Checked before any model is opened: a run a worker could not rebuild fails here.
    chosen, executor_label, built_executor = resolve_executor(params.executor, reg)
    registry_spec = None
    if chosen is not None:
        registry_spec = RegistrySpec.of(reg)
        unshippable = ship_problems(params.agent_model, params.user_model, registry_spec)
        check_shippable(unshippable, executor_label)
    executor = _Executor(chosen, executor_label, registry_spec)
    backends: list[RunBackend] = []
    results: list[Simulation] = []
    try:
        resolved = resolve_models(params, reg, concurrency=knobs.max_concurrency, backends=backends)
        graders = resolve_graders(
            params.judge,
            params.llm_grade,
            reg,
            judge_model=resolved.judge_spec,
            judge_why=resolved.judge_why,
        )
        for grader in (graders.grader, graders.llm_grader):
            if grader is not None and grader.backend is not None:
                label = str(resolved.judge_spec or getattr(grader.backend, "name", "judge"))
                add_backend(backends, label, grader.backend, "judge", opened=True)
        call = _Call(
            params,
            knobs,
            dict(advanced or {}),
            reg,
            world,
            defaults,
            resolved,
            graders,
            backends,
            executor,
            _embedder(knobs, reg, backends),
            prices,
            branch,
            open_attributor(knobs.attribution_model, reg, backends),
        )
        if knobs.budget_usd is not None:
            _check_budget_priced(call)
        plans: list[PlannedSituation] | None = None
        first_run: str | None = None
        for run in range(params.runs):
            data, plans = await _run_once(
                call, plans, _run_output(params.output, run, params.runs), first_run, run
            )
            if first_run is None:
                first_run = data.metadata["run_id"]
            results.append(data)
    finally:
        # Closed also when the run fails: an HTTP backend's connections, a local model's
        # worker threads.
        problems = await close_backends(backends)
        if built_executor:
            problems += await close_executor(chosen)
    for data in results:
        for problem in problems:
            _warn_once(data.warnings, problem)
    return results[0] if params.runs == 1 else results


def _embedder(knobs: RunKnobs, registry: Registry, backends: list[RunBackend]) -> Embedder:
    """``advanced["embedding_model"]`` as an Embedder: offline when unset; else the backend
    its spec names, which must be able to ``embed`` (the run closes it)."""
    spec = knobs.embedding_model
    if spec is None:
        return Embedder()
    backend = registry.resolve("backend", spec)
    add_backend(backends, spec, backend, "embedder", opened=True)
    if not callable(getattr(backend, "embed", None)):
        raise ValueError(
            f"advanced['embedding_model']={spec!r} names a backend that cannot embed (no "
            "embed(texts)); name an OpenAI-compatible endpoint, or leave it unset for the "
            "offline vectors"
        )
    return Embedder(backend, spec)


def _blocking(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The synchronous twin of ``fn``, with its exact signature (for readers, IDEs, mypy).
    A keyword ``fn`` does not take is refused under the twin's own name, with the names it
    may have meant: ``simulate(uniq=3)`` is a typo of ``unique``, not an error of
    ``asimulate()``, which the caller never called."""
    accepted = tuple(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        _refuse_unknown_keywords(run.__name__, kwargs, accepted)
        return run_sync(fn(*args, **kwargs))

    return run


simulate = _blocking(asimulate)
branch = _blocking(abranch)
branch.__name__ = branch.__qualname__ = "branch"
branch.__doc__ = """Replay saved trajectories exactly up to step ``at`` (the same world state,
tool results, faults and user turns), then let ``agent_model`` (or the same one under another
prompt, sampling or seed) decide again from there, ``repeats`` times; the rows are graded like
any other and say ``lineage.branched_from`` and ``lineage.branch_step``.

``source`` is a run (what simulate() returned), a rows file (its sidecar supplies the world,
fault plan, system prompt and limits the rows were recorded under), a list of rows, or one row.
See docs/branching.md.
"""
simulate.__name__ = simulate.__qualname__ = "simulate"
simulate.__doc__ = """Write situations, roll the agent out against a simulated user and a mock
world with faults, grade every episode, and return the run (a list of runs when ``runs`` > 1).

Every parameter, its default and its alias is in docs/parameters.md; ``asimulate`` is the
same call for code already inside an event loop.
"""
