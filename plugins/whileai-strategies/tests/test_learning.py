"""bandit, novelty and map_elites inside real simulate() runs on the planted world: each is
asked in batches and told every batch's rows, and does what its docs say with them."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

import pytest

import whileai as wai
from whileai.registry import Registry
from whileai.simulations.behavior import cosine_distance
from whileai_strategies.learning import Bandit, MapElites, Novelty, PairEvidence
from whileai_strategies.planted import (
    DIMENSIONS,
    FAILING_CELLS,
    PLANTED,
    PlantedPlugin,
    planted_found,
)


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.load(plugins=[PlantedPlugin()])


def run(registry: Registry, strategy: Any, **given: Any) -> Any:
    params: dict[str, Any] = {
        "agent_model": "planted:agent",
        "simulator": "template",
        "repeats": 1,
        "max_turns": 1,
        "hard_share": 0.0,
        "advanced": {"world": "planted"},
        **given,
    }
    return wai.simulate(strategy=strategy, registry=registry, **params)


def in_order(data: Any) -> list[dict[str, Any]]:
    return sorted(data.rows, key=lambda r: r["lineage"]["situation"])


def test_the_bandit_moves_budget_toward_the_arms_that_fail(registry: Registry) -> None:
    bandit = Bandit()
    data = run(registry, bandit, unique=160, seed=2)
    rows = in_order(data)
    failing = {"/".join(c) for c in FAILING_CELLS}
    early = sum(r["arm"] in failing for r in rows[:40])
    late = sum(r["arm"] in failing for r in rows[-40:])
    # 9 of 60 arms fail: about 6 in 40 by chance
    assert late >= 30 and late > 2 * early, (early, late)
    report = data.report().search
    assert report["learns"] and report["batches"] == 20  # 160 in batches of search_batch=8
    told = bandit.arms
    assert sum(a.tries for a in told.values()) == 160
    assert all(told[label].fails >= 1 for label in failing)
    reason = rows[-1]["selection_reason"]
    assert reason.startswith(f"bandit: arm {rows[-1]['arm']}, posterior fail ")


def test_arm_weights_are_the_bandits_prior(registry: Registry) -> None:
    weights = {"billing": 8.0, "shipping": 1.0, "returns": 1.0, "account": 1.0, "warranty": 1.0}
    data = run(registry, "bandit", unique=16, seed=0, arm_weights=weights)
    rows = in_order(data)
    assert {r["arm"] for r in rows} <= set(weights)
    # the first batch of 8 is asked for before anything is told: every arm once, then the
    # prior leads
    first = Counter(r["arm"] for r in rows[:8])
    assert set(first) == set(weights)
    assert first["billing"] == 4 and max(first.values()) == 4
    assert rows[0]["arm"] == "billing"  # of the untried arms, the prior's favourite first
    assert all(r["scenario_dimensions"]["topic"] == r["arm"] for r in rows)


def test_ucb_tries_every_arm_before_it_repeats_one() -> None:
    bandit = Bandit(method="ucb")
    dims: dict[str, list[Any]] = {"a": [1, 2, 3], "b": ["x", "y"]}
    specs = bandit.ask(dims, 6, random.Random(0))
    assert len({s["arm"] for s in specs}) == 6


def test_novelty_turns_away_near_duplicates_and_keeps_new_situations(registry: Registry) -> None:
    novelty = Novelty()
    data = run(registry, novelty, unique=70, seed=1)
    report = data.report().search
    admitted = data.trajectories
    # every pair the strategy kept is at least its threshold apart, by the vectors it saw
    for i, a in enumerate(admitted):
        for b in admitted[i + 1 :]:
            assert cosine_distance(a["vector"], b["vector"]) >= 0.15
    assert "vector" not in data.rows[0]  # the vector never leaves memory
    # 60 cells, each admitted once at least; a second draw of a cell is near its first unless
    # a quirk's note sets it apart, so the strategy runs out of new situations short of 70
    cells = Counter(tuple(r["scenario_dimensions"].values()) for r in data.rows)
    assert len(cells) == 60 and 60 <= len(admitted) < 70
    assert report["rejected"] > 0
    assert report["rejections"] == {
        "novelty: nearer than 0.15 to an admitted situation": report["rejected"]
    }
    assert f"stopped at {len(admitted)} of 70 situations" in report["stopped_short"]
    assert any(report["stopped_short"] in w for w in data.warnings)
    assert all("admitted" in r["selection_reason"] for r in data.rows)
    assert novelty.admitted == len(admitted) and sum(novelty.behaviours.values()) == len(admitted)


def test_novelty_with_a_lower_threshold_admits_second_draws(registry: Registry) -> None:
    data = run(
        registry,
        "novelty",
        unique=70,
        seed=1,
        advanced={"world": "planted", "strategy_options": {"threshold": 0.01}},
    )
    assert len({r["scenario_id"] for r in data.rows}) == 70


def test_map_elites_fills_its_archive_with_the_most_revealing_situation_per_cell(
    registry: Registry,
) -> None:
    elites = MapElites()
    data = run(registry, elites, unique=120, seed=3)
    archive = elites.archive
    assert len(archive) > 40  # cells x behaviours found
    behaviours = {behaviour for _, behaviour in archive}
    assert "resolve | single_message" in behaviours
    assert any("escalate" in b for b in behaviours)  # a quirk's own behaviour has a cell
    rows = {r["scenario_id"]: r for r in data.rows}
    for (cell, _), elite in archive.items():
        assert elite.quality == 1.0 - rows[elite.scenario_id]["reward"]
        assert "/".join(rows[elite.scenario_id]["scenario_dimensions"].values()) == cell
    mutated = [r for r in data.rows if r["selection_reason"].startswith("map_elites: mutate")]
    assert mutated and all("->" in r["selection_reason"] for r in mutated)


@pytest.mark.parametrize("strategy", ["bandit", "novelty", "map_elites", "random"])
def test_the_same_seed_reproduces_the_same_situations(registry: Registry, strategy: str) -> None:
    first = [(r["scenario_id"], r["prompt"]) for r in in_order(run(registry, strategy, unique=24))]
    again = [(r["scenario_id"], r["prompt"]) for r in in_order(run(registry, strategy, unique=24))]
    assert first == again


def found_all_after(rows: list[dict[str, Any]]) -> int:
    """Rollouts, in the order they were asked for, until every planted failure was seen."""
    found: set[str] = set()
    for i, row in enumerate(rows, start=1):
        found.add(planted_found(row) or "")
        if set(PLANTED) <= found:
            return i
    return len(rows) + 1


@pytest.mark.parametrize("strategy", ["bandit", "novelty", "map_elites"])
def test_a_learner_finds_every_planted_failure_sooner_than_visiting_every_cell(
    registry: Registry, strategy: str
) -> None:
    # grid visits every cell once in a random order: what a search reaches without learning
    needed: dict[str, list[int]] = {strategy: [], "grid": []}
    for name in needed:
        for seed in range(8):
            needed[name].append(
                found_all_after(in_order(run(registry, name, unique=90, seed=seed)))
            )
    learnt, visited = sorted(needed[strategy]), sorted(needed["grid"])
    assert learnt[-1] <= 90, learnt  # every seed found all eleven
    # the medians sit near 44 and 57 over 40 seeds (benchmarks/bench_search.py)
    assert learnt[3] + 6 <= visited[3], (learnt, visited)


def row_of(cell: dict[str, str], reward: float, sid: str, signature: str = "") -> dict[str, Any]:
    """A told row as the engine builds it, reduced to what the strategies read."""
    return {
        "scenario_id": sid,
        "arm": "/".join(cell.values()),
        "scenario_dimensions": dict(cell),
        "reward": reward,
        "behavior_signature": signature or ("resolve | single_message" if reward else "stop"),
    }


def beside(spec: dict[str, Any], cell: dict[str, Any]) -> bool:
    """The spec's cell shares a pair of values with ``cell``: one value apart."""
    return sum(bool(spec[d] == cell[d]) for d in cell) == len(cell) - 1


def test_pair_evidence_looks_beside_a_failure_then_where_no_pair_was_tried() -> None:
    evidence = PairEvidence()
    failed = {"topic": "account", "channel": "email", "tone": "polite"}
    passed = {"topic": "billing", "channel": "chat", "tone": "curt"}
    evidence.add(failed, 1.0)
    evidence.add(passed, 0.0)
    neighbour = {**failed, "tone": "angry"}  # holds the failure's pair account/email
    fresh = {"topic": "warranty", "channel": "social", "tone": "angry"}  # no pair told
    assert evidence.chance(neighbour) > evidence.chance(fresh) > evidence.chance(passed)
    assert evidence.failed_pairs(neighbour) == 1 and evidence.failed_pairs(fresh) == 0
    assert evidence.chance({}) == 0.0
    # cells of one dimension: their single value stands in for a pair
    evidence.add({"topic": "returns"}, 1.0)
    assert evidence.chance({"topic": "returns"}) > evidence.chance({"topic": "shipping"})


def after_one_failure(strategy: Any, seed: int) -> tuple[dict[str, Any], int, list[dict[str, Any]]]:
    """Asks a batch of 8 and tells it: the first situation failed (its agent answered
    without acting), the rest passed. Returns the failed cell, how many of its neighbours
    are still untried, and the next batch of 8."""
    rng = random.Random(seed)
    first = [{d: spec[d] for d in DIMENSIONS} for spec in strategy.ask(DIMENSIONS, 8, rng)]
    failed = first[0]
    told = [row_of(failed, 0.0, "s0", "answered without acting")]
    told += [row_of(cell, 1.0, f"s{i}") for i, cell in enumerate(first[1:], start=1)]
    strategy.tell(told)
    untried = sum(
        beside(dict(zip(DIMENSIONS, combo, strict=True)), failed)
        and dict(zip(DIMENSIONS, combo, strict=True)) not in first
        for combo in itertools.product(*DIMENSIONS.values())
    )
    return failed, untried, strategy.ask(DIMENSIONS, 8, rng)


def test_the_bandit_tries_every_arm_once_before_it_repeats_one(registry: Registry) -> None:
    data = run(registry, "bandit", unique=60, seed=4)
    assert len({r["arm"] for r in data.rows}) == 60
    assert all("(untried; " in r["selection_reason"] for r in data.rows)


def test_the_bandit_looks_beside_a_failure_first() -> None:
    # UCB ranks the untried arms by the evidence: the failure's untried neighbours come first
    for seed in range(20):
        failed, untried, following = after_one_failure(Bandit(method="ucb"), seed)
        near = [spec for spec in following if beside(spec, failed)]
        assert len(near) == min(8, untried), seed
        assert following[: len(near)] == near
        assert all("1 of its pairs of values failed" in s["selection_reason"] for s in near)
    # Thompson sampling draws the order: neighbours lead, well above chance (9 of 52; the
    # mean share is about 0.40)
    shares = []
    for seed in range(100):
        failed, _, following = after_one_failure(Bandit(), seed)
        shares.append(sum(beside(spec, failed) for spec in following) / 8)
    assert sum(shares) / len(shares) > 1.5 * 9 / 52


def test_novelty_looks_first_beside_an_unusual_behaviour() -> None:
    for seed in range(20):
        failed, untried, following = after_one_failure(Novelty(), seed)
        near = [spec for spec in following if beside(spec, failed)]
        assert len(near) == min(8, untried), seed
        assert all(
            "1 of its pairs of values behaved unusually" in s["selection_reason"] for s in near
        )


def test_map_elites_mutates_toward_the_neighbour_the_evidence_favours() -> None:
    # without exploring, every proposal mutates an elite; the failing elite is chosen most
    # (weight 1.05 against 0.05 for each passing one), and its mutations stay beside it
    shares = []
    for seed in range(30):
        failed, _, following = after_one_failure(MapElites(explore=0.0), seed)
        shares.append(sum(beside(spec, failed) for spec in following) / 8)
    assert sum(shares) / len(shares) > 0.6


def test_situation_vectors_can_come_from_an_embeddings_endpoint(registry: Registry) -> None:
    """With advanced={"embedding_model": <endpoint>}, the vectors novelty compares are the
    endpoint's (here a loopback OpenAI-compatible server's deterministic 8-number ones)."""
    from whileai_openai.testing.fault_server import FaultServer

    with FaultServer() as server:
        data = run(
            registry,
            "novelty",
            unique=6,
            seed=0,
            advanced={"world": "planted", "embedding_model": server.url},
        )
        asked = [r for r in server.requests if r.path.endswith("/embeddings")]
    assert asked and sum(len(r.body["input"]) for r in asked) >= 6
    for trajectory in data.trajectories:
        assert len(trajectory["vector"]) == 8
        assert abs(sum(x * x for x in trajectory["vector"]) - 1.0) < 1e-9
    assert data.report().backends[server.url]["roles"] == ["embedder"]


def test_an_embedding_model_that_cannot_embed_is_refused_by_name(registry: Registry) -> None:
    with pytest.raises(ValueError, match=r"embedding_model.*'planted' names a backend that cannot"):
        run(
            registry,
            "novelty",
            unique=2,
            advanced={"world": "planted", "embedding_model": "planted"},
        )
