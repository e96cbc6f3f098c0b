"""Deterministic backends for the Ray tests, registered through the real hooks.

Ray workers import this module by name (the test cluster puts this folder on their
``PYTHONPATH``), as they would a third-party plugin package."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ray

from whileai import hookimpl
from whileai.hookspecs import Register
from whileai.testing import PleasedUser
from whileai_ray.executor import actor_name
from whileai_worlds.testing import ScriptedSupportAgent


class RayDoubles:
    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        register(
            "support",
            lambda argument=None, **_: ScriptedSupportAgent(0.3 if argument == "slow" else 0.0),
        )
        register("customer", lambda argument=None, **_: PleasedUser("customer:pleased"))


class KillFirstActor:
    """Kills the run's first actor when the first row comes back: the jobs it held must
    come back as error rows."""

    def __init__(self) -> None:
        self.killed: list[str] = []

    @hookimpl
    def whileai_rollout_finished(
        self, run_id: str, row: Mapping[str, Any], done: int, total: int
    ) -> None:
        if not self.killed:
            name = actor_name(run_id, 0)
            ray.kill(ray.get_actor(name))
            self.killed.append(name)
