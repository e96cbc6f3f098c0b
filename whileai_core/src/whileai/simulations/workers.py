"""Running a run's jobs: the worker side of the executor contract (:mod:`whileai.executors`)
and the in-process executor ``simulate()`` uses by default.

:class:`JobRunner` is what any worker runs: ``await JobRunner.open(run)`` rebuilds the world,
backends, judges and markers from the run's :class:`~whileai.executors.RunSpec`, straight
through the registry; ``await runner.run(job)`` plays one job and grades it against the
world's live episode.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import attrs

from whileai.backend_use import RunBackend, add_backend, close_backends
from whileai.backends import resolve_backend
from whileai.executors import IN_PROCESS, Job, RunSpec
from whileai.graders import Grader, MarkerSet, resolve_graders, world_grader
from whileai.registry import Registry
from whileai.response_cache import CachingBackends
from whileai.scoring import Verdict
from whileai.simulations import episode_life
from whileai.simulations.attribution import failure_owner
from whileai.simulations.attribution_judge import Attributor
from whileai.simulations.models import open_run_models
from whileai.simulations.rollout import Models, RolloutContext, run_rollout
from whileai.worlds import World


def run_spec(ctx: RolloutContext, **rest: Any) -> RunSpec:
    """The description of the run ``ctx`` belongs to: its settings as they are, the rest
    (world name, specs, judge, registry, concurrency) from ``rest``."""
    return RunSpec(**ctx.settings(), **rest)


def add_counts(total: dict[str, int], more: Mapping[str, int]) -> None:
    """Add one worker's cache counts into an executor's."""
    for name, value in more.items():
        total[name] = total.get(name, 0) + int(value)


def open_attributor(
    spec: str | None, registry: Registry, backends: list[RunBackend]
) -> Attributor | None:
    """The attribution judge ``spec`` names, its backend recorded under the judge role (so
    its calls are counted and it is closed with the run's other backends); None without one."""
    if spec is None:
        return None
    backend = resolve_backend(spec, role="judge", registry=registry)
    add_backend(backends, spec, backend, "judge", opened=True)
    return Attributor(backend, spec)


def context_of(run: RunSpec, world: World, models: Models) -> RolloutContext:
    """The rollout context a worker rebuilds from ``run``, with its own world and models."""
    return RolloutContext(world=world, models=models, **run.settings())


# -- running jobs -----------------------------------------------------------------------


async def _grade(
    trajectory: dict[str, Any],
    episode_check: Callable[[Mapping[str, Any]], Verdict],
    grader: Grader | None,
    world: World,
    llm_grader: Grader | None,
    markers: MarkerSet,
    warnings: list[str],
) -> dict[str, Any]:
    if trajectory.get("error"):
        return trajectory
    chosen = grader if grader is not None else world_grader(world, episode_check)
    graded = await chosen.grade(trajectory)
    if llm_grader is not None:
        graded = await llm_grader.grade(graded, into="llm_reward")
    if markers.markers:
        values, problems = markers.measure(graded)
        for problem in problems:
            if problem not in warnings:
                warnings.append(problem)
        if values:
            graded["markers"] = values
    return graded


@attrs.define
class JobRunner:
    """Runs jobs of one run: the rollout, then grading with the world's live episode."""

    ctx: RolloutContext
    grader: Grader | None
    llm_grader: Grader | None
    markers: MarkerSet
    #: marker problems met while grading (the driver adds them to the run's warnings)
    warnings: list[str] = attrs.field(factory=list)
    #: backends this runner built and so closes
    backends: list[RunBackend] = attrs.field(factory=list)
    #: the judge for failures the rules leave to the agent (``advanced["attribution_model"]``)
    attributor: Attributor | None = None
    #: the response cache this runner's backends answer from, when the run has one
    cache: CachingBackends | None = None

    @classmethod
    async def open(cls, run: RunSpec) -> JobRunner:
        """Rebuild the run in this process: registry, world, backends, judges, markers."""
        registry = run.registry.build()
        world = registry.resolve("world", run.world, **run.world_options)
        backends: list[RunBackend] = []
        try:
            models = open_run_models(run, registry, backends)
            graders = resolve_graders(
                run.judge, run.llm_grade, registry, judge_model=run.judge_model
            )
            for grader in (graders.grader, graders.llm_grader):
                if grader is not None and grader.backend is not None:
                    add_backend(backends, "judge", grader.backend, "judge", opened=True)
            attributor = open_attributor(run.attribution_model, registry, backends)
        except BaseException:
            await close_backends(backends)
            raise
        markers, problems = MarkerSet.from_registry(registry)
        return cls(
            context_of(run, world, models),
            graders.grader,
            graders.llm_grader,
            markers,
            warnings=list(problems),
            backends=backends,
            attributor=attributor,
            cache=registry.backend_wrapper
            if isinstance(registry.backend_wrapper, CachingBackends)
            else None,
        )

    async def run(self, job: Job) -> dict[str, Any]:
        """One job played and graded: its row, privileged block kept."""
        trajectory, episode = await run_rollout(job, self.ctx)

        def check(row: Mapping[str, Any]) -> Verdict:
            if episode is None:
                return Verdict.error("no episode to check")
            return episode.check(row["final_text"], row["steps"])

        try:
            graded = await _grade(
                trajectory,
                check,
                self.grader,
                self.ctx.world,
                self.llm_grader,
                self.markers,
                self.warnings,
            )
        finally:
            problem = await episode_life.close(episode)
            if problem is not None and problem not in self.warnings:
                self.warnings.append(problem)
        patience = self.ctx.user_patience
        patience = patience if patience is not None else job.situation.patience
        owner = failure_owner(graded, job.situation, patience)
        if self.attributor is not None and self.attributor.wanted(owner):
            assert owner is not None
            owner = await self.attributor.attribute(graded, job.situation, patience, owner)
        if owner is not None:
            graded["failure_owner"] = owner
        return graded

    async def close(self) -> list[str]:
        """Close the backends this runner built; returns a problem per backend that failed."""
        return await close_backends(self.backends)

    def cache_counts(self) -> dict[str, int]:
        """What the response cache did for this runner's process (hits, misses, tokens
        saved): a worker's share, which its executor hands back to the driver's report."""
        if self.cache is None:
            return {}
        return self.cache.cache.stats.as_dict()


#: How many rollouts the in-process executor starts in one step of the event loop; the next
#: wave starts once these have run to their first wait, until ``concurrency`` are in flight.
#: Rollouts that wait on a model fill the run's concurrency a wave at a time, within
#: microseconds; rollouts that never wait (a function agent, a scripted or cached model) finish
#: a wave at a time and are exported while young. All started in one step, 256 of them would
#: finish before the first was exported: every row then outlives two garbage collections and
#: is promoted to the oldest generation, whose full collections cost a shop run of 2,000
#: rollouts a tenth of its time.
START_WAVE = 8


class InProcessExecutor:
    """Runs jobs as asyncio tasks in this process, at most ``concurrency`` at once.

    Given the driver's live runner it uses it (the default for ``simulate()``); otherwise it
    rebuilds the run from its description, as a remote worker would."""

    name = IN_PROCESS

    def __init__(self, runner: JobRunner | None = None) -> None:
        self._runner = runner
        self.warnings: list[str] = []
        #: asked before each job starts (a budget in money): False leaves the job unplayed,
        #: yielding nothing for it, while the jobs already started finish and are yielded
        self.may_start: Callable[[], bool] | None = None
        #: what the response cache did in runners this executor built (the driver's own
        #: runner counts in the driver's cache already)
        self.cache_counts: dict[str, int] = {}

    async def run(
        self, jobs: Sequence[Job], concurrency: int, run: RunSpec
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield each job's graded row as it finishes. Jobs are read from ``jobs`` as room
        frees, so at most ``concurrency`` rollouts (and their tasks) exist at once however
        long the run; they start :data:`START_WAVE` at a time."""
        runner = self._runner if self._runner is not None else await JobRunner.open(run)
        upcoming = iter(jobs)
        finished: asyncio.Queue[asyncio.Future[dict[str, Any]]] = asyncio.Queue()
        in_flight: set[asyncio.Future[dict[str, Any]]] = set()
        starting = True
        # bound once: a task is made and announced for every job of the run. The announcement
        # reads no context variable, so it runs in one empty context rather than a copy of
        # the caller's made for each job (a callback runs alone, never inside another)
        loop = asyncio.get_running_loop()
        announce = finished.put_nowait
        quiet = contextvars.Context()

        # the next wave of starts, when one is due (the rollouts yielded meanwhile start none)
        ramp: asyncio.Handle | None = None

        def start_more() -> None:
            nonlocal starting, ramp
            if ramp is not None:
                return
            started = 0
            while starting and len(in_flight) < concurrency:
                if started == START_WAVE:
                    ramp = loop.call_soon(next_wave, context=quiet)
                    break
                if self.may_start is not None and not self.may_start():
                    starting = False
                    break
                job = next(upcoming, None)
                if job is None:
                    starting = False
                    break
                # named by its job (which asyncio would otherwise format a name for)
                task = loop.create_task(runner.run(job), name=job.key)
                in_flight.add(task)
                task.add_done_callback(announce, context=quiet)
                started += 1

        def next_wave() -> None:
            nonlocal ramp
            ramp = None
            start_more()

        try:
            start_more()
            while in_flight or ramp is not None:
                task = await finished.get()
                in_flight.discard(task)
                row = task.result()
                start_more()
                yield row
        finally:
            if ramp is not None:
                ramp.cancel()
            for task in in_flight:
                task.cancel()
            if runner is not self._runner:
                self.warnings.extend(runner.warnings)
                self.warnings.extend(await runner.close())
                add_counts(self.cache_counts, runner.cache_counts())


def resolve_executor(executor: Any, registry: Registry) -> tuple[Any | None, str, bool]:
    """``executor=`` as (object or None for in-process, label for the report, whether the
    run built it and so closes it)."""
    if executor is None:
        return None, IN_PROCESS, False
    if isinstance(executor, str):
        return registry.resolve("executor", executor), executor, True
    if callable(getattr(executor, "run", None)):
        label = getattr(executor, "name", None) or type(executor).__name__
        return executor, str(label), False
    raise TypeError(
        "executor= must be None (in-process), a registered executor name or spec such as "
        f"'ray' or 'ray:auto', or an object with run(jobs, concurrency, run); got {executor!r}"
    )


async def close_executor(executor: Any) -> list[str]:
    """Call the executor's ``close()`` if it has one; a failure is a warning."""
    close = getattr(executor, "close", None)
    if not callable(close):
        return []
    try:
        result = close()
        if inspect.isawaitable(result):
            await result
    except Exception as exc:
        return [f"executor {getattr(executor, 'name', executor)!r} failed to close: {exc}"]
    return []
