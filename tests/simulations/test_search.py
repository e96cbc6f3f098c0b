"""The strategy contract: a strategy is asked for situations in batches and told each batch's
rows before it is asked again; a filter may turn written situations away; a strategy that
only draws up front still works. Driven through simulate() as a third party's would be."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import sim_doubles as d

import whileai as wai
from whileai import hookimpl


class Recorder:
    """Asks for the cells in order and remembers everything it is asked and told."""

    name = "recorder"

    def __init__(self) -> None:
        self.asks: list[int] = []
        self.told: list[list[dict[str, Any]]] = []

    def ask(
        self,
        dimensions: Mapping[str, Sequence[Any]],
        n: int,
        rng: random.Random,
        arm_weights: Mapping[str, float] | None,
    ) -> list[dict[str, Any]]:
        self.asks.append(n)
        statuses = list(dimensions["status"])
        start = sum(self.asks[:-1])
        return [
            {
                "status": statuses[(start + i) % len(statuses)],
                "arm": f"turn-{len(self.asks)}",
                "selection_reason": f"recorder: ask {len(self.asks)}, spec {i}",
            }
            for i in range(n)
        ]

    def tell(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.told.append([dict(r) for r in rows])


class Strategies:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    @hookimpl
    def whileai_register_strategies(self, register: Any) -> None:
        register("recorder", lambda **_: self.recorder)


def run(*plugins: object, **given: Any) -> Any:
    params = {**d.BASE, "fault_rate": 0.0, **given}
    params["advanced"] = {**d.BASE["advanced"], **given.get("advanced", {})}
    return wai.simulate(registry=d.registry(*plugins), **params)


def test_a_strategy_is_told_every_row_of_every_batch_before_it_is_asked_again() -> None:
    recorder = Recorder()
    data = run(
        Strategies(recorder),
        strategy="recorder",
        unique=10,
        repeats=2,
        advanced={"search_batch": 4},
    )
    assert recorder.asks == [4, 4, 2]
    assert [len(batch) for batch in recorder.told] == [8, 8, 4]  # 2 repeats per situation
    told = [row for batch in recorder.told for row in batch]
    assert sorted(r["lineage"]["rollout_key"] for r in told) == sorted(
        r["lineage"]["rollout_key"] for r in data.rows
    )
    for row in told:
        assert row["reward"] in (0.0, 1.0)
        assert row["behavior_signature"].endswith(("satisfied", "turn_limit", "gave_up"))
        assert len(row["vector"]) == 256
        assert "markers" in row
    # what each batch was told is what that batch's specs produced
    assert {r["arm"] for r in recorder.told[1]} == {"turn-2"}
    assert data.rows[12]["selection_reason"] == "recorder: ask 2, spec 2"  # situation 6
    assert data.report().search == {
        "strategy": "recorder",
        "learns": True,
        "batches": 3,
        "asked": 10,
        "rejected": 0,
        "skipped": 0,
        "rejections": {},
        "hard_share_realised": 0.2,  # round(0.25 * 10) hard, kept over the batches
        "stopped_short": None,
    }


class Picky(Recorder):
    """Turns away every other situation it is shown."""

    name = "picky"

    def __init__(self) -> None:
        super().__init__()
        self.shown = 0

    def admit(self, spec: Mapping[str, Any], situation: Any, vector: Sequence[float]) -> Any:
        self.shown += 1
        if self.shown % 2 == 0:
            return False, "picky: an even one"
        return True, f"picky: shown {self.shown}"


def test_a_filter_turns_situations_away_and_the_strategy_is_asked_for_more() -> None:
    picky = Picky()
    data = run(strategy=picky, unique=4, repeats=1)  # an object is used as it is
    assert len(data.rows) == 4
    assert picky.shown == 7  # four kept, three turned away (the last ask is one short)
    report = data.report().search
    assert report["rejected"] == 3 and report["rejections"] == {"picky: an even one": 3}
    assert data.rows[0]["selection_reason"] == "recorder: ask 1, spec 0; picky: shown 1"
    # turned-away situations keep their index: the kept ones are 0, 2, 4, 6
    assert [r["lineage"]["situation"] for r in data.rows] == [0, 2, 4, 6]


def test_a_strategy_that_only_draws_up_front_is_asked_once_for_the_whole_run() -> None:
    data = run(unique=6, repeats=1, strategy="alternate")
    assert data.report().search["batches"] == 1
    assert data.report().search["learns"] is False
    assert [r["arm"] for r in data.rows] == ["a", "b", "a", "b", "a", "b"]


def test_arm_weights_without_a_strategy_is_an_error_not_an_echo() -> None:
    with pytest.raises(ValueError, match="arm_weights= needs a strategy that draws by them"):
        run(unique=2, repeats=1, arm_weights={"a": 1.0, "b": 2.0})


def test_a_strategy_that_cannot_propose_is_refused_by_name() -> None:
    class Mute:
        name = "mute"

    with pytest.raises(TypeError, match="strategy='mute' has neither ask"):
        run(unique=2, repeats=1, strategy=Mute())


def test_a_learning_run_killed_and_resumed_asks_exactly_as_before(tmp_path: Any) -> None:
    """The resumed run is told the rows already on disk, so its strategy asks the same."""
    whole = run(Strategies(Recorder()), strategy="recorder", unique=9, repeats=1, seed=4)
    out = tmp_path / "run.jsonl"
    first = Recorder()
    run(Strategies(first), strategy="recorder", unique=9, repeats=1, seed=4, output=str(out))
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:5]) + "\n")  # a run killed after five rows
    again = Recorder()
    resumed = run(
        Strategies(again),
        strategy="recorder",
        unique=9,
        repeats=1,
        seed=4,
        output=str(out),
        resume=True,
    )
    assert again.asks == first.asks
    assert [len(b) for b in again.told] == [len(b) for b in first.told]
    key = ["scenario_id", "prompt", "arm", "selection_reason"]
    assert [[r[k] for k in key] for r in resumed.rows] == [[r[k] for k in key] for r in whole.rows]


def test_hard_share_holds_when_dimensions_leave_difficulty_out() -> None:
    """The world's own difficulty values fill the rest, so hard_share=0 means none hard."""
    none_hard = run(unique=20, repeats=1, hard_share=0.0, dimensions={"status": ["shipped"]})
    assert [r["scenario_dimensions"].get("difficulty") for r in none_hard.rows] == ["easy"] * 20
    assert none_hard.report().hard_share_realised == 0.0
    some = run(unique=20, repeats=1, hard_share=0.25, dimensions={"status": ["shipped"]})
    assert some.report().hard_share_realised == 0.25


def test_a_dimension_the_world_does_not_vary_is_an_error_naming_its_dimensions() -> None:
    with pytest.raises(ValueError, match=r"dimensions= names 'colour', which world 'tinyshop'"):
        run(unique=2, repeats=1, dimensions={"colour": ["red"], "status": ["shipped"]})


def test_the_worked_strategy_in_the_plugin_docs_runs_as_written() -> None:
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text()
    section = page.split("### Strategies", 1)[1].split("### Worlds", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, Any] = {}
    exec(code.group(1), namespace)
    data = run(namespace["Plugin"](), strategy="retry-failures", unique=24, repeats=1, seed=3)
    arms = [r["arm"] for r in data.rows]
    assert "retry" in arms and "explore" in arms  # it was told failures and went back
    retried = [r for r in data.rows if r["arm"] == "retry"]
    assert all(r["selection_reason"] == "retry-failures: back to a failed cell" for r in retried)


def test_a_rows_seed_is_its_situations_and_each_rollout_keeps_its_own_in_lineage() -> None:
    data = run(unique=3, phrasings=2, repeats=2)
    by_situation: dict[int, set[int]] = {}
    for row in data.rows:
        by_situation.setdefault(row["lineage"]["situation"], set()).add(row["seed"])
    assert all(len(seeds) == 1 for seeds in by_situation.values())  # phrasings x repeats share it
    assert len({next(iter(s)) for s in by_situation.values()}) == 3
    rollout_seeds = [r["lineage"]["rollout_seed"] for r in data.rows]
    assert len(set(rollout_seeds)) == 12


def test_each_run_of_runs_n_draws_fresh_rollouts_of_the_same_situations() -> None:
    first, second = run(unique=3, repeats=2, runs=2)
    assert [r["prompt"] for r in first.rows] == [r["prompt"] for r in second.rows]
    assert [r["seed"] for r in first.rows] == [r["seed"] for r in second.rows]
    one = {r["lineage"]["rollout_seed"] for r in first.rows}
    two = {r["lineage"]["rollout_seed"] for r in second.rows}
    assert one.isdisjoint(two)


def test_rl_extra_repeats_go_to_the_most_split_groups_first() -> None:
    """With budget for one group's extra repeats, the group nearest a 50% pass rate gets them."""
    data = run(
        unique=8,
        repeats=4,
        mode="rl",
        seed=1,  # its first split group passes 3 of 4; the fourth passes 2 of 4
        budget=34,
        advanced={"adaptive_extra_repeats": 2},
    )
    rates: dict[str, list[float]] = {}
    for row in data.rows:
        if row["lineage"]["repeat"] < 4:
            rates.setdefault(row["scenario_id"], []).append(row["reward"])
    extra = {r["scenario_id"] for r in data.rows if r["lineage"]["repeat"] >= 4}
    split = {k: sum(v) / len(v) for k, v in rates.items() if 0 < sum(v) < len(v)}
    assert len(extra) == 1 and len(split) > 1
    (chosen,) = extra
    assert split[chosen] == 0.5
    first_split = next(
        r["scenario_id"]
        for r in sorted(data.rows, key=lambda r: r["lineage"]["situation"])
        if r["scenario_id"] in split
    )
    assert split[first_split] == 0.75 and chosen != first_split
    # the report says where the 34 rollouts went, group by group
    went = data.report().rollouts
    assert (went["budget"], went["planned"], went["extra"]) == (34, 32, 2)
    assert went["cut_by_budget"] == 2 * (len(split) - 1)
    assert went["groups"][chosen] == {"planned": 4, "extra": 2, "cut_by_budget": 0}
    assert went["groups"][first_split] == {"planned": 4, "extra": 0, "cut_by_budget": 2}
    assert "rollouts planned / extra / cut" in str(data.report())


def test_a_strategy_that_draws_up_front_lets_each_spec_go_once_it_is_asked_for() -> None:
    import gc
    import types

    from whileai.simulations.search import EvenSpread, UpFront

    up = UpFront(EvenSpread(), total=5)
    dimensions = {"topic": ["a", "b"], "tone": ["calm"]}
    rng = random.Random(0)
    first = up.ask(dimensions, 2, rng, None)
    rest = up.ask(dimensions, 10, rng, None)
    assert [len(first), len(rest)] == [2, 3]
    assert up.ask(dimensions, 1, rng, None) == []
    assert {s["topic"] for s in first + rest} == {"a", "b"}
    # a long run's plan holds what each spec became; the strategy keeps none of them
    handed = first + rest
    for spec in handed:
        holders = [
            r
            for r in gc.get_referrers(spec)
            if not any(r is mine for mine in (first, rest, handed))
            and not isinstance(r, types.FrameType)
        ]
        assert holders == []
