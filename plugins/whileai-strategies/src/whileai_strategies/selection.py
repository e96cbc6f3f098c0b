"""Situation selection: which dimension values each of ``n`` situations gets.

Both strategies answer ``choose(dimensions, n, rng, arm_weights, *, hard_share=None)`` with
``n`` specs: ``{<dimension>: <value>, ..., "arm": <arm or None>, "selection_reason": <why>}``.

Arms. ``arm_weights`` maps arms to non-negative weights (any scale; they are normalised):

- When its keys are values of one dimension (``{"refund": 2, "track": 1, "address_change": 1}``
  over ``intent``), that dimension is the arm dimension: every value of it needs a weight
  (``0`` leaves one out), and a spec's ``arm`` is its value there. ``arm_dimension=`` on the
  strategy names the dimension explicitly when values of several dimensions could match.
- Otherwise its keys are named arms (``{"baseline": 1, "adversarial": 1}``): labels the
  engine or writer acts on, drawn beside the dimension values.

Without ``arm_weights`` a spec's ``arm`` is its value on ``arm_dimension`` when one is set,
else None.

Hard share. ``hard_share`` is the fraction of specs drawn from the hard value of the
difficulty dimension (``hard_dimension="difficulty"``, ``hard_value="hard"`` by default); the
other values of that dimension share the rest equally. ``None`` leaves difficulty an ordinary
dimension.

``grid`` is deterministic given the rng: it apportions ``n`` over arms and then over
difficulty by largest remainders (so counts match the weights to within one), cycles through
the rng-shuffled cartesian product of the other dimensions within each of those strata (so
cells differ in count by at most one), and interleaves the strata so any prefix is balanced
too. ``random`` draws every spec independently: the arm by its weight, difficulty by
``hard_share``, every other value uniformly.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

RESERVED_KEYS: frozenset[str] = frozenset({"arm", "selection_reason"})


def _check_dimensions(dimensions: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    if not isinstance(dimensions, Mapping):
        raise TypeError(f"dimensions must map names to lists of values, got {dimensions!r}")
    checked: dict[str, list[Any]] = {}
    for name, values in dimensions.items():
        if name in RESERVED_KEYS:
            raise ValueError(f"dimension name {name!r} is reserved for the spec's own {name}")
        if isinstance(values, str) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"dimension {name!r} needs a non-empty list of values, got {values!r}")
        checked[str(name)] = list(values)
    return checked


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    return n


def _check_weights(weights: Mapping[Any, float]) -> dict[Any, float]:
    checked: dict[Any, float] = {}
    for arm, weight in weights.items():
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ValueError(f"arm_weights[{arm!r}] must be a number, got {weight!r}")
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"arm_weights[{arm!r}] must be finite and >= 0, got {weight!r}")
        checked[arm] = float(weight)
    if checked and sum(checked.values()) <= 0:
        raise ValueError("arm_weights must give at least one arm a positive weight")
    return checked


def apportion(weights: Mapping[Any, float], n: int, rng: random.Random) -> dict[Any, int]:
    """Split ``n`` into integer counts proportional to ``weights`` (largest remainder, ties
    broken by ``rng``): every count is within one of ``n * share``."""
    total = sum(weights.values())
    quotas = {k: n * w / total for k, w in weights.items()}
    counts = {k: math.floor(q) for k, q in quotas.items()}
    left = n - sum(counts.values())
    keys = list(weights)
    rng.shuffle(keys)
    keys.sort(key=lambda k: quotas[k] - counts[k], reverse=True)
    for k in keys[:left]:
        counts[k] += 1
    return counts


@attrs.frozen
class Plan:
    """How a call's arms and difficulty are laid out before specs are drawn."""

    dimensions: dict[str, list[Any]]
    #: the dimension whose values are the arms, or None (named arms, or no arms)
    arm_dimension: str | None
    #: weight per arm (dimension values or named arms); empty: no weighting
    arm_weights: dict[Any, float]
    #: weight per difficulty value; empty: difficulty is an ordinary dimension
    difficulty_weights: dict[Any, float]
    hard_dimension: str
    hard_share: float | None

    @property
    def named_arms(self) -> bool:
        return bool(self.arm_weights) and self.arm_dimension is None

    @property
    def free_dimensions(self) -> list[str]:
        """Dimensions drawn uniformly / cycled: all but the weighted ones."""
        taken = {self.arm_dimension if self.arm_weights else None}
        if self.difficulty_weights:
            taken.add(self.hard_dimension)
        return [d for d in self.dimensions if d not in taken]


def make_plan(
    dimensions: Mapping[str, Sequence[Any]],
    arm_weights: Mapping[Any, float] | None,
    hard_share: float | None,
    *,
    arm_dimension: str | None,
    hard_dimension: str,
    hard_value: Any,
) -> Plan:
    dims = _check_dimensions(dimensions)
    weights = _check_weights(arm_weights or {})
    if arm_dimension is not None and arm_dimension not in dims:
        raise ValueError(
            f"arm_dimension {arm_dimension!r} is not a dimension; dimensions are {list(dims)}"
        )
    chosen = arm_dimension
    if weights and chosen is None:
        matches = [d for d, values in dims.items() if set(weights) <= set(values)]
        chosen = matches[0] if matches else None
    if weights and chosen is not None:
        values = dims[chosen]
        stray = [k for k in weights if k not in values]
        if stray:
            raise ValueError(
                f"arm_weights names {stray}, which are not values of arm dimension {chosen!r} "
                f"({values})"
            )
        missing = [v for v in values if v not in weights]
        if missing:
            raise ValueError(
                f"arm_weights gives no weight to {missing} of dimension {chosen!r}; give every "
                "value a weight (0 leaves one out)"
            )
    difficulty: dict[Any, float] = {}
    if hard_share is not None:
        if (
            isinstance(hard_share, bool)
            or not isinstance(hard_share, int | float)
            or not 0 <= hard_share <= 1
        ):
            raise ValueError(f"hard_share must be a number in [0, 1], got {hard_share!r}")
        if hard_dimension not in dims or hard_value not in dims[hard_dimension]:
            raise ValueError(
                f"hard_share={hard_share} needs a dimension {hard_dimension!r} with the value "
                f"{hard_value!r}; dimensions are {dims}"
            )
        if weights and chosen == hard_dimension:
            raise ValueError(
                f"arm_weights and hard_share both weight dimension {hard_dimension!r}; use one"
            )
        others = [v for v in dims[hard_dimension] if v != hard_value]
        if not others and hard_share < 1:
            raise ValueError(
                f"hard_share={hard_share} needs a value of {hard_dimension!r} besides {hard_value!r}"
            )
        difficulty = {v: (1 - hard_share) / len(others) for v in others}
        difficulty[hard_value] = float(hard_share)
    return Plan(dims, chosen, weights, difficulty, hard_dimension, hard_share)


def _reason_parts(plan: Plan, spec: Mapping[str, Any]) -> list[str]:
    parts = []
    if plan.arm_weights:
        total = sum(plan.arm_weights.values())
        parts.append(f"arm {spec['arm']!r} (weight {plan.arm_weights[spec['arm']] / total:.2f})")
    if plan.difficulty_weights:
        parts.append(
            f"{plan.hard_dimension} {spec[plan.hard_dimension]!r} (hard_share {plan.hard_share})"
        )
    return parts


def _arm_of(plan: Plan, spec: Mapping[str, Any], named: Any) -> Any:
    if plan.named_arms:
        return named
    if plan.arm_dimension is not None:
        return spec[plan.arm_dimension]
    return None


@attrs.frozen
class _PlannedStrategy:
    """What both strategies are configured with: which dimension names the arms, and which
    dimension and value count as hard."""

    arm_dimension: str | None = None
    hard_dimension: str = "difficulty"
    hard_value: Any = "hard"

    def _plan(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        arm_weights: Mapping[Any, float] | None,
        hard_share: float | None,
    ) -> Plan:
        return make_plan(
            dimensions,
            arm_weights,
            hard_share,
            arm_dimension=self.arm_dimension,
            hard_dimension=self.hard_dimension,
            hard_value=self.hard_value,
        )


@attrs.frozen
class Grid(_PlannedStrategy):
    """Balanced, deterministic coverage of the cartesian product of the dimensions."""

    name: str = "grid"
    version: str = "1"

    def choose(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        n: int,
        rng: random.Random,
        arm_weights: Mapping[Any, float] | None = None,
        *,
        hard_share: float | None = None,
    ) -> list[dict[str, Any]]:
        n = _check_n(n)
        plan = self._plan(dimensions, arm_weights, hard_share)
        arm_key = plan.arm_dimension if not plan.named_arms else None
        arms = apportion(plan.arm_weights, n, rng) if plan.arm_weights else {None: n}
        free = plan.free_dimensions
        cells = [
            dict(zip(free, combo, strict=True))
            for combo in itertools.product(*(plan.dimensions[d] for d in free))
        ]
        placed: list[tuple[float, float, dict[str, Any]]] = []
        for arm, arm_count in arms.items():
            strata = (
                apportion(plan.difficulty_weights, arm_count, rng)
                if plan.difficulty_weights
                else {None: arm_count}
            )
            for level, count in strata.items():
                order: list[dict[str, Any]] = []
                for i in range(count):
                    if i % len(cells) == 0:
                        order = list(cells)
                        rng.shuffle(order)
                    spec = dict(order[i % len(cells)])
                    if arm_key is not None:
                        spec[arm_key] = arm
                    if level is not None:
                        spec[plan.hard_dimension] = level
                    spec = {d: spec[d] for d in plan.dimensions}
                    spec["arm"] = _arm_of(plan, spec, arm)
                    stratum = ", ".join(_reason_parts(plan, spec)) or "the whole grid"
                    spec["selection_reason"] = (
                        f"grid: cell {i % len(cells) + 1} of {len(cells)}, cycle "
                        f"{i // len(cells) + 1}, in stratum {stratum}"
                    )
                    # Spread every stratum evenly over the output, so a prefix is balanced.
                    placed.append(((i + 0.5) / count, rng.random(), spec))
        placed.sort(key=lambda t: (t[0], t[1]))
        return [spec for _, _, spec in placed]


@attrs.frozen
class RandomDraws(_PlannedStrategy):
    """Independent draws: arms by weight, difficulty by hard_share, the rest uniform."""

    name: str = "random"
    version: str = "1"

    def choose(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        n: int,
        rng: random.Random,
        arm_weights: Mapping[Any, float] | None = None,
        *,
        hard_share: float | None = None,
    ) -> list[dict[str, Any]]:
        n = _check_n(n)
        plan = self._plan(dimensions, arm_weights, hard_share)
        arms = list(plan.arm_weights)
        arm_w = [plan.arm_weights[a] for a in arms]
        levels = list(plan.difficulty_weights)
        level_w = [plan.difficulty_weights[v] for v in levels]
        specs = []
        for i in range(n):
            spec = {d: rng.choice(plan.dimensions[d]) for d in plan.free_dimensions}
            arm = rng.choices(arms, arm_w)[0] if arms else None
            if arms and not plan.named_arms:
                spec[str(plan.arm_dimension)] = arm
            if levels:
                spec[plan.hard_dimension] = rng.choices(levels, level_w)[0]
            spec = {d: spec[d] for d in plan.dimensions}
            spec["arm"] = _arm_of(plan, spec, arm)
            parts = _reason_parts(plan, spec) or ["every value uniform"]
            spec["selection_reason"] = f"random draw {i + 1} of {n}: " + ", ".join(parts)
            specs.append(spec)
        return specs
