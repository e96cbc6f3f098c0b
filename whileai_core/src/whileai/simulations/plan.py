"""The plan of a run: situation specs across the dimensions (a strategy, or a seeded even
spread), hard_share, the situations written from them (templates, a model, or replayed rows),
and one job per (situation, phrasing, repeat) with a deterministic key and seed."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

from whileai.executors import Job
from whileai.schema.records import prompt_hash
from whileai.seeds import derive_seed
from whileai.simulations.models import SEED_WRITER
from whileai.simulations.params import RunParams
from whileai.worlds import Situation, World


@attrs.frozen
class PlannedSituation:
    index: int
    phrasing: int
    scenario_id: str
    spec: dict[str, Any]
    situation: Situation
    arm: str | None
    selection_reason: str | None
    replayed: bool = False
    #: the seed the situation was drawn from (the world's template rng), None when replayed
    #: from rows that carry none
    seed: int | None = None
    #: a branch's recorded steps, the rollout they came from and its world's seed
    prefix: tuple[Mapping[str, Any], ...] = ()
    branched_from: str | None = None
    episode_seed: int | None = None


#: json.dumps(..., sort_keys=True, default=str), built once (dumps with options builds one a call)
_CELL = json.JSONEncoder(sort_keys=True, default=str)


def _scenario_id(world: World, index: int, cell: str, phrasing: int, seed: int) -> str:
    digest = hashlib.sha256(f"{world.name}|{index}|{cell}|{phrasing}|{seed}".encode()).hexdigest()
    return f"{world.name}-{index:03d}-p{phrasing}-{digest[:8]}"


def _cell(spec: Mapping[str, Any], written: dict[Any, str]) -> str:
    """The spec's cell as its scenario ids are hashed from, each distinct cell encoded once
    per plan (``written``): a plan draws thousands of situations from a few cells. Only cells
    of strings, integers, booleans and None are remembered, by value and type (``1`` and
    ``True`` are equal keys but two cells; ``0.0`` and ``-0.0`` would be too, so floats are
    encoded each time)."""
    key: Any = None
    if all(type(v) in _PLAIN for v in spec.values()):
        key = tuple((k, type(v), v) for k, v in spec.items())
        cell = written.get(key)
        if cell is not None:
            return cell
    cell = _CELL.encode({k: v for k, v in spec.items() if k not in ("arm", "selection_reason")})
    if key is not None:
        written[key] = cell
    return cell


_PLAIN = frozenset({str, int, bool, type(None)})


def plan_from_specs(
    params: RunParams, world: World, specs: list[dict[str, Any]], *, start: int = 0
) -> list[PlannedSituation]:
    """One plan per (spec, phrasing); the specs take situation indices from ``start``."""
    plans = []
    cells: dict[Any, str] = {}
    for i, spec in enumerate(specs, start=start):
        arm = spec.pop("arm", None)
        reason = spec.pop("selection_reason", None)
        for p in range(params.requests_per_situation):
            # One seed per situation, fresh for every phrasing: the world draws the same facts
            # (customer, order, hidden state, goal) and only the wording changes with ``p``.
            situation_seed = derive_seed(params.seed, "situation", i)
            situation = world.template_situation(spec, random.Random(situation_seed), phrasing=p)
            plans.append(
                PlannedSituation(
                    i,
                    p,
                    _scenario_id(world, i, _cell(spec, cells), p, params.seed),
                    dict(spec),
                    situation,
                    None if arm is None else str(arm),
                    reason,
                    seed=situation_seed,
                )
            )
    return plans


def plan_from_tasks(
    params: RunParams, world: World, tasks: Sequence[Any]
) -> list[PlannedSituation]:
    """Situations replayed from rows (or prompts) you pass as ``tasks=``.

    A row in memory carries its privileged block (hidden state, goal, reference) and is
    replayed as it was. A saved row or a bare prompt does not: the world rebuilds the
    situation's facts from the seed and spec the row carries (the same seed, spec and
    phrasing give the same facts), or from a seed of this run for a bare prompt, and the
    prompt is kept word for word. A row with an answer key but no hidden state (a dataset's
    prompt and reference) keeps its key over the rebuilt one."""
    plans = []
    for i, task in enumerate(tasks):
        if isinstance(task, str):
            row: Mapping[str, Any] = {"prompt": task}
        elif isinstance(task, Mapping) and isinstance(task.get("prompt"), str):
            row = task
        else:
            raise ValueError(
                f"tasks[{i}] must be a prompt string or a row with a 'prompt', got {task!r}"
            )
        held = row.get("privileged")
        privileged: Mapping[str, Any] = held if isinstance(held, Mapping) else {}
        scenario_id = str(
            row.get("scenario_id") or row.get("task_id") or prompt_hash(row["prompt"])
        )
        dims = dict(row.get("scenario_dimensions") or {})
        given_seed = row.get("seed")
        seed = (
            given_seed if isinstance(given_seed, int) and not isinstance(given_seed, bool) else None
        )
        writer_model = str(row.get("writer_model") or SEED_WRITER)
        key = _answer_key_given(privileged, i)
        hidden = privileged.get("hidden_state")
        if hidden:
            if not isinstance(hidden, Mapping):
                raise ValueError(
                    f"tasks[{i}]['privileged']['hidden_state'] must be a mapping, "
                    f"got {type(hidden).__name__}: {hidden!r}"
                )
            situation = Situation(
                situation_id=scenario_id,
                prompt=row["prompt"],
                dimensions=dims,
                hidden_state=dict(hidden),
                writer_model=writer_model,
                **key,
                **_who_the_user_is(world, row, dims, seed),
            )
        else:
            if seed is None:
                seed = derive_seed(params.seed, "task", i)
            lineage = row.get("lineage")
            phrasing = lineage.get("phrasing", 0) if isinstance(lineage, Mapping) else 0
            rebuilt = world.template_situation(dims, random.Random(seed), phrasing=int(phrasing))
            situation = attrs.evolve(
                rebuilt,
                situation_id=scenario_id,
                prompt=row["prompt"],
                writer_model=writer_model,
                dimensions=dims or dict(rebuilt.dimensions),
                **key,
            )
            dims = dict(situation.dimensions)
        plans.append(
            PlannedSituation(
                i,
                0,
                scenario_id,
                dims,
                situation,
                row.get("arm"),
                row.get("selection_reason"),
                replayed=isinstance(task, Mapping) and "writer_model" in row,
                seed=seed,
            )
        )
    seen: set[str] = set()
    unique = []
    for plan in plans:
        if plan.scenario_id not in seen:
            seen.add(plan.scenario_id)
            unique.append(plan)
    return unique


#: what a task row's privileged block may say of its answer key (with a hidden state or
#: without), and what each must be (the Situation field it fills); a reference may be any value
_GIVEN_KEY: dict[str, tuple[type | tuple[type, ...], str]] = {
    "goal": (Mapping, "a mapping"),
    "principle": (str, "a string"),
    # (a list is a rubric of criteria, which the rubric judge writes as bullets)
    "rubric": ((str, list, tuple), "a string or a list of criteria"),
}


def _answer_key_given(privileged: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The answer key a task row gives: its reference, goal, principle and rubric, each
    checked. Beside a hidden state they are the situation's; without one the world rebuilds
    the facts and these replace the rebuilt ones, so a reference the user gave is never
    dropped for a drawn one."""
    given: dict[str, Any] = {}
    if privileged.get("reference") is not None:
        given["reference"] = privileged["reference"]
    for name, (kind, described) in _GIVEN_KEY.items():
        value = privileged.get(name)
        if value is None:
            continue
        if not isinstance(value, kind):
            raise ValueError(
                f"tasks[{index}]['privileged'][{name!r}] must be {described}, "
                f"got {type(value).__name__}: {value!r}"
            )
        # (a goal is copied, as a replayed situation's own is)
        given[name] = dict(value) if isinstance(value, Mapping) else value
    return given


def _who_the_user_is(
    world: World, row: Mapping[str, Any], dims: Mapping[str, Any], seed: int | None
) -> dict[str, Any]:
    """The persona and patience of a replayed in-memory row's user, which the row does not
    carry: the world's templates give them again from the row's seed and spec (nothing, so
    the defaults, when the world cannot)."""
    if seed is None:
        return {}
    lineage = row.get("lineage")
    phrasing = lineage.get("phrasing", 0) if isinstance(lineage, Mapping) else 0
    try:
        again = world.template_situation(dict(dims), random.Random(seed), phrasing=int(phrasing))
    except Exception:  # a spec the world's templates no longer know
        return {}
    return {"persona": again.persona, "patience": again.patience}


def jobs_for(
    plans: Sequence[PlannedSituation],
    repeats: range,
    seed: int,
    *,
    replayed_from: str | None,
    run_index: int = 0,
) -> PlannedJobs:
    """One job per (plan, repeat), plan by plan. Its rollout seed is derived from the run
    seed, the situation and the repeat, and from ``run_index`` for the second and later runs
    of ``runs=N``, so each run of a replay draws fresh rollouts (run-to-run noise is real)."""
    return PlannedJobs(list(plans), repeats, seed, replayed_from, run_index)


class PlannedJobs(Sequence[Job]):
    """The jobs of some plans and repeats, each made when it is read: a million-rollout run
    holds its plans, not a million jobs. ``without(keys)`` leaves out the jobs already done."""

    def __init__(
        self,
        plans: list[PlannedSituation],
        repeats: range,
        seed: int,
        replayed_from: str | None,
        run_index: int,
        picked: Sequence[int] | None = None,
    ) -> None:
        self._plans = plans
        self._repeats = repeats
        self._seed = seed
        self._replayed_from = replayed_from
        self._again = () if run_index == 0 else (run_index,)
        self._run_index = run_index
        #: which of the (plan, repeat) positions are in the sequence; None for all
        self._picked = picked

    def __len__(self) -> int:
        if self._picked is not None:
            return len(self._picked)
        return len(self._plans) * len(self._repeats)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"job {index} of {n}")
        return self._job(self._positions()[i])

    def __iter__(self) -> Any:
        return (self._job(p) for p in self._positions())

    def job_keys(self) -> list[str]:
        return [self._key(p) for p in self._positions()]

    def without(self, done: Collection[str]) -> PlannedJobs:
        """These jobs less those whose key is in ``done``."""
        if not done:
            return self
        picked = [p for p in self._positions() if self._key(p) not in done]
        return PlannedJobs(
            self._plans, self._repeats, self._seed, self._replayed_from, self._run_index, picked
        )

    def _positions(self) -> Sequence[int]:
        return self._picked if self._picked is not None else range(len(self))

    def _key(self, position: int) -> str:
        plan, r = divmod(position, len(self._repeats))
        return f"{self._plans[plan].scenario_id}/r{self._repeats[r]}"

    def _job(self, position: int) -> Job:
        at, r_index = divmod(position, len(self._repeats))
        plan, r = self._plans[at], self._repeats[r_index]
        return Job(
            key=f"{plan.scenario_id}/r{r}",
            situation=plan.situation,
            scenario_id=plan.scenario_id,
            situation_index=plan.index,
            phrasing=plan.phrasing,
            repeat=r,
            seed=derive_seed(self._seed, "rollout", plan.scenario_id, r, *self._again),
            spec=plan.spec,
            arm=plan.arm,
            selection_reason=plan.selection_reason,
            replayed=plan.replayed or self._replayed_from is not None,
            replayed_from_run=self._replayed_from,
            situation_seed=plan.seed,
            prefix=plan.prefix,
            branched_from=plan.branched_from,
            episode_seed=plan.episode_seed,
        )
