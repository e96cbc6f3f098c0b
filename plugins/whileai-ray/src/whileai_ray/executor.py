"""The Ray executor: a run's jobs spread over a pool of Ray actors.

Each actor rebuilds the run once from its description (``whileai.RunSpec``: registry plugins by import name, model specs, knobs; never live backends),
resolving backends in its own process through the installed plugins, then plays and grades
the jobs it is handed, several at once on its own event loop. The driver awaits the actors'
object refs and yields rows as they finish, so the engine streams them to disk as it does for
an in-process run. An actor that dies turns the jobs it held into error rows; the rest go to
the actors still alive.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import Any

import ray
from ray import cloudpickle
from ray.exceptions import RayActorError, RayTaskError

from whileai import Job, JobRunner, RunSpec, error_row
from whileai.simulations.workers import add_counts

#: The Ray namespace of a cluster this executor starts itself.
NAMESPACE = "whileai"


def actor_name(run_id: str, index: int, batch: int = 0) -> str:
    """The name of the ``index``-th actor of a run's ``batch``-th call to ``run`` (a run in
    rl mode sends its extra repeats as a second batch); ``ray.get_actor(name)`` finds it."""
    return f"whileai-{run_id}-{batch}-{index}"


@ray.remote
class RolloutActor:
    """Holds one rebuilt run and plays its jobs; async, so jobs share its event loop."""

    def __init__(self, run: RunSpec) -> None:
        self._run = run
        self._runner: JobRunner | None = None
        self._reported = 0

    async def open(self) -> str:
        """Rebuild the run here (world, backends, judges, markers); returns the process id."""
        if self._runner is None:
            self._runner = await JobRunner.open(self._run)
        return str(os.getpid())

    async def run(self, job: Job) -> tuple[dict[str, Any], list[str]]:
        """One job played and graded, with the warnings raised since the last call."""
        assert self._runner is not None, "open() first"
        row = await self._runner.run(job)
        new = self._runner.warnings[self._reported :]
        self._reported = len(self._runner.warnings)
        return row, list(new)

    async def close(self) -> list[str]:
        return await self._runner.close() if self._runner is not None else []

    async def cache_counts(self) -> dict[str, int]:
        """What the response cache did in this worker's process."""
        return self._runner.cache_counts() if self._runner is not None else {}


async def _result(ref: Any) -> Any:
    return await ref


class RayExecutor:
    """Runs a ``simulate()`` run's rollouts on Ray actors.

    ``address``: None or ``"auto"`` joins the cluster this machine belongs to (``ray start``,
    ``RAY_ADDRESS``) and starts a local one when there is none; ``"ray://host:10001"`` joins
    a remote cluster through Ray Client. ``actors``: the pool size (default: the cluster's
    CPUs, at most one per job). ``cpus_per_actor``: what each actor reserves. Concurrency
    (``advanced={"max_concurrency": ...}``) is shared out across the actors."""

    def __init__(
        self,
        address: str | None = None,
        *,
        actors: int | None = None,
        cpus_per_actor: float = 1.0,
    ) -> None:
        if actors is not None and (isinstance(actors, bool) or actors < 1):
            raise ValueError(f"actors must be a whole number of at least 1, got {actors!r}")
        if cpus_per_actor < 0:
            raise ValueError(f"cpus_per_actor must be >= 0, got {cpus_per_actor!r}")
        self.address = address
        self.actors = actors
        self.cpus_per_actor = cpus_per_actor
        if address is None:
            self.name = "ray"
        else:
            self.name = address if address.startswith("ray://") else f"ray:{address}"
        self.warnings: list[str] = []
        #: what the response cache did in the workers, added up as each is released
        self.cache_counts: dict[str, int] = {}
        self._started = False
        self._batches: dict[str, int] = {}

    # -- the cluster --------------------------------------------------------------------
    def connect(self) -> None:
        """Join the cluster at ``address``, or start a local instance when none runs."""
        if ray.is_initialized():
            return
        if self.address is not None and self.address != "auto":
            ray.init(address=self.address, log_to_driver=False)
            return
        try:
            ray.init(address="auto", log_to_driver=False)
        except ConnectionError:
            ray.init(
                num_cpus=os.cpu_count() or 1,
                include_dashboard=False,
                log_to_driver=False,
                namespace=NAMESPACE,
            )
            self._started = True

    def close(self) -> None:
        """Shut down the local Ray instance if this executor started it, and only then."""
        if self._started and ray.is_initialized():
            ray.shutdown()
        self._started = False

    def _pool_size(self, jobs: int) -> int:
        if self.actors is not None:
            return min(self.actors, jobs)
        cpus = float(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]
        per = self.cpus_per_actor or 1.0
        return max(1, min(jobs, int(cpus // per) or 1))

    # -- a run --------------------------------------------------------------------------
    async def run(
        self, jobs: Sequence[Job], concurrency: int, run: RunSpec
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield each job's graded row as its actor finishes it."""
        try:
            cloudpickle.dumps(run)  # type: ignore[no-untyped-call]
        except Exception as exc:
            raise ValueError(
                f"executor={self.name!r} cannot ship this run to Ray workers: "
                f"{type(exc).__name__}: {exc}. An agent or judge function must be picklable by "
                "cloudpickle (no open files, locks or live clients in what it refers to)"
            ) from exc
        self.connect()
        size = self._pool_size(len(jobs))
        per_actor = max(1, math.ceil(concurrency / size))
        shared = ray.put(run)
        batch = self._batches.get(run.run_id, 0)
        self._batches[run.run_id] = batch + 1
        actors = [
            RolloutActor.options(  # type: ignore[attr-defined]
                name=actor_name(run.run_id, i, batch),
                max_concurrency=per_actor,
                num_cpus=self.cpus_per_actor,
            ).remote(shared)
            for i in range(size)
        ]
        alive = [True] * size
        queue: deque[Job] = deque(jobs)
        pending: dict[asyncio.Future[Any], tuple[int, Job]] = {}

        def submit(i: int) -> None:
            while alive[i] and queue and sum(1 for a, _ in pending.values() if a == i) < per_actor:
                job = queue.popleft()
                pending[asyncio.ensure_future(_result(actors[i].run.remote(job)))] = (i, job)

        try:
            opened = await asyncio.gather(
                *(_result(a.open.remote()) for a in actors), return_exceptions=True
            )
            for i, outcome in enumerate(opened):
                if isinstance(outcome, RayActorError):
                    alive[i] = False
                elif isinstance(outcome, BaseException):
                    raise RuntimeError(
                        f"a Ray worker could not rebuild the run: {_cause(outcome)}"
                    ) from outcome
            for i in range(size):
                submit(i)
            while pending or queue:
                if not pending:
                    # no actor left to take them: each remaining job is an error row
                    while queue:
                        yield error_row(run, queue.popleft(), "no Ray worker left to run it")
                    break
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    i, job = pending.pop(future)
                    try:
                        row, warnings = future.result()
                    except RayActorError as exc:
                        alive[i] = False
                        yield error_row(run, job, f"the Ray worker running it died: {_cause(exc)}")
                    except RayTaskError as exc:
                        yield error_row(run, job, f"the Ray worker failed: {_cause(exc)}")
                    else:
                        for warning in warnings:
                            if warning not in self.warnings:
                                self.warnings.append(warning)
                        yield row
                    submit(i)
        finally:
            for future in pending:
                future.cancel()
            await self._release(actors, alive)

    async def _release(self, actors: list[Any], alive: list[bool]) -> None:
        for i, actor in enumerate(actors):
            if alive[i]:
                try:
                    add_counts(self.cache_counts, await _result(actor.cache_counts.remote()))
                    for problem in await _result(actor.close.remote()):
                        if problem not in self.warnings:
                            self.warnings.append(problem)
                except Exception as exc:
                    self.warnings.append(f"a Ray worker did not close: {_cause(exc)}")
            ray.kill(actor)


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}".strip()


def make_executor(
    address: str | None = None,
    *,
    actors: int | None = None,
    cpus_per_actor: float = 1.0,
) -> RayExecutor:
    """The factory behind ``executor="ray"`` and ``"ray:<address>"`` (``"ray:auto"``,
    ``"ray://host:10001"``, which the spec parser hands over as ``"//host:10001"``)."""
    if address is not None and address.startswith("//"):
        address = "ray:" + address
    return RayExecutor(address or None, actors=actors, cpus_per_actor=cpus_per_actor)
