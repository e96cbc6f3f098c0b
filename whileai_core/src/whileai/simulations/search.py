"""How a run chooses its situations: a strategy asked for specs in batches, told what came of
them, until the run has its ``unique_situations``.

The contract (``whileai_register_strategies``; docs/plugins.md has a worked strategy)::

    strategy.ask(dimensions, n, rng, arm_weights, *, hard_share=None) -> list[spec]
    strategy.tell(rows) -> None                       # optional: a strategy that learns
    strategy.admit(spec, situation, vector) -> bool | (bool, reason)   # optional: a filter

A spec maps dimension names to values, plus ``arm`` and ``selection_reason``. ``tell`` gets
the graded rows of the specs of the last batch (reward, markers, ``behavior_signature``, and
``vector`` in memory), before the next ``ask``. ``admit`` sees each situation once it is
written, with its vector, and may turn it away (a near-duplicate): it is then not played, the
report counts it, and the strategy is asked for another. A strategy with only the older
``choose(dimensions, n, rng, arm_weights, *, hard_share=None)`` draws every spec up front and
is served through :class:`UpFront`, one batch.

Every asked spec gets the next situation index, so the same seed and the same told rows give
the same situations, and a resumed run, told the rows already on disk, asks again exactly as
the killed one did.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from whileai.registry import Registry
from whileai.schema.wording import counted
from whileai.seeds import derive_seed
from whileai.signatures import accepts
from whileai.simulations.behavior import Embedder, SituationVectors
from whileai.simulations.defaults import RunKnobs
from whileai.simulations.models import Writer
from whileai.simulations.params import RunParams
from whileai.simulations.plan import PlannedSituation, plan_from_specs
from whileai.simulations.writer import write_situations
from whileai.worlds import World

#: Proposals a batch may have turned away, per situation it asked for, before the search
#: stops short and says so: a filter keeping one proposal in ten still fills its batches,
#: one that keeps fewer must not loop forever.
MAX_REJECTIONS_PER_SLOT = 10


class EvenSpread:
    """The built-in spread when no strategy is named: a seeded shuffle of the dimension grid,
    cycled, every cell before any repeats."""

    name = "even spread (built in)"

    def choose(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        n: int,
        rng: random.Random,
        arm_weights: Mapping[str, float] | None,
    ) -> list[dict[str, Any]]:
        names = sorted(dimensions)
        cells = [
            dict(zip(names, values, strict=True))
            for values in itertools.product(*(dimensions[k] for k in names))
        ]
        rng.shuffle(cells)
        out = []
        for i in range(n):
            cell = dict(cells[i % len(cells)]) if cells else {}
            cell["arm"] = None
            cell["selection_reason"] = (
                f"even spread over the dimension grid (cell {i % max(1, len(cells))})"
            )
            out.append(cell)
        return out


class UpFront:
    """A strategy that only draws up front (``choose``), served through ``ask``: every spec is
    drawn on the first ask, for the whole run, and handed out in order."""

    def __init__(self, strategy: Any, total: int) -> None:
        self.strategy = strategy
        self.total = total
        #: the specs drawn and not yet handed out: each is let go once asked for (the run's
        #: plan holds what it was made of), so a long run does not keep every spec twice
        self._drawn: deque[dict[str, Any]] | None = None

    def ask(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        n: int,
        rng: random.Random,
        arm_weights: Mapping[str, float] | None,
        **extra: Any,
    ) -> list[dict[str, Any]]:
        if self._drawn is None:
            drawn = self.strategy.choose(dimensions, self.total, rng, arm_weights, **extra)
            self._drawn = deque(dict(s) for s in drawn)
            if len(self._drawn) != self.total:
                raise ValueError(
                    f"strategy {_name_of(self.strategy)} returned "
                    f"{counted(len(self._drawn), 'spec')} "
                    f"for n={self.total}"
                )
        left = self._drawn
        return [left.popleft() for _ in range(min(n, len(left)))]


def _name_of(strategy: Any) -> str:
    return str(getattr(strategy, "name", None) or type(strategy).__name__)


def _resolve_strategy(spec: str, knobs: RunKnobs, registry: Registry) -> Any:
    """A registered strategy, told which dimension and value are the hard end when its
    factory takes them (``strategy_options`` wins)."""
    dim, hard = knobs.hard_end()
    return registry.resolve(
        "strategy",
        spec,
        offer={"hard_dimension": dim, "hard_value": hard},
        **knobs.strategy_options,
    )


@attrs.frozen
class Outcome:
    """What the search did, for the run's report."""

    strategy: str
    learns: bool
    batches: int
    asked: int
    rejected: int
    #: of those, situations the writer could not write consistently with the world
    skipped: int
    #: the most common reasons situations were turned away, with their counts
    rejections: dict[str, int]
    hard_share_realised: float | None
    stopped_short: str | None

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class Search:
    """Drives one run's strategy: batches of specs, the situations written from them, the
    rows told back."""

    params: RunParams
    knobs: RunKnobs
    world: World
    writer: Writer
    writer_prompt: str
    warnings: list[str]
    strategy: Any
    name: str
    dimensions: dict[str, list[Any]]
    learns: bool
    balances: bool
    rng: random.Random
    embedder: Embedder = attrs.field(factory=Embedder)
    plans: list[PlannedSituation] = attrs.field(factory=list)
    #: the vector of every situation written, by scenario id (memory only), handed out as
    #: lists
    vectors: SituationVectors = attrs.field(factory=SituationVectors)
    batches: int = 0
    asked: int = 0
    rejected: Counter[str] = attrs.field(factory=Counter)
    n_hard: int = 0
    #: specs the engine's hard_share made (or left) hard, over every ask
    hard_asked: int = 0
    n_situations: int = 0
    #: situations the writer could not write consistently with the world
    skipped: int = 0
    stopped_short: str | None = None

    @classmethod
    def open(
        cls,
        params: RunParams,
        knobs: RunKnobs,
        world: World,
        registry: Registry,
        writer: Writer,
        writer_prompt: str,
        warnings: list[str],
        embedder: Embedder | None = None,
    ) -> Search:
        known = {k: list(v) for k, v in world.dimensions().items()}
        unknown = sorted(set(params.dimensions or {}) - set(known))
        if unknown:
            raise ValueError(
                f"dimensions= names {', '.join(map(repr, unknown))}, which world "
                f"{world.name!r} does not vary; its dimensions are "
                + "; ".join(f"{k}: {v}" for k, v in known.items())
            )
        dimensions = params.dimensions or known
        if params.strategy is None:
            if params.arm_weights:
                raise ValueError(
                    "arm_weights= needs a strategy that draws by them (strategy='grid', "
                    "'random' or 'bandit'); with strategy=None situations are spread evenly "
                    "and the weights would be ignored"
                )
            chosen: Any = EvenSpread()
            name = EvenSpread.name
        elif isinstance(params.strategy, str):
            chosen = _resolve_strategy(params.strategy, knobs, registry)
            name = params.strategy
        else:
            chosen = params.strategy
            name = _name_of(chosen)
        if callable(getattr(chosen, "ask", None)):
            learns = callable(getattr(chosen, "tell", None))
            strategy = chosen
        elif callable(getattr(chosen, "choose", None)):
            learns = False
            strategy = UpFront(chosen, params.unique_situations)
        else:
            shown = (
                repr(name) if hasattr(chosen, "name") or isinstance(chosen, str) else repr(chosen)
            )
            raise TypeError(
                f"strategy={shown} has neither ask(dimensions, n, rng, arm_weights) nor "
                "choose(dimensions, n, rng, arm_weights): it cannot propose situations; pass a "
                "registered strategy name ('grid', 'bandit', ...) or such an object"
            )
        dim, hard = knobs.hard_end()
        asker = strategy.ask if not isinstance(strategy, UpFront) else chosen.choose
        balances = accepts(asker, "hard_share") and hard in dimensions.get(dim, ())
        return cls(
            params,
            knobs,
            world,
            writer,
            writer_prompt,
            warnings,
            strategy,
            name,
            dimensions,
            learns,
            balances,
            random.Random(derive_seed(params.seed, "strategy")),
            embedder or Embedder(),
        )

    @property
    def done(self) -> bool:
        return self.stopped_short is not None or self.n_situations >= self.params.unique_situations

    def _batch_size(self) -> int:
        left = self.params.unique_situations - self.n_situations
        return min(left, self.knobs.search_batch) if self.learns else left

    async def next_batch(self, known_prompts: Mapping[str, str]) -> list[PlannedSituation]:
        """The situations of the next batch (one plan per phrasing), written and admitted;
        empty when the search is done."""
        want = self._batch_size()
        accepted: list[PlannedSituation] = []
        taken = turned_away = 0
        while taken < want:
            specs = self._ask(want - taken)
            if not specs:
                self.stopped_short = (
                    f"strategy {self.name} proposed nothing more; the run stopped at "
                    f"{self.n_situations} of {counted(self.params.unique_situations, 'situation')}"
                )
                self.warnings.append(self.stopped_short)
                break
            skipped_before = self.skipped
            groups = await self._write(specs, known_prompts)
            turned_away += self.skipped - skipped_before
            for situation_plans in groups:
                reason = self._admit(situation_plans)
                if reason is not None:
                    self.rejected[reason] += 1
                    turned_away += 1
                    continue
                accepted.extend(situation_plans)
                taken += 1
                self.n_situations += 1
                self.n_hard += self._is_hard(situation_plans[0].spec)
            if taken < want and turned_away > MAX_REJECTIONS_PER_SLOT * want:
                self.stopped_short = (
                    f"strategy {self.name} turned away {turned_away} proposals in one batch; "
                    f"the run stopped at {self.n_situations} of "
                    f"{counted(self.params.unique_situations, 'situation')}"
                )
                self.warnings.append(self.stopped_short)
                break
        self.batches += 1 if accepted else 0
        self.plans.extend(accepted)
        return accepted

    def _ask(self, n: int) -> list[dict[str, Any]]:
        extra = {"hard_share": self.params.hard_share} if self.balances else {}
        specs = [
            dict(s)
            for s in self.strategy.ask(
                self.dimensions, n, self.rng, self.params.arm_weights, **extra
            )
        ]
        if len(specs) > n:
            raise ValueError(
                f"strategy {self.name} returned {counted(len(specs), 'spec')} when asked for {n}"
            )
        self.asked += len(specs)
        if not self.balances:
            self._apply_hard_share(specs)
        return specs

    def _is_hard(self, spec: Mapping[str, Any]) -> bool:
        dim, hard = self.knobs.hard_end()
        return bool(spec.get(dim) == hard)

    def _apply_hard_share(self, specs: list[dict[str, Any]]) -> None:
        """The engine's own hard_share, kept over the whole run: each batch takes enough hard
        situations that the running count stays at ``round(hard_share * situations)``; the
        rest take one of the dimension's other values (the world's, when ``dimensions=``
        leaves difficulty out), so the share is what was asked whatever the world's default."""
        dim, hard = self.knobs.hard_end()
        before = self.asked - len(specs)
        target = round(self.params.hard_share * (before + len(specs)))
        hard_here = max(0, min(len(specs), target - self.hard_asked))
        # the first ask draws as a single up-front draw always has, so plans stay the same
        seed_parts = ("hard",) if before == 0 else ("hard", before)
        hard_rng = random.Random(derive_seed(self.params.seed, *seed_parts))
        hard_set = set(hard_rng.sample(range(len(specs)), hard_here))
        values = self.dimensions.get(dim) or list(self.world.dimensions().get(dim, []))
        easier = [v for v in values if v != hard]
        for i, spec in enumerate(specs):
            if i in hard_set:
                spec[dim] = hard
            elif (spec.get(dim) == hard or dim not in spec) and easier:
                spec[dim] = easier[hard_rng.randrange(len(easier))]
        self.hard_asked += sum(1 for s in specs if s.get(dim) == hard)

    async def _write(
        self, specs: list[dict[str, Any]], known_prompts: Mapping[str, str]
    ) -> list[list[PlannedSituation]]:
        """Each spec's situations (one per phrasing), written, with the next indices."""
        start = self.asked - len(specs)
        plans = plan_from_specs(self.params, self.world, specs, start=start)
        written = await write_situations(
            plans,
            self.writer,
            self.knobs,
            self.params.seed,
            known_prompts,
            self.warnings,
            self.writer_prompt,
            self.world,
        )
        for skipped in written.skipped:
            self.rejected[skipped.reason] += 1
            self.skipped += 1
        by_index: dict[int, list[PlannedSituation]] = {}
        for plan in written.plans:
            by_index.setdefault(plan.index, []).append(plan)
        await self.embedder.add(
            self.vectors,
            ((p.scenario_id, p.situation.prompt, p.spec) for p in written.plans),
            self.warnings,
            # a strategy that filters or learns reads every vector, at once or when told
            now=self.learns or callable(getattr(self.strategy, "admit", None)),
        )
        return [by_index[i] for i in sorted(by_index)]

    def _admit(self, plans: list[PlannedSituation]) -> str | None:
        """None when the strategy keeps the situation (or has no filter), else its reason."""
        admit = getattr(self.strategy, "admit", None)
        if not callable(admit) or not plans:
            return None
        first = plans[0]
        verdict = admit(dict(first.spec), first.situation, list(self.vectors[first.scenario_id]))
        keep, reason = verdict if isinstance(verdict, tuple) else (bool(verdict), None)
        if keep:
            if reason:
                for i, plan in enumerate(plans):
                    joined = "; ".join(p for p in (plan.selection_reason, str(reason)) if p)
                    plans[i] = attrs.evolve(plan, selection_reason=joined)
            return None
        return str(reason or f"turned away by {self.name}")

    def tell(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Hand the strategy the finished rows of its last batch, vectors attached."""
        if not self.learns or not rows:
            return
        told = []
        for row in rows:
            shown = dict(row)
            vector = self.vectors.get(str(row.get("scenario_id")))
            if vector is not None:
                shown["vector"] = list(vector)
            told.append(shown)
        self.strategy.tell(told)

    def outcome(self) -> Outcome:
        n = self.n_situations
        return Outcome(
            strategy=self.name,
            learns=self.learns,
            batches=self.batches,
            asked=self.asked,
            rejected=sum(self.rejected.values()),
            skipped=self.skipped,
            rejections=dict(self.rejected.most_common(5)),
            hard_share_realised=round(self.n_hard / n, 4) if n else None,
            stopped_short=self.stopped_short,
        )
