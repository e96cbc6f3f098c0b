"""A situation's scenario id and seeds come from the run's seed, the world and the situation's
cell alone: the same in every process and every release, so a run started by one release
resumes under the next. Here each is recomputed from its recipe (SHA-256 of the parts, ``|``
between them) for cells whose values are equal in Python but not in JSON (``1``, ``True``,
``1.0``, ``"1"``, ``0.0`` and ``-0.0``), which a plan must keep apart."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
import sim_doubles as d

import whileai as wai
from whileai import hookimpl
from whileai.registry import Registry
from whileai.testing import ScriptedBackend

LEVELS = [1, True, 1.0, "1", 0.0, -0.0, None, [1, 2]]


@attrs.define
class Levels(d.TinyShop):
    """The tiny shop drawn over a dimension whose values JSON tells apart and Python does not
    all."""

    name: str = "levels"

    def dimensions(self) -> dict[str, list[Any]]:
        return {"level": LEVELS}


class LevelsPlugin:
    @hookimpl
    def whileai_register_worlds(self, register: Any) -> None:
        register("levels", Levels)


def simulate(registry: Registry | None = None, **given: Any) -> Any:
    return wai.simulate(
        registry=registry or Registry.from_plugins(LevelsPlugin()),
        agent_model=lambda messages: "Done.",
        user_model=ScriptedBackend("user:plain", lambda messages, tools: "Thanks. [DONE]"),
        simulator="template",
        max_turns=1,
        advanced={"world": "levels"},
        **given,
    )


def digest(*parts: Any) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode("utf-8")).hexdigest()


def test_scenario_ids_and_seeds_follow_their_recipe_for_every_kind_of_cell_value() -> None:
    seed = 11
    data = simulate(
        unique_situations=3 * len(LEVELS),
        requests_per_situation=2,
        rollouts_per_request=1,
        seed=seed,
    )
    rows = list(data.rows)
    assert len(rows) == 6 * len(LEVELS)
    levels_seen = set()
    for row in rows:
        index, phrasing = row["lineage"]["situation"], row["lineage"]["phrasing"]
        cell = json.dumps(row["scenario_dimensions"], sort_keys=True, default=str)
        levels_seen.add(json.dumps(row["scenario_dimensions"]["level"]))
        expected = digest("levels", index, cell, phrasing, seed)[:8]
        assert row["scenario_id"] == f"levels-{index:03d}-p{phrasing}-{expected}", row
        # the situation's seed: the first four bytes of the digest, big-endian
        assert row["seed"] == int(digest(seed, "situation", index)[:8], 16)
    # every value was drawn, none read as another equal to it in Python
    assert levels_seen == {json.dumps(v) for v in LEVELS}


def test_phrasings_of_one_situation_share_its_seed_and_differ_in_id() -> None:
    data = simulate(unique_situations=4, requests_per_situation=3, rollouts_per_request=1, seed=2)
    by_situation: dict[int, list[dict[str, Any]]] = {}
    for row in data.rows:
        by_situation.setdefault(row["lineage"]["situation"], []).append(row)
    assert len(by_situation) == 4
    for rows in by_situation.values():
        assert len({r["seed"] for r in rows}) == 1
        assert len({r["scenario_id"] for r in rows}) == 3


def test_one_registry_serves_a_loop_of_runs_each_planned_as_a_fresh_one_would_be() -> None:
    # what docs/parameters.md tells a loop of short runs: build the registry once, pass it
    registry = Registry.from_plugins(LevelsPlugin())

    def run(registry: Registry) -> list[tuple[str, int, float]]:
        data = simulate(registry, unique_situations=5, rollouts_per_request=2, seed=4)
        return [(r["scenario_id"], r["seed"], r["reward"]) for r in data.rows]

    first = run(registry)
    assert run(registry) == run(registry) == first
    assert run(Registry.from_plugins(LevelsPlugin())) == first


def test_episodes_draw_their_faults_as_if_seeded_when_they_were_made(monkeypatch: Any) -> None:
    # an episode's generator is seeded at its first draw; the faults it draws are the ones a
    # generator seeded up front gives
    import random

    from whileai.simulations import rollout

    params = {**d.BASE, "unique": 8, "repeats": 3, "fault_rate": 0.5, "seed": 11}

    def played() -> list[tuple[Any, ...]]:
        rows = wai.simulate(registry=d.registry(), **params).rows
        return [(r["scenario_id"], r["seed"], r.get("faults"), r["steps"]) for r in rows]

    lazily = played()
    monkeypatch.setattr(rollout, "SeededOnFirstDraw", random.Random)
    assert played() == lazily
    assert sum(len(faults or []) for _, _, faults, _ in lazily) >= 5
