"""Registers the built-in strategies through the same entry point a third party would use."""

from __future__ import annotations

from whileai import hookimpl
from whileai.hookspecs import Register
from whileai_strategies.learning import Bandit, MapElites, Novelty
from whileai_strategies.selection import Grid, RandomDraws


@hookimpl
def whileai_register_strategies(register: Register) -> None:
    register(
        "grid",
        Grid,
        aliases=("balanced",),
        description="balanced, deterministic cycling through the cartesian product",
    )
    register(
        "random",
        RandomDraws,
        aliases=("uniform",),
        description="independent draws: arms by weight, the rest uniform",
    )
    register(
        "bandit",
        Bandit,
        description="Thompson sampling (or UCB) toward arms where the agent fails",
    )
    register(
        "novelty",
        Novelty,
        description="admits a situation only when its vector is far from those seen",
    )
    register(
        "map_elites",
        MapElites,
        aliases=("map-elites",),
        description="an archive over cell x behaviour keeping the most failure-revealing",
    )
