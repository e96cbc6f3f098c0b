"""The executor contract: where a run's rollouts execute, and the plain data that crosses to
the process that runs them. This is what an executor plugin (``whileai_register_executors``)
is written against; ``import whileai as wai`` names every piece (``wai.Executor``,
``wai.Job``, ``wai.RunSpec``, ``wai.error_row``, ``wai.JobRunner``).

::

    class MyExecutor:
        name = "my-cluster"                         # what the run's report says ran it
        warnings: list[str] = []                    # optional: added to data.warnings

        async def run(self, jobs, concurrency, run):    # an async generator
            ...                                     # yield each job's graded row as it ends

        def close(self) -> None: ...                # optional: release what run() started

A :class:`Job` is one planned rollout (its situation, key and seed). ``run`` is a
:class:`RunSpec`: picklable data (world name, model specs, sampling, knobs, the system prompt,
the fault plan, the judge as given, the registry's plugins by importable name), never a live
backend. A worker calls ``await wai.JobRunner.open(run)`` once to rebuild the world,
backends, judges and markers in its own process, then ``await runner.run(job)`` per job, and
``await runner.close()``. Rows come back whole (privileged block kept, as the judge needs);
the driver streams them to disk, keeps the resume keys, the progress line and the lifecycle
hooks. A job whose worker failed must still come back, as :func:`error_row`.
"""

from __future__ import annotations

import importlib
import importlib.util
import pickle
import types
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from whileai.backends import Sampling, is_agent_function
from whileai.registry import LoadFailure, Registry, make_plugin_manager
from whileai.schema.records import Judgment, Rollout, Task, to_row
from whileai.worlds import FaultPlan, Situation

#: What the report says when no executor was given.
IN_PROCESS = "in-process"


@runtime_checkable
class Executor(Protocol):
    """Runs a run's jobs somewhere and yields their graded rows as they finish."""

    name: str

    def run(
        self, jobs: Sequence[Job], concurrency: int, run: RunSpec
    ) -> AsyncIterator[dict[str, Any]]:
        """Each job's graded row (privileged block kept), in any order, every job exactly
        once: a job that could not run comes back as :func:`error_row`. At most
        ``concurrency`` rollouts in flight."""
        ...


@attrs.frozen
class Job:
    """One planned rollout, identified by a deterministic key (situation, phrasing, repeat)."""

    key: str
    situation: Situation
    scenario_id: str
    situation_index: int
    phrasing: int
    repeat: int
    seed: int
    spec: Mapping[str, Any]
    arm: str | None = None
    selection_reason: str | None = None
    replayed: bool = False
    replayed_from_run: str | None = None
    #: the seed the situation was drawn from (the row's ``seed``); ``seed`` is the rollout's
    situation_seed: int | None = None
    #: a branch: the recorded steps replayed before the agent decides again, the rollout key
    #: they were recorded in, and the seed that rollout's world drew from (so the replayed
    #: calls meet the same state and the same faults); see ``whileai.simulations.branching``
    prefix: tuple[Mapping[str, Any], ...] = ()
    branched_from: str | None = None
    episode_seed: int | None = None


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
    #: what the registry applies to every backend it resolves (the response cache), pickled
    backend_wrapper: Any = None

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
            registry.backend_wrapper,
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
            backend_wrapper=self.backend_wrapper,
        )


# -- the run, as data -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RolloutSettings:
    """What every rollout of a run shares that is plain data: the driver's rollout context
    without its live world and models, and what a worker receives of it."""

    run_id: str
    system_prompt: str
    system_prompt_sha: str
    system_prompt_head: str
    agent_sampling: Sampling
    user_sampling: Sampling
    #: what a callable agent's rows say under ``sampling`` (the caller's, or None)
    declared_sampling: Mapping[str, Any] | None
    #: the caller's fault plan; None: each episode uses the world's own
    fault_plan: FaultPlan | None
    max_turns: int
    max_tool_calls: int
    max_tool_rounds: int
    logprobs: bool
    user_persona: str | None
    user_patience: int | None
    #: the simulated user's instructions: the world's ``user_prompt`` template
    user_prompt: str
    user_context_chars: int

    def settings(self) -> dict[str, Any]:
        """These fields alone, as keywords (for a context or a spec built from this one)."""
        return {f.name: getattr(self, f.name) for f in attrs.fields(RolloutSettings)}


@attrs.frozen(kw_only=True)
class RunSpec(RolloutSettings):
    """Everything a worker needs to run and grade a run's jobs, as picklable data: the
    rollout settings, and the world, models, judge and registry by name.

    Model roles are spec strings resolved on the driver (so a worker with other environment
    variables still calls the same models), or the agent as your own function."""

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
    concurrency: int
    #: keyword options the world's factory is built with (``advanced["world_options"]``)
    world_options: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    #: the model spec of the attribution judge (``advanced["attribution_model"]``), or None
    attribution_model: str | None = None

    def problems(self) -> list[str]:
        """What in this run a worker could not rebuild, each with what to pass instead."""
        return ship_problems(self.agent_model, self.user_model, self.registry)


def ship_problems(agent_model: Any, user_model: Any, registry: RegistrySpec) -> list[str]:
    """What of a run a worker could not rebuild, each with what to pass instead."""
    out = []
    live_agent = not isinstance(agent_model, str) and not is_agent_function(agent_model)
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


# -- rows of jobs -----------------------------------------------------------------------


def job_task(job: Job) -> Task:
    """The task half of a job's row: the situation as the agent and the judge see it."""
    situation = job.situation
    return Task(
        prompt=situation.prompt,
        task_id=job.scenario_id,
        scenario_id=job.scenario_id,
        privileged=privileged_block(situation),
        scenario_dimensions=dict(situation.dimensions) or dict(job.spec),
        arm=job.arm,
        selection_reason=job.selection_reason,
        seed=job.situation_seed if job.situation_seed is not None else job.seed,
        writer_model=situation.writer_model,
    )


def privileged_block(situation: Situation) -> dict[str, Any]:
    """What a situation's rows carry as their answer key (in memory only): the hidden state
    the user knows, the goal, the reference outcome, the judge's principle and rubric. A new
    dict on every call."""
    privileged: dict[str, Any] = {"hidden_state": dict(situation.hidden_state)}
    if situation.goal:
        privileged["goal"] = dict(situation.goal)
    if situation.reference is not None:
        privileged["reference"] = situation.reference
    if situation.principle:
        privileged["principle"] = situation.principle
    if situation.rubric:
        privileged["rubric"] = situation.rubric
    return privileged


def job_lineage(
    job: Job, *, run_id: str, system_prompt: str, system_prompt_sha: str, system_prompt_head: str
) -> dict[str, Any]:
    """Where a job's row came from: the run, the prompt it ran under, its place in the plan."""
    lineage: dict[str, Any] = {
        "run_id": run_id,
        "system_prompt_sha": system_prompt_sha,
        "system_prompt_head": system_prompt_head,
        "system_prompt_chars": len(system_prompt),
        "replayed": job.replayed,
        "rollout_key": job.key,
        "situation": job.situation_index,
        "phrasing": job.phrasing,
        "repeat": job.repeat,
        "rollout_seed": job.seed,
    }
    if job.replayed_from_run is not None:
        lineage["replayed_from_run"] = job.replayed_from_run
    if job.branched_from is not None:
        lineage["branched_from"] = job.branched_from
        lineage["branch_step"] = len(job.prefix)
    return lineage


def unfinished_row(
    job: Job,
    reason: str,
    *,
    run_id: str,
    world: str,
    system_prompt: str,
    system_prompt_sha: str,
    system_prompt_head: str,
    agent_label: str,
    agent_is_function: bool,
    declared_sampling: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The row of a rollout that never ran its course: no steps, ``error`` saying why, the
    judgment skipped, so the job is counted and kept, never lost."""
    sampling = None
    if agent_is_function and declared_sampling is not None:
        sampling = dict(declared_sampling)
    rollout = Rollout(
        final_text="",
        steps=[],
        messages=[
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": job.situation.prompt},
        ],
        sampling=sampling,
        policy_version=f"{agent_label}@{system_prompt_sha}",
        model_version=agent_label,
        lineage=job_lineage(
            job,
            run_id=run_id,
            system_prompt=system_prompt,
            system_prompt_sha=system_prompt_sha,
            system_prompt_head=system_prompt_head,
        ),
        run_id=run_id,
        usage={
            "input_tokens": 0,
            "output_tokens": 0,
            "user_input_tokens": 0,
            "user_output_tokens": 0,
            "cached_input_tokens": 0,
            "user_cached_input_tokens": 0,
            "retries": 0,
            "waited_s": 0.0,
        },
        error=reason,
        extra={"stop_reason": "error", "world": world},
    )
    judgment = Judgment(judge_status="skipped", reason=f"rollout failed: {reason}")
    return to_row(job_task(job), rollout, judgment)


def error_row(run: RunSpec, job: Job, reason: str) -> dict[str, Any]:
    """The row of a job that never finished on its worker: ``error`` says why."""
    return unfinished_row(
        job,
        reason,
        run_id=run.run_id,
        world=run.world,
        system_prompt=run.system_prompt,
        system_prompt_sha=run.system_prompt_sha,
        system_prompt_head=run.system_prompt_head,
        agent_label=run.agent_label,
        agent_is_function=is_agent_function(run.agent_model),
        declared_sampling=run.declared_sampling,
    )


#: What an executor factory returns; ``Callable`` so a class or a function both fit.
ExecutorFactory = Callable[..., Executor]
