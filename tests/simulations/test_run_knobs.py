"""Knobs that say what they do: the world's own fault plan when the run sets none, and a
resume that refuses a changed fault rate, turn limit or agent as it refuses a changed seed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import attrs
import pytest
import sim_doubles as d

import whileai as wai
from whileai import hookimpl
from whileai.worlds import FaultPlan


@attrs.define
class TimeoutShop(d.TinyShop):
    """A tiny shop configured, as a world may be, with a plan of its own."""

    name: str = "timeoutshop"
    fault_plan: FaultPlan = FaultPlan(("timeout",), rate=1.0)

    def new_episode(self, situation: Any, rng: Any, fault_plan: FaultPlan | None = None) -> Any:
        # as the shop does: the plan the engine passes wins over the world's own
        return super().new_episode(situation, rng, fault_plan or self.fault_plan)


class Worlds:
    @hookimpl
    def whileai_register_worlds(self, register: Any) -> None:
        register("timeoutshop", TimeoutShop)


def run(**given: Any) -> Any:
    params = {**d.BASE, **given}
    params["advanced"] = {**d.BASE["advanced"], **given.get("advanced", {})}
    return wai.simulate(registry=d.registry(Worlds()), **params)


def test_the_worlds_own_fault_plan_applies_when_the_run_sets_none() -> None:
    data = run(unique=3, repeats=1, advanced={"world": "timeoutshop"})
    kinds = {f["kind"] for r in data.rows for f in r["faults"]}
    assert kinds == {"timeout"}
    report = data.report()
    assert report.fault_rate == 1.0 and report.world["fault_kinds"] == ["timeout"]
    assert report.world_note == (
        "no fault_rate or fault_kinds given: the world's own fault plan applies (timeout at 1.0)"
    )


def test_a_rate_or_kinds_the_caller_gives_replace_the_worlds_plan() -> None:
    calm = run(unique=3, repeats=1, fault_rate=0.0, advanced={"world": "timeoutshop"})
    assert all(r["faults"] == [] for r in calm.rows)
    other = run(
        unique=3, repeats=1, advanced={"world": "timeoutshop", "fault_kinds": ["malformed"]}
    )
    assert other.report().world["fault_kinds"] == ["malformed"]


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"fault_rate": 0.5}, "fault_rate"),
        ({"max_turns": 2}, "max_turns"),
        ({"agent_model": "fake:slow-agent"}, "agent_model"),
        ({"user_model": "fake:silent-user"}, "user_model"),
        ({"max_tool_calls": 2}, "max_tool_calls"),
        ({"sampling": {"top_p": 0.5}}, "sampling"),
        ({"logprobs": True}, "logprobs"),
        ({"advanced": {"agent_temperature": 0.1}}, r"advanced\.agent_temperature"),
        ({"advanced": {"fault_kinds": ["timeout"]}}, r"advanced\.fault_kinds"),
        ({"seed": 9}, "seed"),
    ],
)
def test_resume_refuses_a_run_started_under_other_rollout_settings(
    tmp_path: Any, changed: dict[str, Any], named: str
) -> None:
    out = str(tmp_path / "run.jsonl")
    run(unique=2, repeats=1, fault_rate=0.2, output=out)
    given = {"unique": 2, "repeats": 1, "fault_rate": 0.2, **changed}
    with pytest.raises(ValueError, match=f"started with other settings: .*{named}: saved"):
        run(output=out, resume=True, **given)
    run(unique=2, repeats=1, fault_rate=0.2, output=out, resume=True)  # unchanged: resumes


def test_resume_may_change_how_fast_a_run_goes(tmp_path: Any) -> None:
    out = str(tmp_path / "run.jsonl")
    run(unique=2, repeats=1, output=out)
    again = run(unique=2, repeats=1, output=out, resume=True, advanced={"max_concurrency": 3})
    assert len(again.rows) == 2


def test_resume_refuses_rows_without_their_sidecar(tmp_path: Any) -> None:
    out = tmp_path / "run.jsonl"
    run(unique=2, repeats=1, output=str(out))
    (tmp_path / "run.meta.json").unlink()
    with pytest.raises(ValueError, match=r"has 2 rows and no sidecar \(run.meta.json\)"):
        run(unique=2, repeats=1, output=str(out), resume=True)


def test_resume_refuses_rows_another_run_appended(tmp_path: Any) -> None:
    out = tmp_path / "run.jsonl"
    other = tmp_path / "other.jsonl"
    run(unique=2, repeats=1, output=str(out))
    run(unique=2, repeats=1, seed=5, output=str(other))
    with out.open("a") as f:
        f.write(other.read_text())
    with pytest.raises(ValueError, match=r"2 of the 4 rows in .* belong to another run"):
        run(unique=2, repeats=1, output=str(out), resume=True)


def test_a_second_writer_on_one_output_is_refused(tmp_path: Any) -> None:
    from whileai.schema.files import OutputBusy, OutputLock

    out = tmp_path / "run.jsonl"
    held = OutputLock.take(out)  # as a run in another process holds it
    try:
        with pytest.raises(OutputBusy, match=r"being written by another run \(pid \d+\)"):
            run(unique=1, repeats=1, output=str(out))
    finally:
        held.release()
    assert len(run(unique=1, repeats=1, output=str(out)).rows) == 1  # free again
    assert not (tmp_path / "run.jsonl.lock").exists()


def test_a_killed_runs_temporary_files_are_removed_on_the_next_open(tmp_path: Any) -> None:
    out = tmp_path / "run.jsonl"
    run(unique=1, repeats=1, output=str(out))
    stale = tmp_path / ".run.meta.json.999999999.tmp"  # no such process
    stale.write_text("{half")
    stale_rows = tmp_path / ".run.jsonl.999999998.tmp"
    stale_rows.write_text("{half")
    # a live writer's temporary, another output's, and files that only look alike stay
    kept = [
        tmp_path / f".run.jsonl.{os.getpid()}.tmp",
        tmp_path / ".other.jsonl.999999999.tmp",
        tmp_path / ".run.jsonl.draft.tmp",
        tmp_path / "run.jsonl.999999999.tmp",
    ]
    for path in kept:
        path.write_text("{}")
    data = run(unique=1, repeats=1, output=str(out), resume=True)
    assert not stale.exists() and not stale_rows.exists()
    assert all(path.exists() for path in kept)
    assert "removed 2 temporary files a killed run left beside" in " ".join(data.warnings)


def test_a_run_killed_before_its_first_row_is_cleaned_up_by_the_next_run(tmp_path: Any) -> None:
    # a writer killed after taking the output and starting its sidecar, before any row: it
    # leaves its lock file (with its pid) and a half-written temporary, and no rows or sidecar
    out = tmp_path / "run.jsonl"
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys; from whileai.schema.files import OutputLock; "
            "OutputLock.take(sys.argv[1]); "
            "open(os.path.join(os.path.dirname(sys.argv[1]), "
            "f'.run.meta.json.{os.getpid()}.tmp'), 'w').write('{half'); "
            "os.kill(os.getpid(), signal.SIGKILL)",
            str(out),
        ],
        check=False,
        timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL
    pid = (tmp_path / "run.jsonl.lock").read_text()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [f".run.meta.json.{pid}.tmp", "run.jsonl.lock"]
    data = run(unique=1, repeats=1, output=str(out))
    assert "removed 1 temporary file a killed run left beside" in " ".join(data.warnings)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl", "run.meta.json"]


def test_a_loop_writing_a_run_per_step_into_one_directory_does_not_read_it_each_step(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a training loop: one output a step, all in one directory, which only grows; looking
    # through it for a killed run's temporaries on every step would cost more each step
    listed: list[str] = []
    listdir = os.listdir

    def counting(path: Any = ".") -> list[str]:
        listed.append(os.fspath(path))
        return listdir(path)

    monkeypatch.setattr(os, "listdir", counting)
    for step in range(5):
        run(unique=1, repeats=1, seed=step, output=str(tmp_path / f"step-{step}.jsonl"))
    assert str(tmp_path) not in listed
    # an output that holds a run may have a killed writer's temporaries beside it: looked for
    run(unique=1, repeats=1, seed=0, output=str(tmp_path / "step-0.jsonl"), resume=True)
    assert listed.count(str(tmp_path)) == 1


def test_a_save_onto_an_output_a_run_is_writing_is_refused(tmp_path: Any) -> None:
    from whileai.schema.files import OutputBusy, OutputLock

    out = tmp_path / "run.jsonl"
    data = run(unique=2, repeats=1)
    data.save(out)
    before = out.read_bytes()
    held = OutputLock.take(out)  # a run in another process appending to it
    try:
        # replacing the file would leave that run appending to a file no longer there
        with pytest.raises(OutputBusy, match=r"being written by another run"):
            run(unique=3, repeats=1).save(out)
    finally:
        held.release()
    assert out.read_bytes() == before
    assert len(run(unique=3, repeats=1).save(out).read_text().splitlines()) == 3


def test_a_save_that_fails_midway_leaves_the_file_as_it_was(tmp_path: Any) -> None:
    from whileai.schema.files import write_rows

    out = tmp_path / "rows.jsonl"
    write_rows(out, [{"prompt": "kept"}])

    def rows() -> Any:
        yield {"prompt": "first"}
        raise OSError("the source went away")

    with pytest.raises(OSError, match="the source went away"):
        write_rows(out, rows())
    assert out.read_text() == '{"prompt":"kept"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]


def test_readers_of_a_run_file_count_each_rollout_once(tmp_path: Any) -> None:
    from whileai.schema.source import DuplicateRowsWarning

    out = tmp_path / "run.jsonl"
    data = run(unique=3, repeats=2, output=str(out))
    lines = out.read_text().splitlines(keepends=True)
    with out.open("a") as f:
        f.writelines(lines[:3])  # a second writer appended three rollouts again
    with pytest.warns(DuplicateRowsWarning, match="3 rows repeat a rollout already read"):
        from_file = wai.pass_at(str(out))
    assert from_file.pass_at_1 == data.pass_at.pass_at_1


def test_a_half_written_sidecar_names_its_file(tmp_path: Any) -> None:
    out = tmp_path / "run.jsonl"
    run(unique=1, repeats=1, output=str(out))
    (tmp_path / "run.meta.json").write_text('{"metadata": {"run_')
    with pytest.raises(ValueError, match=r"run.meta.json is not a readable whileai run sidecar"):
        run(unique=1, repeats=1, output=str(out), resume=True)


@pytest.mark.parametrize(
    ("given", "error", "says"),
    [
        ({"strategy": 42}, TypeError, r"strategy=42 has neither ask"),
        ({"tasks": [1]}, ValueError, r"tasks\[0\] must be a prompt string"),
        ({"output": ""}, ValueError, r"output must be the path of a JSONL file"),
        ({"sampling": {"temperature": -5}}, ValueError, r"sampling\['temperature'\] must be"),
        ({"sampling": {"max_tokens": -1}}, ValueError, r"sampling\['max_tokens'\] must be a whole"),
        (
            {"strategy": "alternate", "arm_weights": {"a": float("nan")}},
            ValueError,
            r"arm_weights must be \{arm: finite weight >= 0\}",
        ),
        (
            {"repeats": 10**8},
            ValueError,
            r"the plan is 100,000,000 rollouts \(unique=1 x requests_per_situation=1 x "
            r"repeats=100000000\), above the",
        ),
        # a value given by its alias is named as it was written
        ({"repeats": 0}, ValueError, r"^repeats must be a whole number of at least 1, got 0$"),
        ({"rollouts_per_request": 0}, ValueError, r"^rollouts_per_request must be a whole"),
        ({"n": "2"}, ValueError, r"^n must be a whole number of at least 1, got '2'$"),
        ({"risk": 1.5}, ValueError, r"^risk must be a number in \[0, 1\], got 1.5$"),
        ({"policy": 3}, TypeError, r"^policy must be a string, got int$"),
        # a typo is named under the function the caller called, with what it may have meant
        (
            {"uniq": 3},
            TypeError,
            r"^simulate\(\) got an unexpected keyword argument 'uniq' \(did you mean 'unique'\?\)$",
        ),
        ({"zzz": 3}, TypeError, r"^simulate\(\) got an unexpected keyword argument 'zzz'$"),
    ],
)
def test_bad_input_is_refused_at_the_door_naming_the_argument(
    given: dict[str, Any], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        run(unique=1, **given)


@pytest.mark.parametrize(
    ("call", "given", "says"),
    [
        (
            wai.asimulate,
            {"uniq": 3},
            r"^asimulate\(\) got an unexpected keyword argument 'uniq' \(did you mean 'unique'\?\)$",
        ),
        (
            wai.abranch,
            {"repeat": 3},
            r"^abranch\(\) got an unexpected keyword argument 'repeat' \(did you mean 'repeats'\?\)$",
        ),
    ],
)
def test_the_async_calls_name_a_typo_as_their_twins_do(
    call: Any, given: dict[str, Any], says: str
) -> None:
    import asyncio
    import inspect

    assert inspect.iscoroutinefunction(call)
    with pytest.raises(TypeError, match=says):
        asyncio.run(call([], 0, **given) if call is wai.abranch else call(**given))


def test_a_registry_that_is_not_one_is_named() -> None:
    with pytest.raises(TypeError, match=r"registry= must be a whileai Registry .* got str 'x'"):
        wai.simulate(registry="x", unique=1)  # type: ignore[arg-type]


def test_one_served_model_under_two_specs_is_the_same_model() -> None:
    from whileai.simulations.models import same_model
    from whileai.testing import BackendsPlugin, ScriptedBackend

    def served(name: str, base_url: str, model: str | None) -> ScriptedBackend:
        backend = ScriptedBackend(name, lambda m, t: "Your order is shipped. [DONE]")
        backend.base_url, backend.model = base_url, model  # type: ignore[attr-defined]
        return backend

    agent = served("a", "http://gpu:8000/v1", "qwen-7b")
    user = served("b", "http://gpu:8000/v1/", None)  # asks the endpoint for what it serves
    other = served("c", "http://gpu:9000/v1", "llama-8b")
    assert same_model(agent, "a", user, "b")
    assert not same_model(agent, "a", other, "c")
    data = wai.simulate(
        registry=d.registry(
            BackendsPlugin(
                agent=lambda argument=None, **_: agent, user=lambda argument=None, **_: user
            )
        ),
        agent_model="agent",
        user_model="user",
        simulator="template",
        unique=1,
        repeats=1,
        advanced={"world": "tinyshop"},
    )
    assert data.degraded == ["same_model"]
    assert any("also played the user" in w for w in data.warnings)


class ModelJudge:
    """A judge that runs on a model, given the run's judge model as backend=."""

    name = "modeljudge"
    version = "1"

    def __init__(self, backend: str, registry: Any) -> None:
        self.backend = registry.resolve("backend", backend)

    def __call__(self, row: Any) -> float:
        return 1.0


class Judges:
    @hookimpl
    def whileai_register_judges(self, register: Any) -> None:
        register("modeljudge", ModelJudge)


def test_the_run_metadata_names_the_judges_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WHILEAI_JUDGE", "fake:judge")
    params = {**d.BASE, "unique": 1, "repeats": 1}
    data = wai.simulate(registry=d.registry(Judges()), judge="modeljudge", **params)
    assert data.metadata["judge"] == "modeljudge"
    assert data.metadata["judge_model"] == "fake:judge"
    assert run(unique=1, repeats=1).metadata["judge_model"] is None  # the world's checks


@pytest.mark.parametrize("fsync_rows", [0, 1])
def test_fsync_rows_makes_the_rows_and_the_sidecar_durable_or_only_flushes_them(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, fsync_rows: int
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    out = tmp_path / "rows.jsonl"
    data = run(unique=3, repeats=1, output=str(out), advanced={"fsync_rows": fsync_rows})
    assert len(data.rows) == 3 and len(out.read_text().splitlines()) == 3
    if fsync_rows:
        # every row, then the sidecar each time it is written (at the start and the end)
        assert synced.count("rows.jsonl") == 3
        assert synced.count(f".rows.meta.json.{os.getpid()}.tmp") == 2
    else:
        # flushed only: what survives a killed process (tests/simulations/test_kill_and_resume.py)
        assert synced == []
