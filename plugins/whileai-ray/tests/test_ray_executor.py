"""simulate(executor=...) on a real local Ray instance: the shop world, template situations and
a scripted agent, rebuilt in Ray's worker processes from the run's description."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import ray
import ray_doubles as rd

import whileai as wai
from whileai.registry import Registry
from whileai_ray.executor import RayExecutor

pytestmark = pytest.mark.usefixtures("ray_cluster")


def run(*plugins: object, **params: Any) -> Any:
    given: dict[str, Any] = {
        "agent_model": "support:scripted",
        "user_model": "customer:pleased",
        "simulator": "template",
        "hard_share": 0.0,
        **params,
    }
    return wai.simulate(registry=Registry.load(plugins=[rd.RayDoubles(), *plugins]), **given)


def outcome(rows: Any) -> list[tuple[Any, ...]]:
    """Everything but the run id: where a rollout ran must not change it."""
    return [
        (
            r["lineage"]["rollout_key"],
            r["scenario_id"],
            r["reward"],
            r.get("judge_status"),
            r.get("error"),
            r["final_text"],
            r["faults"],
            r["world_state"],
            r.get("markers"),
        )
        for r in rows
    ]


def test_whileai_register_executors_gives_the_ray_executor() -> None:
    registry = Registry.load()
    assert registry.lookup("executor", "ray")[0].distribution == "whileai-ray"
    remote = registry.resolve("executor", "ray://head:10001")
    assert isinstance(remote, RayExecutor) and remote.address == "ray://head:10001"
    assert registry.resolve("executor", "ray:auto").name == "ray:auto"


def test_a_ray_run_gives_the_same_rows_as_an_in_process_run() -> None:
    on_ray = run(unique=4, repeats=2, seed=7, fault_rate=0.4, executor="ray")
    here = run(unique=4, repeats=2, seed=7, fault_rate=0.4)
    assert len(on_ray.rows) == 8
    assert outcome(on_ray.rows) == outcome(here.rows)
    assert any(r["faults"] for r in on_ray.rows), "faults fired on the workers too"
    graded = [r for r in on_ray.rows if r["reward"] is not None]
    assert graded and all(r["judge_name"] == "world:shop" for r in graded)
    assert on_ray.report().executor == "ray" and here.report().executor == "in-process"
    assert on_ray.report().n_errors == here.report().n_errors
    # the privileged block came back for the judge and stays out of the rows
    assert "hidden_state" in on_ray.trajectories[0]["privileged"]
    assert all("privileged" not in r for r in on_ray.rows)
    assert ray.is_initialized(), "a cluster the executor did not start is left running"


def test_rows_stream_to_output_and_a_cut_run_resumes_on_ray(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    full = run(unique=3, repeats=2, seed=2, output=str(out), executor="ray")
    # a streamed run's rows are read from its file: read them before the file is cut
    full_outcome = outcome(full.rows)
    lines = out.read_text().splitlines()
    assert len(lines) == 6
    # cut the run: keep two rows on disk and mark it unfinished, as a killed process leaves it
    out.write_text("\n".join(lines[:2]) + "\n")
    side = tmp_path / "run.meta.json"
    sidecar = json.loads(side.read_text())
    sidecar["complete"] = False
    side.write_text(json.dumps(sidecar))
    resumed = run(unique=3, repeats=2, seed=2, output=str(out), resume=True, executor="ray")
    keys = [r["lineage"]["rollout_key"] for r in resumed.rows]
    assert len(keys) == len(set(keys)) == 6
    assert resumed.metadata["run_id"] == full.metadata["run_id"]
    assert sorted(outcome(resumed.rows)) == sorted(full_outcome)
    assert len(out.read_text().splitlines()) == 6


def test_an_agent_function_is_shipped_by_cloudpickle() -> None:
    said = "Sorry, I cannot look that up."

    def agent(messages: list[dict[str, Any]]) -> str:
        return said  # a closure: only cloudpickle ships it

    data = run(unique=2, repeats=1, agent_model=agent, executor="ray")
    assert [r["final_text"] for r in data.rows] == [said, said]
    assert data.rows[0]["model_version"].startswith("callable:")
    assert all(r["reward"] is not None and not r.get("error") for r in data.rows)


def test_a_live_backend_object_is_refused_with_what_to_pass_instead() -> None:
    with pytest.raises(ValueError, match="agent_model is a live backend object") as raised:
        run(unique=1, repeats=1, agent_model=rd.ScriptedSupportAgent(), executor="ray")
    assert "model spec string" in str(raised.value)


def test_a_killed_actor_turns_the_jobs_it_held_into_error_rows() -> None:
    killer = rd.KillFirstActor()
    data = run(
        killer,
        unique=4,
        repeats=2,
        agent_model="support:slow",
        fault_rate=0.0,  # only the killed actor may fail a job here
        executor=RayExecutor(actors=2),
        advanced={"max_concurrency": 4},
    )
    assert killer.killed, "the actor was killed mid-run"
    assert len(data.rows) == 8, "every planned job comes back, finished or not"
    keys = {r["lineage"]["rollout_key"] for r in data.rows}
    assert len(keys) == 8
    lost = [r for r in data.rows if r.get("error")]
    assert lost and all("died" in r["error"] for r in lost), [r["error"] for r in lost]
    assert all(r["judge_status"] == "skipped" for r in lost)
    finished = [r for r in data.rows if not r.get("error")]
    assert finished and all(r["reward"] is not None for r in finished)
    assert data.report().n_errors == len(lost)


def test_an_agent_function_cloudpickle_cannot_ship_is_refused_before_any_rollout() -> None:
    lock = threading.Lock()

    def agent(messages: list[dict[str, Any]]) -> str:
        with lock:  # a lock cannot travel to another process
            return "On it."

    with pytest.raises(ValueError, match="cannot ship this run to Ray workers") as raised:
        run(unique=1, repeats=1, agent_model=agent, executor="ray")
    assert "picklable by cloudpickle" in str(raised.value)


def test_rl_mode_sends_its_extra_repeats_to_ray_and_matches_an_in_process_run() -> None:
    given: dict[str, Any] = {"unique": 4, "repeats": 2, "seed": 7, "fault_rate": 0.4}
    on_ray = run(mode="rl", budget=16, executor="ray", **given)
    here = run(mode="rl", budget=16, **given)
    # rl puts repeats where groups split: some group got more than the first two
    assert len(on_ray.rows) > 8
    assert sorted(outcome(on_ray.rows)) == sorted(outcome(here.rows))
    assert on_ray.report().executor == "ray"


def test_the_response_cache_answers_on_the_workers_and_the_driver_counts_it(
    tmp_path: Path,
) -> None:
    cache = {"cache": str(tmp_path / "cache")}
    first = run(unique=3, repeats=2, seed=4, fault_rate=0.0, executor="ray", advanced=cache)
    again = run(unique=3, repeats=2, seed=4, fault_rate=0.0, executor="ray", advanced=cache)
    counted, recounted = first.report()["cache"], again.report()["cache"]
    # the workers asked the models and stored the answers; the second run's workers found
    # every one of them, and both runs' reports say so although no call was the driver's
    assert counted["misses"] > 0 and counted["hits"] == 0
    assert recounted["hits"] == counted["misses"] and recounted["misses"] == 0
    assert outcome(again.rows) == outcome(first.rows)
