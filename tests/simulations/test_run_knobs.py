"""Knobs that say what they do: the world's own fault plan when the run sets none, and a
resume that refuses a changed fault rate, turn limit or agent as it refuses a changed seed."""

from __future__ import annotations

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
