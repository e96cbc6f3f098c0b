"""Strategies that learn from the rollouts they are told about (the ask/tell contract).

- ``bandit``: arms are cells of the dimension grid (difficulty left to ``hard_share``), or
  the keys of ``arm_weights``; Thompson sampling (or UCB1) on each arm's chance of revealing
  a failure, so budget moves toward arms where the agent fails or its repeats split.
  ``arm_weights`` are the prior. Every arm is tried once before any is repeated, in the
  order ``PairEvidence`` draws them.
- ``novelty``: proposes the least-tried cells, those ``PairEvidence`` ties to unusual
  behaviour first, and admits a written situation only when its vector is at least
  ``threshold`` (cosine distance) from every situation already admitted.
- ``map_elites``: a quality-diversity archive over dimension cell x behaviour (the tools the
  agent called and how it ended); each archive cell keeps its most failure-revealing
  situation, and new proposals mutate one dimension of an elite chosen by how much it
  reveals, toward the neighbouring cell not tried yet that ``PairEvidence`` favours.

Every spec names its ``arm`` and a ``selection_reason`` a person can read. Each strategy
draws only from the ``rng`` it is asked with, so a seed reproduces its situations given the
same told rows. The archive search is written here rather than on pyribs: pyribs' emitters
search continuous solution vectors, and a situation spec is a few categorical values, so the
archive is a dict and a mutation is one changed value.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from whileai.simulations.behavior import cosine_distance
from whileai_strategies.selection import _check_dimensions, _check_weights

#: A told situation reveals a failure when any of its graded repeats scored below this.
FAIL_BELOW = 0.5


def _cells(dimensions: Mapping[str, Sequence[Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    return [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(*(dimensions[n] for n in names))
    ]


def _label(cell: Mapping[str, Any]) -> str:
    return "/".join(str(v) for v in cell.values()) or "all"


def _situations(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Told rows grouped by situation (scenario id), in the order they came."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get("scenario_id") or row.get("task_id")), []).append(row)
    return groups


def _rewards(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    out = []
    for row in rows:
        reward = row.get("reward")
        if isinstance(reward, int | float) and not isinstance(reward, bool):
            out.append(float(reward))
    return out


@attrs.define
class PairEvidence:
    """What told situations say of each pair of dimension values, as a model of where the
    next failure is.

    Most failures combinatorial testing finds are set off by one value or by two values
    meeting, so the model is that a cell fails when one of its pairs of values sets it off.
    Each pair's chance of setting a failure off has a Beta posterior: ``prior`` (fail, pass)
    pseudo-counts, plus, over the told situations that hold the pair, their weights (1 for a
    failure, or how unusual a behaviour was) and one minus them. A cell's chance is then
    1 - prod(1 - pair chance). So an untried cell that shares a pair with a failure comes
    first, then one holding pairs no told situation held yet (the order a pairwise covering
    array visits them in), and last one whose every pair passed. Cells of one dimension have
    no pairs; their single values stand in.
    """

    #: (fail, pass) pseudo-counts of each pair's prior: a few pairs of many set failures off
    prior: tuple[float, float] = (0.1, 1.0)
    _weight: dict[tuple[Any, ...], float] = attrs.field(factory=dict, init=False, repr=False)
    _count: Counter[tuple[Any, ...]] = attrs.field(factory=Counter, init=False, repr=False)

    @staticmethod
    def _pairs(cell: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        items = sorted((str(k), repr(v)) for k, v in cell.items())
        if len(items) < 2:
            return [tuple(item) for item in items]
        return [(*a, *b) for a, b in itertools.combinations(items, 2)]

    def add(self, cell: Mapping[str, Any], weight: float) -> None:
        for pair in self._pairs(cell):
            self._weight[pair] = self._weight.get(pair, 0.0) + weight
            self._count[pair] += 1

    def _posteriors(self, cell: Mapping[str, Any]) -> list[tuple[float, float]]:
        fail, passed = self.prior
        told = [(self._weight.get(pair, 0.0), self._count[pair]) for pair in self._pairs(cell)]
        return [(fail + weight, passed + count - weight) for weight, count in told]

    def chance(self, cell: Mapping[str, Any]) -> float:
        """The cell's chance of a failure under the posterior means (0 for a cell of no
        dimensions: it holds no pair)."""
        return 1 - math.prod(1 - a / (a + b) for a, b in self._posteriors(cell))

    def draw(self, cell: Mapping[str, Any], rng: random.Random) -> float:
        """The cell's chance of a failure under one draw from each pair's posterior
        (Thompson sampling on the model)."""
        return 1 - math.prod(1 - rng.betavariate(a, b) for a, b in self._posteriors(cell))

    def likeliest(self, cells: Sequence[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
        """The cell of ``cells`` with the highest :meth:`chance`, ties broken from ``rng``."""
        return max(cells, key=lambda c: self.chance(c) + rng.random() * 1e-9)

    def failed_pairs(self, cell: Mapping[str, Any]) -> int:
        """How many of the cell's pairs some told situation failed (or behaved unusually) on."""
        return sum(self._weight.get(pair, 0.0) > 0 for pair in self._pairs(cell))


@attrs.define
class _Arm:
    cell: dict[str, Any]
    #: Beta prior and observed counts of "this situation revealed a failure"
    prior_fail: float
    prior_pass: float
    fails: int = 0
    passes: int = 0

    @property
    def tries(self) -> int:
        return self.fails + self.passes

    @property
    def mean(self) -> float:
        a, b = self.prior_fail + self.fails, self.prior_pass + self.passes
        return a / (a + b)


@attrs.define
class Bandit:
    """Moves budget toward the arms whose situations reveal failures."""

    method: str = "thompson"
    #: pseudo-counts the prior is worth (arm_weights are spread over this much evidence)
    prior_strength: float = 2.0
    hard_dimension: str = "difficulty"
    hard_value: Any = "hard"
    name: str = "bandit"
    version: str = "1"
    _arms: dict[str, _Arm] | None = attrs.field(default=None, init=False, repr=False)
    _dimensions: dict[str, list[Any]] = attrs.field(factory=dict, init=False, repr=False)
    _free: list[str] = attrs.field(factory=list, init=False, repr=False)
    _evidence: PairEvidence = attrs.field(factory=PairEvidence, init=False, repr=False)
    _weighted: bool = attrs.field(default=False, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.method not in ("thompson", "ucb"):
            raise ValueError(f"bandit method must be 'thompson' or 'ucb', got {self.method!r}")
        if not self.prior_strength > 0:
            raise ValueError(f"prior_strength must be > 0, got {self.prior_strength!r}")

    @property
    def arms(self) -> dict[str, _Arm]:
        """The arms by label, with what the bandit has been told of each (empty before the
        first ask)."""
        return dict(self._arms or {})

    def _open(
        self, dimensions: Mapping[str, Sequence[Any]], arm_weights: Mapping[Any, float] | None
    ) -> dict[str, _Arm]:
        dims = _check_dimensions(dimensions)
        weights = _check_weights(arm_weights or {})
        self._weighted = bool(weights)
        self._dimensions = dims
        arm_dims = [d for d in dims if d != self.hard_dimension] or list(dims)
        if weights:
            # keys that are values of one dimension: that dimension is the arm; else named arms
            matches = [d for d in arm_dims if set(weights) <= set(dims[d])]
            if matches:
                arm_dims = [matches[0]]
                cells = [{matches[0]: value} for value in weights]
            else:
                arm_dims = []
                cells = [{} for _ in weights]
            labels = [str(k) for k in weights]
            total = sum(weights.values())
            shares = [weights[k] / total for k in weights]
        else:
            cells = _cells(dims, arm_dims)
            labels = [_label(c) for c in cells]
            shares = [1.0 / len(cells)] * len(cells)
        self._free = [d for d in dims if d not in arm_dims]
        arms = {}
        k = len(cells)
        for label, cell, share in zip(labels, cells, shares, strict=True):
            # a weight above the mean raises the arm's prior chance of a failure
            lean = min(0.95, max(0.05, 0.5 * share * k)) if weights else 0.5
            arms[label] = _Arm(cell, self.prior_strength * lean, self.prior_strength * (1 - lean))
        return arms

    def ask(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        n: int,
        rng: random.Random,
        arm_weights: Mapping[Any, float] | None = None,
    ) -> list[dict[str, Any]]:
        if self._arms is None:
            self._arms = self._open(dimensions, arm_weights)
        arms = self._arms
        specs = []
        pending: Counter[str] = Counter()
        for _ in range(n):
            untried = [label for label, arm in arms.items() if not arm.tries + pending[label]]
            if untried:
                label, score, failed_pairs = self._pick_untried(untried, rng)
            else:
                label, score = self._pick(arms, pending, rng)
            pending[label] += 1
            arm = arms[label]
            spec = dict(arm.cell)
            for d in self._free:
                spec[d] = rng.choice(self._dimensions[d])
            spec["arm"] = label
            how = "draw" if self.method == "thompson" else "bound"
            if untried:
                spec["selection_reason"] = (
                    f"bandit: arm {label}, posterior fail {arm.mean:.2f} (untried; "
                    f"{failed_pairs} of its pairs of values failed elsewhere; {how} {score:.2f})"
                )
            else:
                spec["selection_reason"] = (
                    f"bandit: arm {label}, posterior fail {arm.mean:.2f} "
                    f"({arm.fails} of {arm.tries} told failed; {how} {score:.2f})"
                )
            specs.append(spec)
        return specs

    def _pick_untried(self, untried: Sequence[str], rng: random.Random) -> tuple[str, float, int]:
        """Every arm is tried once before any is repeated (a repeat can only confirm what one
        try showed while another arm is unknown); the untried arm to try next is drawn from a
        posterior that borrows what its pairs of values showed in other arms."""
        assert self._arms is not None
        thompson = self.method == "thompson"
        best, best_score = "", -math.inf
        for label in untried:
            arm = self._arms[label]
            evidence = self._evidence
            score = evidence.draw(arm.cell, rng) if thompson else evidence.chance(arm.cell)
            if self._weighted or not arm.cell:
                # the arm's own prior (its weight) joins what its pairs showed
                prior = (arm.prior_fail, arm.prior_pass)
                own = rng.betavariate(*prior) if thompson else prior[0] / sum(prior)
                score = 1 - (1 - score) * (1 - own)
            # ties (several untried arms with no evidence) break at random, from the run's rng
            score += rng.random() * 1e-9
            if score > best_score:
                best, best_score = label, score
        return best, best_score, self._evidence.failed_pairs(self._arms[best].cell)

    def _pick(
        self, arms: Mapping[str, _Arm], pending: Counter[str], rng: random.Random
    ) -> tuple[str, float]:
        total = sum(a.tries for a in arms.values()) + sum(pending.values())
        best, best_score = "", -math.inf
        for label, arm in arms.items():
            if self.method == "thompson":
                score = rng.betavariate(arm.prior_fail + arm.fails, arm.prior_pass + arm.passes)
            else:
                tries = arm.tries + pending[label]
                bonus = math.sqrt(2 * math.log(total + 1) / tries) if tries else math.inf
                score = arm.mean + bonus
            # ties (several untried arms under UCB) break at random, from the run's rng
            score += rng.random() * 1e-9
            if score > best_score:
                best, best_score = label, score
        return best, best_score

    def tell(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if self._arms is None:
            return
        for group in _situations(rows).values():
            label = str(group[0].get("arm"))
            rewards = _rewards(group)
            if label not in self._arms or not rewards:
                continue
            failed = min(rewards) < FAIL_BELOW
            if failed:
                self._arms[label].fails += 1
            else:
                self._arms[label].passes += 1
            self._evidence.add(self._arms[label].cell, 1.0 if failed else 0.0)


@attrs.define
class Novelty:
    """Admits a situation only when it is far from every one already admitted, and looks
    first where the agent behaved unusually: among the least-tried cells it proposes those
    sharing pairs of values with situations whose behaviour was not the run's most common."""

    #: the least cosine distance to every admitted situation a new one needs. Measured with
    #: the offline vector on the shop's templates: two draws of one cell sit a median 0.16
    #: apart (identical requests at 0), two cells a median 0.61 (10th percentile 0.37), so
    #: 0.15 turns away repeats of a request and keeps every new one
    threshold: float = 0.15
    name: str = "novelty"
    version: str = "1"
    _proposed: Counter[str] = attrs.field(factory=Counter, init=False, repr=False)
    _admitted: list[list[float]] = attrs.field(factory=list, init=False, repr=False)
    _behaviours: Counter[str] = attrs.field(factory=Counter, init=False, repr=False)
    _evidence: PairEvidence = attrs.field(factory=PairEvidence, init=False, repr=False)
    _descriptors: Counter[str] = attrs.field(factory=Counter, init=False, repr=False)
    _dimensions: list[str] = attrs.field(factory=list, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not 0 < self.threshold <= 2:
            raise ValueError(f"threshold must lie in (0, 2], got {self.threshold!r}")

    @property
    def admitted(self) -> int:
        return len(self._admitted)

    @property
    def behaviours(self) -> dict[str, int]:
        """How often each behaviour signature was told."""
        return dict(self._behaviours)

    def ask(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        n: int,
        rng: random.Random,
        arm_weights: Mapping[Any, float] | None = None,
    ) -> list[dict[str, Any]]:
        dims = _check_dimensions(dimensions)
        self._dimensions = list(dims)
        cells = _cells(dims, list(dims))
        specs = []
        for _ in range(n):
            fewest = min(self._proposed[_label(c)] for c in cells)
            choices = [c for c in cells if self._proposed[_label(c)] == fewest]
            cell = dict(self._evidence.likeliest(choices, rng))
            label = _label(cell)
            self._proposed[label] += 1
            unusual = self._evidence.failed_pairs(cell)
            cell["arm"] = label
            cell["selection_reason"] = (
                f"novelty: least-tried cell {label} ({fewest} before; "
                f"{unusual} of its pairs of values behaved unusually elsewhere)"
            )
            specs.append(cell)
        return specs

    def admit(
        self, spec: Mapping[str, Any], situation: Any, vector: Sequence[float]
    ) -> tuple[bool, str]:
        nearest = min((cosine_distance(vector, seen) for seen in self._admitted), default=2.0)
        if nearest < self.threshold:
            return False, f"novelty: nearer than {self.threshold} to an admitted situation"
        self._admitted.append(list(vector))
        return True, f"admitted {nearest:.2f} from the nearest seen"

    def tell(self, rows: Sequence[Mapping[str, Any]]) -> None:
        for row in rows:
            if row.get("behavior_signature"):
                self._behaviours[str(row["behavior_signature"])] += 1
        groups = [(group, behaviour_descriptor(group)) for group in _situations(rows).values()]
        self._descriptors.update(descriptor for _, descriptor in groups)
        if not self._descriptors:
            return
        usual = self._descriptors.most_common(1)[0][0]
        for group, descriptor in groups:
            dims = group[0].get("scenario_dimensions") or {}
            # the cell as the strategy asked for it: a world may add dimensions of its own
            cell = {d: dims[d] for d in self._dimensions if d in dims}
            self._evidence.add(cell, 0.0 if descriptor == usual else 1.0)


def behaviour_descriptor(rows: Sequence[Mapping[str, Any]]) -> str:
    """A situation's behaviour cell: the most common signature among its repeats, without its
    fault details (faults are the world's draw, not the agent's behaviour)."""
    signatures = Counter(
        " | ".join(
            part
            for part in str(row.get("behavior_signature") or "unknown").split(" | ")
            if not part.startswith("faults ")
        )
        for row in rows
    )
    return signatures.most_common(1)[0][0] if signatures else "unknown"


@attrs.frozen
class Elite:
    """The most failure-revealing situation found for one archive cell."""

    spec: dict[str, Any]
    #: 1 - mean reward of its repeats: higher reveals more
    quality: float
    scenario_id: str


@attrs.define
class MapElites:
    """A quality-diversity archive over dimension cell x behaviour descriptor."""

    #: chance a proposal is a fresh random cell instead of a mutated elite
    explore: float = 0.25
    #: weight an elite that revealed nothing keeps when one is chosen to mutate (an elite's
    #: weight is its quality plus this)
    floor: float = 0.05
    name: str = "map_elites"
    version: str = "1"
    _archive: dict[tuple[str, str], Elite] = attrs.field(factory=dict, init=False, repr=False)
    _tried: set[str] = attrs.field(factory=set, init=False, repr=False)
    _dims: dict[str, list[Any]] = attrs.field(factory=dict, init=False, repr=False)
    _evidence: PairEvidence = attrs.field(factory=PairEvidence, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.explore <= 1:
            raise ValueError(f"explore must lie in [0, 1], got {self.explore!r}")
        if not self.floor > 0:
            raise ValueError(f"floor must be > 0, got {self.floor!r}")

    @property
    def archive(self) -> dict[tuple[str, str], Elite]:
        """(dimension cell, behaviour) -> its elite."""
        return dict(self._archive)

    def ask(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        n: int,
        rng: random.Random,
        arm_weights: Mapping[Any, float] | None = None,
    ) -> list[dict[str, Any]]:
        self._dims = _check_dimensions(dimensions)
        specs = []
        for _ in range(n):
            if not self._archive or rng.random() < self.explore:
                cell = self._untried(rng)
                reason = "map_elites: a cell not tried yet (explore)"
                if cell is None:
                    cell = {d: rng.choice(v) for d, v in self._dims.items()}
                    reason = "map_elites: a random cell (explore; every cell tried)"
            else:
                key = self._pick_elite(rng)
                elite = self._archive[key]
                mutated = self._mutate(elite.spec, rng)
                fresh = self._untried(rng) if mutated is None else None
                if mutated is not None:
                    cell, change = mutated
                    reason = (
                        f"map_elites: mutate elite of {key[0]} x {key[1]} "
                        f"(quality {elite.quality:.2f}): {change}"
                    )
                elif fresh is not None:
                    cell = fresh
                    reason = (
                        f"map_elites: every neighbour of elite {key[0]} x {key[1]} tried; "
                        "a cell not tried yet"
                    )
                else:
                    cell, change = self._mutate(elite.spec, rng, untried_only=False) or (
                        dict(elite.spec),
                        "nothing to change",
                    )
                    reason = (
                        f"map_elites: mutate elite of {key[0]} x {key[1]} "
                        f"(quality {elite.quality:.2f}): {change} (every cell tried)"
                    )
            self._tried.add(_label({d: cell[d] for d in self._dims}))
            cell["arm"] = _label({d: cell[d] for d in self._dims})
            cell["selection_reason"] = reason
            specs.append(cell)
        return specs

    def _untried(self, rng: random.Random) -> dict[str, Any] | None:
        """The untried cell the told qualities point to (``PairEvidence``): one sharing
        pairs of values with revealing situations, else one holding pairs not yet tried."""
        cells = [c for c in _cells(self._dims, list(self._dims)) if _label(c) not in self._tried]
        return dict(self._evidence.likeliest(cells, rng)) if cells else None

    def _pick_elite(self, rng: random.Random) -> tuple[str, str]:
        """An elite, by how much it reveals (every one keeps a small chance, so the search
        also moves away from the cells that pass)."""
        keys = sorted(self._archive)
        weights = [self._archive[k].quality + self.floor for k in keys]
        return rng.choices(keys, weights=weights)[0]

    def _mutate(
        self, spec: Mapping[str, Any], rng: random.Random, *, untried_only: bool = True
    ) -> tuple[dict[str, Any], str] | None:
        """One value of ``spec`` changed: to the neighbouring cell (one dimension apart) not
        tried yet that the told qualities point to; None when every neighbour has been tried
        (``untried_only=False``: any neighbour, at random)."""
        cell = {d: spec.get(d, rng.choice(v)) for d, v in self._dims.items()}
        moves = [(d, v) for d, values in self._dims.items() for v in values if v != cell[d]]
        if not untried_only:
            if not moves:
                return None
            d, v = rng.choice(moves)
            return {**cell, d: v}, f"{d} {cell[d]}->{v}"
        options = {
            (d, v): {**cell, d: v} for d, v in moves if _label({**cell, d: v}) not in self._tried
        }
        if not options:
            return None
        best = self._evidence.likeliest(list(options.values()), rng)
        d, v = next(move for move, option in options.items() if option is best)
        return best, f"{d} {cell[d]}->{v}"

    def tell(self, rows: Sequence[Mapping[str, Any]]) -> None:
        for scenario_id, group in _situations(rows).items():
            rewards = _rewards(group)
            if not rewards:
                continue
            dims = group[0].get("scenario_dimensions") or {}
            spec = {d: dims[d] for d in self._dims if d in dims}
            key = (_label(spec), behaviour_descriptor(group))
            quality = 1.0 - sum(rewards) / len(rewards)
            self._evidence.add(spec, quality)
            held = self._archive.get(key)
            if held is None or quality > held.quality:
                self._archive[key] = Elite(spec, quality, scenario_id)
