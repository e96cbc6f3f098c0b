"""Where a run's rollouts execute: the executor protocol, the picklable description of a run
a worker rebuilds everything from, and the in-process executor ``simulate()`` uses by default.

The protocol (``whileai_register_executors`` registers factories of such objects)::

    class Executor:
        name: str                                   # what the run's report says ran it
        warnings: list[str]                         # optional: added to data.warnings
        def run(self, jobs: list[Job], concurrency: int, run: RunSpec) -> AsyncIterator[dict]:
            ...                                     # yields graded rows as they finish
        def close(self) -> None: ...                # optional: release what run() started

A job (:class:`whileai.simulations.rollout.Job`) is one planned rollout: its situation, its
key, its seed. ``run`` is a :class:`RunSpec`: plain, picklable data (world name, model specs,
sampling, knobs, system prompt, fault plan, judge spec, the registry's plugins by importable
name), never a live backend. A worker calls ``await JobRunner.open(run)`` once to rebuild the
world, backends, judges and markers in its own process, then ``await runner.run(job)`` per
job (rollout, then grading against the world's live episode), and ``await runner.close()``.
Rows come back whole (privileged block kept, as the judge needs); the driver streams them to
disk, keeps the resume keys, the progress line and the lifecycle hooks, as for an
in-process run. A job whose worker failed must still come back, as :func:`error_row`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import pickle
import types
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import attrs

from whileai.backend_use import RunBackend, add_backend, close_backends
from whileai.backends import Sampling
from whileai.graders import Grader, MarkerSet, resolve_graders, world_grader
from whileai.registry import LoadFailure, Registry, make_plugin_manager
from whileai.scoring import Verdict
from whileai.simulations.models import resolve_models
from whileai.simulations.params import is_callable_agent, resolve_params
from whileai.simulations.rollout import Job, Models, RolloutContext, failed_row, run_rollout
from whileai.worlds import FaultPlan, World

#: What the report says when no executor was given.
IN_PROCESS = "in-process"


# -- the registry, by importable name ---------------------------------------------------


@attrs.frozen
class PluginRef:
    """One plugin of the run's registry: a module by its import name, or an object whose class
    a worker can import by name (shipped by pickle)."""

    name: str
    module: str | None = None
    obj: Any = None

    def load(self) -> object:
        return importlib.import_module(self.module) if self.module is not None else self.obj


@attrs.frozen
class RegistrySpec:
    """The plugins a registry was built from, so a worker process can build the same one."""

    plugins: tuple[PluginRef, ...]
    distributions: Mapping[str, tuple[str | None, str | None]]
    failures: tuple[LoadFailure, ...] = ()
    blocked: tuple[str, ...] = ()

    @classmethod
    def of(cls, registry: Registry) -> RegistrySpec:
        refs = []
        for name, plugin in registry.pm.list_name_plugin():
            if isinstance(plugin, types.ModuleType):
                refs.append(PluginRef(name, module=plugin.__name__))
            else:
                refs.append(PluginRef(name, obj=plugin))
        return cls(
            tuple(refs),
            registry.distributions,
            tuple(registry.failures),
            tuple(registry.blocked),
        )

    def problems(self) -> list[str]:
        """Why a worker could not rebuild this registry (empty when it can)."""
        out = []
        for ref in self.plugins:
            if ref.module is not None:
                if ref.module == "__main__" or importlib.util.find_spec(ref.module) is None:
                    out.append(f"plugin {ref.name!r} is module {ref.module!r}, not importable")
                continue
            cls = type(ref.obj)
            where = f"{cls.__module__}.{cls.__qualname__}"
            if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
                out.append(f"plugin {ref.name!r} is a {where} object, not importable by name")
                continue
            try:
                pickle.dumps(ref.obj)
            except Exception as exc:
                out.append(f"plugin {ref.name!r} ({where}) cannot be pickled: {exc}")
        return out

    def build(self) -> Registry:
        pm = make_plugin_manager()
        for ref in self.plugins:
            pm.register(ref.load(), name=ref.name)
        return Registry(
            pm,
            failures=self.failures,
            blocked=self.blocked,
            distributions=self.distributions,
        )


# -- the run, as data -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RunSpec:
    """Everything a worker needs to run and grade a run's jobs, as picklable data.

    Model roles are spec strings resolved on the driver (so a worker with other environment
    variables still calls the same models), or the agent as your own function."""

    run_id: str
    world: str
    registry: RegistrySpec
    #: the agent's spec string, or your agent function
    agent_model: Any
    agent_label: str
    user_model: str
    user_label: str
    #: judge= as given (a spec string, or a callable or verifier), None: the world's checks
    judge: Any
    llm_grade: bool
    #: the judge role's model spec, for a judge named without one
    judge_model: str | None
    system_prompt: str
    system_prompt_sha: str
    system_prompt_head: str
    agent_sampling: Sampling
    user_sampling: Sampling
    declared_sampling: Mapping[str, Any] | None
    fault_plan: FaultPlan
    max_turns: int
    max_tool_calls: int
    max_tool_rounds: int
    logprobs: bool
    user_persona: str | None
    user_patience: int | None
    user_context_chars: int
    concurrency: int

    def problems(self) -> list[str]:
        """What in this run a worker could not rebuild, each with what to pass instead."""
        return ship_problems(self.agent_model, self.user_model, self.registry)

    @classmethod
    def for_context(cls, ctx: RolloutContext, **rest: Any) -> RunSpec:
        """A description of the run ``ctx`` belongs to: its plain fields as they are, the
        rest (world name, specs, judge, registry, concurrency) from ``rest``."""
        return cls(**{name: getattr(ctx, name) for name in _CONTEXT_DATA}, **rest)

    def context(self, world: World, models: Models) -> RolloutContext:
        return RolloutContext(
            world=world, models=models, **{name: getattr(self, name) for name in _CONTEXT_DATA}
        )


#: RolloutContext's fields that are plain data, carried by a RunSpec as they are; the world
#: and the models are live objects a worker rebuilds.
_CONTEXT_DATA: tuple[str, ...] = tuple(
    f.name for f in attrs.fields(RolloutContext) if f.name not in ("world", "models")
)


def ship_problems(agent_model: Any, user_model: Any, registry: RegistrySpec) -> list[str]:
    """What of a run a worker could not rebuild, each with what to pass instead."""
    out = []
    live_agent = not isinstance(agent_model, str) and not is_callable_agent(agent_model)
    if agent_model is not None and live_agent:
        name = getattr(agent_model, "name", type(agent_model).__name__)
        out.append(
            f"agent_model is a live backend object ({name!r}); pass its model spec string "
            "(e.g. 'openai:gpt-4o') or an agent function instead"
        )
    if user_model is not None and not isinstance(user_model, str):
        name = getattr(user_model, "name", type(user_model).__name__)
        out.append(
            f"user_model is a live backend object ({name!r}); pass its model spec string instead"
        )
    out.extend(
        f"registry= {problem}; register it through an importable module (an entry point in "
        "group 'whileai', or a plugin class defined at the top level of a module)"
        for problem in registry.problems()
    )
    return out


def check_shippable(problems: Sequence[str], executor_name: str) -> None:
    """Refuse up front a run whose parts a worker could not rebuild."""
    if problems:
        raise ValueError(
            f"executor={executor_name!r} runs rollouts in other processes, which rebuild the "
            "run from its description, but: " + "; ".join(problems)
        )


@attrs.frozen
class _NamedWorld:
    name: str


def error_row(run: RunSpec, job: Job, reason: str) -> dict[str, Any]:
    """The row of a job that never finished on its worker: ``error`` says why, and the
    judgment is skipped, so the job is counted and kept, never lost."""
    models = Models(None, None, run.agent_label, run.user_label, is_callable_agent(run.agent_model))  # type: ignore[arg-type]
    return failed_row(job, run.context(_NamedWorld(run.world), models), reason)  # type: ignore[arg-type]


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

    @classmethod
    async def open(cls, run: RunSpec) -> JobRunner:
        """Rebuild the run in this process: registry, world, backends, judges, markers."""
        registry = run.registry.build()
        world = registry.resolve("world", run.world)
        backends: list[RunBackend] = []
        try:
            params = resolve_params(
                {
                    "agent_model": run.agent_model,
                    "user_model": run.user_model,
                    "simulator": "template",
                    "judge": run.judge,
                    "llm_grade": run.llm_grade,
                    "max_turns": run.max_turns,
                }
            )
            resolved = resolve_models(
                params, registry, concurrency=run.concurrency, backends=backends
            )
            resolved = attrs.evolve(resolved, judge_spec=run.judge_model)
            graders = resolve_graders(
                params.judge,
                params.llm_grade,
                registry,
                judge_model=resolved.judge_spec,
                judge_why=resolved.judge_why,
            )
            for grader in (graders.grader, graders.llm_grader):
                if grader is not None and grader.backend is not None:
                    add_backend(backends, "judge", grader.backend, "judge", opened=True)
        except BaseException:
            await close_backends(backends)
            raise
        markers, problems = MarkerSet.from_registry(registry)
        return cls(
            run.context(world, resolved.models),
            graders.grader,
            graders.llm_grader,
            markers,
            warnings=list(problems),
            backends=backends,
        )

    async def run(self, job: Job) -> dict[str, Any]:
        """One job played and graded: its row, privileged block kept."""
        trajectory, episode = await run_rollout(job, self.ctx)

        def check(row: Mapping[str, Any]) -> Verdict:
            if episode is None:
                return Verdict.error("no episode to check")
            return episode.check(row["final_text"], row["steps"])

        return await _grade(
            trajectory,
            check,
            self.grader,
            self.ctx.world,
            self.llm_grader,
            self.markers,
            self.warnings,
        )

    async def close(self) -> list[str]:
        """Close the backends this runner built; returns a problem per backend that failed."""
        return await close_backends(self.backends)


class InProcessExecutor:
    """Runs jobs as asyncio tasks in this process, at most ``concurrency`` at once.

    Given the driver's live runner it uses it (the default for ``simulate()``); otherwise it
    rebuilds the run from its description, as a remote worker would."""

    name = IN_PROCESS

    def __init__(self, runner: JobRunner | None = None) -> None:
        self._runner = runner
        self.warnings: list[str] = []

    async def run(
        self, jobs: Sequence[Job], concurrency: int, run: RunSpec
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield each job's graded row as it finishes."""
        runner = self._runner if self._runner is not None else await JobRunner.open(run)
        semaphore = asyncio.Semaphore(concurrency)

        async def one(job: Job) -> dict[str, Any]:
            async with semaphore:
                return await runner.run(job)

        pending = [asyncio.ensure_future(one(job)) for job in jobs]
        try:
            for finished in asyncio.as_completed(pending):
                yield await finished
        finally:
            for task in pending:
                task.cancel()
            if runner is not self._runner:
                self.warnings.extend(runner.warnings)
                self.warnings.extend(await runner.close())


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
