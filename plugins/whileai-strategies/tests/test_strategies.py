"""The grid and random strategies as simulate() uses them: resolved by name, asked for n specs."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pytest

from whileai.registry import Registry

SHOP = {
    "intent": ["refund", "track", "address_change"],
    "difficulty": ["easy", "hard"],
    "tone": ["polite", "curt", "angry"],
}


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.load()


def strategy(registry: Registry, name: str, **options: Any) -> Any:
    return registry.resolve("strategy", name, **options)


def cell(spec: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(spec[d] for d in SHOP)


def test_grid_covers_the_product_evenly(registry: Registry) -> None:
    specs = strategy(registry, "grid").choose(SHOP, 40, random.Random(0), None)
    counts = Counter(cell(s) for s in specs)
    assert len(counts) == 18  # every cell of 3 x 2 x 3
    assert set(counts.values()) <= {2, 3}  # 40 = 2 * 18 + 4
    assert all(s["arm"] is None for s in specs)
    assert specs[0]["selection_reason"].startswith("grid: cell ")
    # the first 18 are one full cycle
    assert len({cell(s) for s in specs[:18]}) == 18


def test_grid_is_deterministic_per_seed(registry: Registry) -> None:
    grid = strategy(registry, "grid")
    assert grid.choose(SHOP, 30, random.Random(5), None) == grid.choose(
        SHOP, 30, random.Random(5), None
    )
    assert grid.choose(SHOP, 30, random.Random(5), None) != grid.choose(
        SHOP, 30, random.Random(6), None
    )


def test_random_is_deterministic_per_seed_and_uniform(registry: Registry) -> None:
    draws = strategy(registry, "random")
    assert draws.choose(SHOP, 50, random.Random(1), None) == draws.choose(
        SHOP, 50, random.Random(1), None
    )
    n = 6000
    counts = Counter(s["intent"] for s in draws.choose(SHOP, n, random.Random(2), None))
    sd = math.sqrt(n * (1 / 3) * (2 / 3))
    assert all(abs(c - n / 3) < 4 * sd for c in counts.values()), counts


def test_grid_arm_weights_on_a_dimension_are_met_to_within_one(registry: Registry) -> None:
    weights = {"refund": 2, "track": 1, "address_change": 0}
    specs = strategy(registry, "grid").choose(SHOP, 31, random.Random(3), weights)
    counts = Counter(s["arm"] for s in specs)
    assert abs(counts["refund"] - 31 * 2 / 3) < 1 and abs(counts["track"] - 31 / 3) < 1
    assert counts["address_change"] == 0
    assert all(s["arm"] == s["intent"] for s in specs)
    assert (
        "arm 'refund' (weight 0.67)"
        in next(s for s in specs if s["arm"] == "refund")["selection_reason"]
    )
    # within an arm the other dimensions stay balanced
    refund_cells = Counter((s["difficulty"], s["tone"]) for s in specs if s["arm"] == "refund")
    assert max(refund_cells.values()) - min(refund_cells.values()) <= 1


def test_random_arm_weights_are_respected_statistically(registry: Registry) -> None:
    n, weights = 5000, {"refund": 0.6, "track": 0.3, "address_change": 0.1}
    counts = Counter(
        s["arm"] for s in strategy(registry, "random").choose(SHOP, n, random.Random(4), weights)
    )
    for arm, w in weights.items():
        assert abs(counts[arm] - n * w) < 4 * math.sqrt(n * w * (1 - w)), (arm, counts)


def test_named_arms_ride_beside_the_dimensions(registry: Registry) -> None:
    weights = {"baseline": 1, "adversarial": 3}
    specs = strategy(registry, "grid").choose(SHOP, 24, random.Random(5), weights)
    assert Counter(s["arm"] for s in specs) == {"baseline": 6, "adversarial": 18}
    assert len({cell(s) for s in specs if s["arm"] == "adversarial"}) == 18


def test_hard_share_sets_the_fraction_of_hard_situations(registry: Registry) -> None:
    specs = strategy(registry, "grid").choose(SHOP, 40, random.Random(6), None, hard_share=0.25)
    assert Counter(s["difficulty"] for s in specs) == {"hard": 10, "easy": 30}
    assert (
        "difficulty 'hard' (hard_share 0.25)"
        in next(s for s in specs if s["difficulty"] == "hard")["selection_reason"]
    )
    n = 5000
    drawn = strategy(registry, "random").choose(SHOP, n, random.Random(7), None, hard_share=0.7)
    hard = sum(s["difficulty"] == "hard" for s in drawn)
    assert abs(hard - n * 0.7) < 4 * math.sqrt(n * 0.7 * 0.3)


def test_hard_share_and_arm_weights_combine(registry: Registry) -> None:
    specs = strategy(registry, "grid").choose(
        SHOP, 60, random.Random(8), {"refund": 1, "track": 1, "address_change": 1}, hard_share=0.5
    )
    assert Counter((s["arm"], s["difficulty"]) for s in specs) == {
        (arm, level): 10 for arm in SHOP["intent"] for level in SHOP["difficulty"]
    }


def test_a_prefix_of_the_grid_is_balanced_too(registry: Registry) -> None:
    specs = strategy(registry, "grid").choose(
        SHOP, 100, random.Random(9), {"refund": 1, "track": 1, "address_change": 2}
    )
    first = Counter(s["arm"] for s in specs[:20])
    assert abs(first["address_change"] - 10) <= 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"arm_weights": {"refund": 1, "track": 1}}, r"gives no weight to \['address_change'\]"),
        (
            {"arm_weights": {"refund": -1, "track": 1, "address_change": 1}},
            r"arm_weights\['refund'\] must be finite and >= 0",
        ),
        ({"arm_weights": {"a": 0}}, "at least one arm a positive weight"),
        ({"hard_share": 1.5}, r"hard_share must be a number in \[0, 1\]"),
        (
            {"dimensions": {"intent": ["refund"]}, "hard_share": 0.5},
            "needs a dimension 'difficulty'",
        ),
        ({"dimensions": {"intent": []}}, "dimension 'intent' needs a non-empty list"),
        ({"dimensions": {"arm": ["a"]}}, "dimension name 'arm' is reserved"),
        ({"n": -1}, "n must be a non-negative int"),
    ],
)
@pytest.mark.parametrize("name", ["grid", "random"])
def test_bad_input_is_named(
    registry: Registry, name: str, kwargs: dict[str, Any], message: str
) -> None:
    call: dict[str, Any] = {
        "dimensions": SHOP,
        "n": 5,
        "rng": random.Random(0),
        "arm_weights": None,
    }
    call.update(kwargs)
    hard_share = call.pop("hard_share", None)
    with pytest.raises(ValueError, match=message):
        strategy(registry, name).choose(**call, hard_share=hard_share)


def test_arm_dimension_option_names_the_arm_without_weights(registry: Registry) -> None:
    specs = strategy(registry, "random", arm_dimension="tone").choose(
        SHOP, 10, random.Random(0), None
    )
    assert all(s["arm"] == s["tone"] for s in specs)
    with pytest.raises(ValueError, match="arm_dimension 'mood' is not a dimension"):
        strategy(registry, "grid", arm_dimension="mood").choose(SHOP, 1, random.Random(0), None)
