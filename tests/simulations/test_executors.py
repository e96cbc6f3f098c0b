"""simulate(executor=): the in-process default, an executor object that rebuilds the run from
its picklable description (as a remote worker does), and the errors for runs that cannot
leave this process."""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import AsyncIterator, Sequence
from typing import Any

import attrs
import pytest
import sim_doubles as d

import whileai as wai
from whileai import Job, JobRunner, RunSpec, error_row, hookimpl


def run(registry: Any = None, **kwargs: Any) -> Any:
    params = {**d.BASE, **kwargs}
    return wai.simulate(registry=registry or d.registry(), **params)


def outcome(rows: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What must not depend on where a rollout ran (the run id does)."""
    return [
        (
            r["lineage"]["rollout_key"],
            r["scenario_id"],
            r["reward"],
            r["final_text"],
            [f["kind"] for f in r.get("faults") or []],
            r.get("markers"),
        )
        for r in rows
    ]


class PickledExecutor:
    """Ships the run description through pickle and rebuilds it, as a worker process would;
    the last job of each batch is reported as lost when ``lose_last`` is set."""

    name = "pickled"

    def __init__(self, lose_last: bool = False) -> None:
        self.lose_last = lose_last
        self.jobs_seen: list[str] = []
        self.concurrency: int | None = None
        self.warnings: list[str] = []

    async def run(
        self, jobs: Sequence[Job], concurrency: int, run: RunSpec
    ) -> AsyncIterator[dict[str, Any]]:
        self.concurrency = concurrency
        shipped: RunSpec = pickle.loads(pickle.dumps(run))
        runner = await JobRunner.open(shipped)
        try:
            for i, job in enumerate(jobs):
                self.jobs_seen.append(job.key)
                if self.lose_last and i == len(jobs) - 1:
                    yield error_row(shipped, job, "worker died: the test killed it")
                else:
                    yield await runner.run(job)
        finally:
            self.warnings.extend(runner.warnings)
            await runner.close()


def test_by_default_rollouts_run_in_this_process_and_the_report_says_so() -> None:
    data = run(unique=2, repeats=2, seed=3)
    assert data.report().executor == "in-process"
    assert "executor" in str(data.report()) and len(data.rows) == 4


def test_an_executor_object_gets_the_jobs_and_gives_the_same_rows_as_in_process() -> None:
    executor = PickledExecutor()
    shipped = run(unique=3, repeats=2, seed=5, fault_rate=0.5, executor=executor)
    local = run(unique=3, repeats=2, seed=5, fault_rate=0.5)
    assert sorted(executor.jobs_seen) == sorted(r["lineage"]["rollout_key"] for r in local.rows)
    assert executor.concurrency == local.report().knobs["max_concurrency"]
    assert outcome(shipped.rows) == outcome(local.rows)
    assert any(r.get("faults") for r in shipped.rows), "the fault plan travelled with the run"
    assert shipped.report().executor == "pickled"
    # the privileged block is kept for the judge, and stays out of the rows
    assert "hidden_state" in shipped.trajectories[0]["privileged"]


def shipped_agent(messages: list[dict[str, Any]]) -> str:
    return "Your order has shipped."


def says_shipped(row: dict[str, Any]) -> float:
    return 1.0 if "shipped" in row["final_text"] else 0.0


def test_a_judge_callable_and_an_agent_function_travel_with_the_run() -> None:
    executor = PickledExecutor()
    data = run(
        unique=1, repeats=2, agent_model=shipped_agent, judge=says_shipped, executor=executor
    )
    assert [r["reward"] for r in data.rows] == [1.0, 1.0]
    assert data.rows[0]["model_version"].startswith("callable:")


def test_a_lost_job_is_an_error_row_that_is_counted_and_written(tmp_path: Any) -> None:
    out = str(tmp_path / "run.jsonl")
    data = run(unique=2, repeats=2, output=out, executor=PickledExecutor(lose_last=True))
    assert len(data.rows) == 4
    lost = [r for r in data.rows if r.get("error")]
    assert len(lost) == 1 and "worker died" in lost[0]["error"]
    assert lost[0]["judge_status"] == "skipped" and lost[0]["reward"] is None
    assert data.report().n_errors == 1
    on_disk = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert sorted(r["lineage"]["rollout_key"] for r in on_disk) == sorted(
        r["lineage"]["rollout_key"] for r in data.rows
    )
    assert json.loads((tmp_path / "run.meta.json").read_text())["report"]["executor"] == "pickled"


def test_an_unknown_executor_name_says_which_package_to_install() -> None:
    with pytest.raises(wai.UnknownPluginError, match="pip install whileai-ray"):
        run(unique=1, repeats=1, executor="ray:auto")


def test_a_live_backend_object_cannot_leave_the_process() -> None:
    with pytest.raises(ValueError, match="agent_model is a live backend object") as raised:
        run(unique=1, repeats=1, agent_model=d.FakeBackend("agent"), executor=PickledExecutor())
    assert "model spec string" in str(raised.value)


def test_a_plugin_a_worker_cannot_import_is_refused_up_front() -> None:
    class LocalPlugin:
        @hookimpl
        def whileai_register_markers(self, register: Any) -> None:
            register("always_one", lambda: lambda row: 1)

    with pytest.raises(ValueError, match="not importable by name") as raised:
        run(d.registry(LocalPlugin()), unique=1, repeats=1, executor=PickledExecutor())
    assert "LocalPlugin" in str(raised.value) and "registry=" in str(raised.value)


def test_executor_must_be_a_name_or_an_object_with_run() -> None:
    with pytest.raises(TypeError, match="executor must be None"):
        run(unique=1, repeats=1, executor=42)


def test_the_executor_contract_is_public_and_an_in_process_executor_meets_it() -> None:
    from whileai.simulations.workers import InProcessExecutor

    assert isinstance(InProcessExecutor(), wai.Executor)
    assert isinstance(PickledExecutor(), wai.Executor)
    assert wai.Job is Job and wai.RunSpec is RunSpec and wai.JobRunner is JobRunner


def test_an_error_row_is_the_row_a_rollout_that_could_not_start_writes() -> None:
    """A job lost on a worker and a job whose world refused to start both come back as the
    same row, built from the schema: nothing in it is faked or left out."""
    executor = PickledExecutor(lose_last=True)
    lost = run(executor=executor, unique=1, repeats=1).rows[0]
    assert lost["error"] == "worker died: the test killed it"
    assert lost["judge_status"] == "skipped"
    assert lost["reason"] == "rollout failed: worker died: the test killed it"
    assert lost["policy_version"] == f"fake:agent@{lost['lineage']['system_prompt_sha']}"
    assert lost["usage"]["input_tokens"] == 0 and lost["steps"] == []
    assert lost["world"] == "tinyshop" and lost["stop_reason"] == "error"
    wai.from_row(lost)  # a valid row of the schema

    class NoEpisodes(d.TinyShop):
        def new_episode(self, situation: Any, rng: Any, fault_plan: Any = None) -> Any:
            raise RuntimeError("worker died: the test killed it")

    class Worlds:
        @hookimpl
        def whileai_register_worlds(self, register: Any) -> None:
            register("noepisodes", lambda **_: NoEpisodes(name="tinyshop"))

    started = run(d.registry(Worlds()), unique=1, repeats=1, advanced={"world": "noepisodes"})
    failed = started.rows[0]
    same = {"task_id", "prompt", "steps", "messages", "usage", "policy_version", "sampling"}
    assert {k: failed[k] for k in same} == {k: lost[k] for k in same}
    assert failed["error"].endswith("worker died: the test killed it")


def test_asimulate_has_simulates_signature() -> None:
    import inspect

    assert inspect.signature(wai.asimulate).parameters == inspect.signature(wai.simulate).parameters
    assert "advanced" in inspect.signature(wai.asimulate).parameters


def test_each_rollout_has_a_context_of_its_own_for_what_its_backend_sets() -> None:
    # a backend that keeps per-call state in a context variable (a tracer's span, say) must
    # find it unset at every rollout's start, however many run at once
    import contextvars

    from whileai.testing import ScriptedBackend

    current: contextvars.ContextVar[str | None] = contextvars.ContextVar("current", default=None)
    seen: list[str | None] = []

    def answer(messages: Any, tools: Any) -> str:
        seen.append(current.get())
        current.set(str(messages[-1]["content"]))
        return "Done."

    agent = ScriptedBackend("agent:traced", answer)
    advanced = {**d.BASE["advanced"], "max_concurrency": 8}
    data = run(agent_model=agent, unique=6, repeats=4, max_turns=1, advanced=advanced)
    assert len(list(data.rows)) == 24
    assert seen == [None] * 24
    assert current.get() is None


@attrs.frozen
class Pending:
    """What the in-process executor reads of a job itself: its key."""

    key: str


class CountingRunner:
    """A job runner whose rollouts finish at once (``wait=0``) or after ``wait`` seconds, and
    which counts how many are running and how many have finished."""

    def __init__(self, wait: float = 0.0) -> None:
        self.wait = wait
        self.started = self.running = self.most_running = self.finished = 0
        self.started_at_close: int | None = None

    async def run(self, job: Job) -> dict[str, Any]:
        assert asyncio.current_task().get_name() == job.key  # type: ignore[union-attr]
        self.started += 1
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        if self.wait:
            await asyncio.sleep(self.wait)
        self.running -= 1
        self.finished += 1
        return {"job": int(job.key)}


def play(runner: CountingRunner, jobs: int, concurrency: int, stop_after: int | None = None) -> Any:
    """The in-process executor over ``jobs`` jobs: the rows it yields and, at each, how many
    rollouts had finished without being yielded yet."""
    from whileai.simulations.workers import InProcessExecutor

    async def main() -> tuple[list[int], list[int]]:
        executor = InProcessExecutor(runner)  # type: ignore[arg-type]
        rows, waiting = [], []
        pending = [Pending(str(i)) for i in range(jobs)]
        stream: Any = executor.run(pending, concurrency, None)  # type: ignore[arg-type]
        async for row in stream:
            rows.append(row["job"])
            waiting.append(runner.finished - len(rows))
            if stop_after is not None and len(rows) == stop_after:
                await stream.aclose()
                runner.started_at_close = runner.started
                break
        # what the executor left scheduled would run now
        for _ in range(5):
            await asyncio.sleep(0)
        return rows, waiting

    return asyncio.run(main())


def test_rollouts_that_never_wait_are_handed_on_a_wave_at_a_time() -> None:
    # a function agent or a cached model: 256 may be in flight, but a row waits for its
    # export behind a handful of others, not behind 255 (rows that wait long are promoted to
    # the oldest garbage generation, and its full collections stall the run)
    runner = CountingRunner()
    rows, waiting = play(runner, 1000, concurrency=256)
    assert sorted(rows) == list(range(1000))
    assert max(waiting) <= 16, max(waiting)


def test_rollouts_that_wait_on_a_model_still_fill_the_concurrency() -> None:
    runner = CountingRunner(wait=0.05)
    rows, _ = play(runner, 200, concurrency=64)
    assert sorted(rows) == list(range(200))
    assert runner.most_running == 64


def test_a_run_closed_early_starts_nothing_more() -> None:
    # a budget or an interrupted consumer closes the stream: the next wave must not start
    runner = CountingRunner()
    rows, _ = play(runner, 1000, concurrency=256, stop_after=3)
    assert len(rows) == 3
    assert runner.started == runner.started_at_close
    assert runner.running == 0  # none left running: each finished or was cancelled
