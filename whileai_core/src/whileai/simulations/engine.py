"""``simulate()``: resolve the knobs, plan situations, run rollouts concurrently, grade them,
stream rows to disk, and return the run object.

The plan is deterministic given the parameters: situation ``i``, phrasing ``p`` and repeat
``r`` always get the same key, seed and situation, which is what lets ``resume=True`` continue
a killed run without duplicating or losing a row.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

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
from whileai.graders import Graders, MarkerSet, resolve_graders
from whileai.registry import Registry, get_registry, notify
from whileai.schema.export import export_row
from whileai.schema.files import (
    RowWriter,
    read_jsonl,
    read_sidecar,
    resume_mismatch,
    sidecar_path,
    write_sidecar,
)
from whileai.schema.records import prompt_hash
from whileai.simulations.data import Simulation
from whileai.simulations.defaults import RunKnobs
from whileai.simulations.executors import (
    InProcessExecutor,
    JobRunner,
    RegistrySpec,
    RunSpec,
    check_shippable,
    close_executor,
    resolve_executor,
    ship_problems,
)
from whileai.simulations.models import ResolvedModels, resolve_models
from whileai.simulations.params import (
    ALIASES,
    RunParams,
    merge_aliases,
    resolve_params,
)
from whileai.simulations.plan import (
    PlannedSituation,
    choose_specs,
    jobs_for,
    plan_from_specs,
    plan_from_tasks,
    write_situations,
)
from whileai.simulations.progress import RunProgress
from whileai.simulations.rollout import Job, RolloutContext
from whileai.sync import run_sync
from whileai.version import __version__
from whileai.worlds import FaultPlan, World

#: Bumped whenever the same parameters would plan different situations or seeds.
PLAN_VERSION = 2

# -- one run ----------------------------------------------------------------------------


@attrs.define
class _RunState:
    run_id: str
    trajectories: list[dict[str, Any]]
    done_keys: set[str]
    warnings: list[str]
    writer: RowWriter | None
    progress: RunProgress
    registry: Registry
    total: int


def _key_of(row: Mapping[str, Any]) -> str | None:
    lineage = row.get("lineage")
    return lineage.get("rollout_key") if isinstance(lineage, Mapping) else None


def _warn_once(warnings: list[str], message: str) -> None:
    if message not in warnings:
        warnings.append(message)


async def _execute(
    jobs: list[Job],
    executor: Any,
    run: RunSpec,
    state: _RunState,
    knobs: RunKnobs,
) -> None:
    """Hand the jobs not yet done to the executor; each row it yields is streamed to disk,
    keyed for resume, counted and announced here, whichever process ran it."""
    pending = [job for job in jobs if job.key not in state.done_keys]
    if not pending:
        return
    rows = executor.run(pending, knobs.max_concurrency, run)
    try:
        async for row in rows:
            state.trajectories.append(row)
            key = _key_of(row)
            if key is not None:
                state.done_keys.add(key)
            if state.writer is not None:
                state.writer.write(row)
            state.progress.advance(
                retries=int((row.get("usage") or {}).get("retries") or 0),
                error=bool(row.get("error")),
            )
            for warning in notify(
                state.registry.pm,
                "whileai_rollout_finished",
                run_id=state.run_id,
                row=export_row(row),
                done=len(state.trajectories),
                total=state.total,
            ):
                _warn_once(state.warnings, warning)
    finally:
        aclose = getattr(rows, "aclose", None)
        if aclose is not None:
            await aclose()
        for warning in getattr(executor, "warnings", None) or []:
            _warn_once(state.warnings, warning)


def _split_groups(trajectories: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Scenario ids whose binary rewards disagree, with how many rows each has."""
    rewards: dict[str, list[float]] = {}
    for t in trajectories:
        r = t.get("reward")
        if r in (0, 1):
            rewards.setdefault(t["scenario_id"], []).append(float(r))
    return {k: len(v) for k, v in rewards.items() if 0 < sum(v) < len(v)}


def _resume_plan(params: RunParams, knobs: RunKnobs, world: World, sha: str) -> dict[str, Any]:
    """What must match between a run and the run resuming it."""
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
        "tasks": None
        if params.tasks is None
        else prompt_hash(
            json.dumps([t if isinstance(t, str) else t.get("prompt") for t in params.tasks])
        ),
    }


async def _run_once(
    params: RunParams,
    knobs: RunKnobs,
    advanced: Mapping[str, Any],
    registry: Registry,
    world: World,
    resolved: ResolvedModels,
    graders: Graders,
    backends: list[RunBackend],
    plans: list[PlannedSituation] | None,
    output: str | None,
    replayed_from: str | None,
    executor: _Executor,
) -> tuple[Simulation, list[PlannedSituation]]:
    grader, llm_grader = graders.grader, graders.llm_grader
    warnings = list(resolved.warnings)
    sha = prompt_hash(params.system_prompt)
    head = params.system_prompt[: knobs.system_prompt_head_chars]
    fault_plan = FaultPlan(kinds=knobs.fault_kinds, rate=params.fault_rate)
    run_fault_rate = fault_plan.effective_rate(world.default_fault_rate)
    if params.fault_rate is None:
        world_note = (
            f"no fault_rate given: the fault plan has no rate of its own, so it fires at the "
            f"world's default_fault_rate {world.default_fault_rate}"
        )
    else:
        world_note = (
            f"fault_rate={params.fault_rate} given: the fault plan fires at it (the world's "
            f"default_fault_rate, {world.default_fault_rate}, applies to plans with no rate)"
        )

    resume_plan = _resume_plan(params, knobs, world, sha)
    existing: list[dict[str, Any]] = []
    run_id = uuid.uuid4().hex[:12]
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if output is not None:
        side = read_sidecar(sidecar_path(output))
        on_disk = read_jsonl(
            output, what="output", tail="cut" if params.resume else "drop", missing_ok=True
        ).rows
        if (on_disk or side) and not params.resume:
            raise FileExistsError(
                f"output={output!r} already holds a run ({len(on_disk)} rows); pass resume=True "
                "to continue it, or choose another path"
            )
        if params.resume and side is not None:
            diff = resume_mismatch(side.get("metadata", {}).get("resume_plan", {}), resume_plan)
            if diff:
                raise ValueError(
                    f"resume=True, but {output!r} was started with other settings: "
                    + "; ".join(diff)
                )
            run_id = str(side["metadata"].get("run_id", run_id))
            created = str(side["metadata"].get("created", created))
        seen: set[str] = set()
        for row in on_disk:
            key = _key_of(row)
            if key is None or key in seen:
                continue
            seen.add(key)
            existing.append(row)
        if len(existing) < len(on_disk):
            warnings.append(f"{len(on_disk) - len(existing)} duplicate rows in {output} ignored")

    if plans is None:
        if params.tasks is not None:
            plans = plan_from_tasks(params, params.tasks)
            strategy_name = "tasks= (replayed)"
            dimensions: dict[str, list[Any]] = params.dimensions or {}
        else:
            specs, dimensions, strategy_name = choose_specs(params, knobs, world, registry)
            plans = plan_from_specs(params, world, specs)
        known = {str(r["scenario_id"]): str(r["prompt"]) for r in existing if r.get("scenario_id")}
        plans = await write_situations(plans, resolved.writer, knobs, params.seed, known, warnings)
    else:
        strategy_name = f"replay of run {replayed_from}"
        dimensions = params.dimensions or {k: list(v) for k, v in world.dimensions().items()}

    agent_sampling = Sampling.coerce(
        {
            "temperature": knobs.agent_temperature,
            "max_tokens": knobs.agent_max_tokens,
            **(params.sampling or {}),
        }
    )
    user_sampling = Sampling(temperature=knobs.user_temperature, max_tokens=knobs.user_max_tokens)
    ctx = RolloutContext(
        run_id=run_id,
        world=world,
        models=resolved.models,
        system_prompt=params.system_prompt,
        system_prompt_sha=sha,
        system_prompt_head=head,
        agent_sampling=agent_sampling,
        user_sampling=user_sampling,
        declared_sampling=params.sampling,
        fault_plan=fault_plan,
        max_turns=params.max_turns,
        max_tool_calls=params.max_tool_calls,
        max_tool_rounds=knobs.max_tool_rounds,
        logprobs=params.logprobs,
        user_persona=knobs.user_persona,
        user_patience=knobs.user_patience,
        user_context_chars=knobs.user_context_chars,
    )
    markers, marker_problems = MarkerSet.from_registry(registry)
    warnings.extend(marker_problems)
    run = RunSpec.for_context(
        ctx,
        world=knobs.world,
        registry=executor.registry_spec or RegistrySpec.of(registry),
        agent_model=params.agent_model
        if resolved.models.agent_is_callable
        else resolved.agent_spec,
        agent_label=resolved.agent_spec,
        user_model=resolved.user_spec,
        user_label=resolved.user_spec,
        judge=params.judge,
        llm_grade=params.llm_grade,
        judge_model=resolved.judge_spec,
        concurrency=knobs.max_concurrency,
    )
    # In process, the rows are graded by the run's own live judges, world and markers.
    runs_on = executor.executor or InProcessExecutor(
        JobRunner(ctx, grader, llm_grader, markers, warnings=warnings)
    )
    grader_name = grader.name if grader is not None else f"world:{world.name}"

    writer_models = sorted({p.situation.writer_model for p in plans})
    writer_model = ", ".join(writer_models)
    jobs = jobs_for(
        plans, range(params.rollouts_per_request), params.seed, replayed_from=replayed_from
    )
    total = len(jobs)
    metadata: dict[str, Any] = {
        "run_id": run_id,
        "created": created,
        "whileai_version": __version__,
        "agent_model": resolved.agent_spec,
        "model_version": None,
        "writer_model": writer_model,
        "user_model": resolved.user_spec if params.max_turns > 1 else None,
        "judge": grader_name,
        "world": {"name": world.name, "version": getattr(world, "version", None)},
        "system_prompt_sha": sha,
        "planned_rollouts": total,
        "resume_plan": resume_plan,
        "replayed_from_run": replayed_from,
    }
    report_fields: dict[str, Any] = {
        "run_id": run_id,
        "mode": params.mode,
        "budget": params.budget,
        "seed": params.seed,
        "unique_situations": len({p.index for p in plans}),
        "requests_per_situation": params.requests_per_situation,
        "repeats": params.rollouts_per_request,
        "repeat_policy": params.repeat_policy,
        "hard_share": params.hard_share,
        "fault_rate": run_fault_rate,
        "strategy": strategy_name,
        "dimensions": dimensions,
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
            "fault_kinds": list(knobs.fault_kinds),
        },
        "world_note": world_note,
        "advanced": dict(advanced),
        "knobs": knobs.as_dict(),
        "model_notes": list(resolved.notes) + graders.notes,
        "backends": {},
        "executor": executor.label,
    }
    system_prompts = {sha: params.system_prompt}

    def simulation(trajectories: list[dict[str, Any]]) -> Simulation:
        first = next((t.get("model_version") for t in trajectories if t.get("model_version")), None)
        metadata["model_version"] = first
        return Simulation(
            trajectories=trajectories,
            metadata=metadata,
            system_prompts=system_prompts,
            warnings=warnings,
            degraded=list(resolved.degraded),
            report_fields=report_fields,
            output=output,
            registry=registry,
        )

    row_writer = RowWriter(output, fsync=bool(knobs.fsync_rows)) if output is not None else None
    if output is not None:
        write_sidecar(sidecar_path(output), simulation(existing).sidecar(complete=False))
    for warning in notify(
        registry.pm, "whileai_run_started", run_id=run_id, knobs=report_fields, total=total
    ):
        _warn_once(warnings, warning)
    progress = RunProgress(total, refresh_per_second=knobs.progress_refresh_per_second)
    state = _RunState(
        run_id,
        list(existing),
        {k for r in existing if (k := _key_of(r))},
        warnings,
        row_writer,
        progress,
        registry,
        total,
    )
    for _ in existing:
        progress.done += 1
    before = snapshot(backends)
    watcher = asyncio.ensure_future(
        _watch_retries(progress, backends, before, 1.0 / knobs.progress_refresh_per_second)
    )
    try:
        with progress:
            await _execute(jobs, runs_on, run, state, knobs)
            if params.repeat_policy == "rl" and knobs.adaptive_extra_repeats > 0:
                extra = _extra_jobs(params, knobs, plans, state, replayed_from)
                if extra:
                    state.total += len(extra)
                    progress.grow(len(extra))
                    metadata["planned_rollouts"] = state.total
                    await _execute(extra, runs_on, run, state, knobs)
            progress.backend_retries(retries_so_far(backends, before))
    finally:
        watcher.cancel()
        if row_writer is not None:
            row_writer.close()
    usage = usage_report(backends, before)
    report_fields["backends"] = usage
    for sentence in wait_warnings(usage):
        _warn_once(warnings, sentence[0].upper() + sentence[1:] + ".")
    data = simulation(_in_plan_order(state.trajectories))
    if output is not None:
        write_sidecar(sidecar_path(output), data.sidecar(complete=True))
    for warning in notify(
        registry.pm, "whileai_run_finished", run_id=run_id, report=data.report().to_dict()
    ):
        _warn_once(warnings, warning)
    return data, plans


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
) -> list[Job]:
    """Under repeat_policy="rl", more repeats for groups whose repeats disagree, within budget."""
    split = _split_groups(state.trajectories)
    room = None if params.budget is None else params.budget - state.total
    base = params.rollouts_per_request
    extra: list[Job] = []
    for plan in plans:
        if plan.scenario_id not in split:
            continue
        count = knobs.adaptive_extra_repeats
        if room is not None:
            count = min(count, room - len(extra))
        if count <= 0:
            break
        extra.extend(
            jobs_for([plan], range(base, base + count), params.seed, replayed_from=replayed_from)
        )
    return extra


def _in_plan_order(trajectories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def order(t: Mapping[str, Any]) -> tuple[int, int, int]:
        lineage = t.get("lineage") or {}
        return (
            int(lineage.get("situation", 0)),
            int(lineage.get("phrasing", 0)),
            int(lineage.get("repeat", 0)),
        )

    return sorted(trajectories, key=order)


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


async def asimulate(**kwargs: Any) -> Simulation | list[Simulation]:
    """``simulate`` for code already inside an event loop: same parameters, awaitable."""
    alias_values = {a: kwargs.pop(a) for a in list(kwargs) if a in ALIASES}
    advanced = kwargs.pop("advanced", None)
    registry = get_registry(kwargs.pop("registry", None))
    given = merge_aliases(kwargs, alias_values)
    params = resolve_params(given)
    knobs = RunKnobs.from_advanced(advanced)
    world = registry.resolve("world", knobs.world)
    # Checked before any model is opened: a run a worker could not rebuild fails here.
    chosen, executor_label, built_executor = resolve_executor(params.executor, registry)
    registry_spec = None
    if chosen is not None:
        registry_spec = RegistrySpec.of(registry)
        unshippable = ship_problems(params.agent_model, params.user_model, registry_spec)
        check_shippable(unshippable, executor_label)
    executor = _Executor(chosen, executor_label, registry_spec)
    backends: list[RunBackend] = []
    results: list[Simulation] = []
    try:
        resolved = resolve_models(
            params, registry, concurrency=knobs.max_concurrency, backends=backends
        )
        graders = resolve_graders(
            params.judge,
            params.llm_grade,
            registry,
            judge_model=resolved.judge_spec,
            judge_why=resolved.judge_why,
        )
        for grader in (graders.grader, graders.llm_grader):
            if grader is not None and grader.backend is not None:
                label = str(resolved.judge_spec or getattr(grader.backend, "name", "judge"))
                add_backend(backends, label, grader.backend, "judge", opened=True)
        plans: list[PlannedSituation] | None = None
        first_run: str | None = None
        for run in range(params.runs):
            data, plans = await _run_once(
                params,
                knobs,
                dict(advanced or {}),
                registry,
                world,
                resolved,
                graders,
                backends,
                plans,
                _run_output(params.output, run, params.runs),
                first_run,
                executor,
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


def simulate(
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
    """Write situations, roll the agent out against a simulated user and a mock world with
    faults, grade every episode, and return the run (a list of runs when ``runs`` > 1).

    Every parameter, its default and its alias is in docs/parameters.md.
    """
    kwargs = {k: v for k, v in locals().items()}
    return run_sync(asimulate(**kwargs))
