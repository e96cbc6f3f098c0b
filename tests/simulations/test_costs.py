"""Cost in money as a user meets it: every row's usage.cost_usd, report()["cost"] by role,
a model with no price costing None (never 0), and budget_usd stopping a run that resume
finishes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

import whileai as wai
from whileai import hookimpl
from whileai.backends import Completion
from whileai.pricing import Price, price_table, shipped_table
from whileai.schema.files import read_jsonl, sidecar_path

from .sim_doubles import BASE, FakeBackend, registry


class Metered(FakeBackend):
    """A FakeBackend serving a named model, counting its tokens as a real backend does."""

    def __init__(self, role: str, model: str) -> None:
        super().__init__(role)
        self.name = f"meter:{model}"
        self.model = model

    async def complete(self, messages: Any, tools: Any = None, sampling: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
        answer: Completion = await super().complete(messages, tools, sampling, **kw)
        self.stats.input_tokens += answer.input_tokens or 0
        self.stats.output_tokens += answer.output_tokens or 0
        return attrs.evolve(answer, model=self.model)


class MeterPlugin:
    """``meter:<model>`` for the agent, ``meter-user:<model>`` for the simulated user."""

    def __init__(self) -> None:
        self.built: list[Metered] = []

    @hookimpl
    def whileai_register_backends(self, register: Any) -> None:
        def agent(argument: str = "gpt-4o-mini", **_: Any) -> Metered:
            self.built.append(Metered("agent", argument))
            return self.built[-1]

        def user(argument: str = "gpt-4o", **_: Any) -> Metered:
            self.built.append(Metered("user", argument))
            return self.built[-1]

        register("meter", agent)
        register("meter-user", user)


def run(plugin: MeterPlugin, agent: str = "meter:gpt-4o-mini", **params: Any) -> Any:
    advanced = {**BASE["advanced"], **params.pop("advanced", {})}
    return wai.simulate(
        **{**BASE, "agent_model": agent, "user_model": "meter-user:gpt-4o", "advanced": advanced},
        registry=registry(plugin),
        unique=params.pop("unique", 4),
        repeats=params.pop("repeats", 2),
        seed=7,
        **params,
    )


def test_every_row_says_what_its_model_calls_cost_and_the_report_sums_them_by_role() -> None:
    data = run(MeterPlugin())
    mini, four_o = shipped_table().lookup("gpt-4o-mini"), shipped_table().lookup("gpt-4o")
    assert mini is not None and four_o is not None
    agent_total = user_total = 0.0
    for row in data.rows:
        usage = row["usage"]
        agent = mini.cost(usage["input_tokens"], usage["output_tokens"])
        user = four_o.cost(usage["user_input_tokens"], usage["user_output_tokens"])
        assert usage["cost_usd"] == pytest.approx(agent + user, abs=1e-8)
        agent_total += agent
        user_total += user
    cost = data.report()["cost"]
    assert cost["usd_by_role"]["agent"] == pytest.approx(agent_total, abs=1e-6)
    assert cost["usd_by_role"]["user"] == pytest.approx(user_total, abs=1e-6)
    assert cost["usd_by_role"]["writer"] == cost["usd_by_role"]["judge"] == 0.0
    assert cost["total_usd"] == pytest.approx(agent_total + user_total, abs=1e-5)
    assert cost["unpriced"] == [] and cost["prices_date"] == shipped_table().date
    assert "cost (USD)" in str(data.report())


def test_a_model_with_no_price_costs_none_and_is_named_once() -> None:
    data = run(MeterPlugin(), agent="meter:house-model-7b")
    assert {r["usage"]["cost_usd"] for r in data.rows} == {None}
    cost = data.report()["cost"]
    assert cost["usd_by_role"]["agent"] is None and cost["total_usd"] is None
    assert cost["unpriced"] == ["house-model-7b"]
    named = [w for w in data.warnings if "No price for 'house-model-7b'" in w]
    assert len(named) == 1
    # priced by the caller, it costs what they said
    priced = run(
        MeterPlugin(),
        agent="meter:house-model-7b",
        advanced={"prices": {"house-model-7b": {"input": 1.0, "output": 2.0}}},
    )
    row = priced.rows[0]["usage"]
    user = shipped_table().lookup("gpt-4o")
    assert user is not None
    expected = Price(1.0, 2.0).cost(row["input_tokens"], row["output_tokens"]) + user.cost(
        row["user_input_tokens"], row["user_output_tokens"]
    )
    assert row["cost_usd"] == pytest.approx(expected, abs=1e-8)


def test_a_budget_stops_the_run_and_resume_with_more_plays_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    full = run(MeterPlugin(), unique=8, repeats=2)
    whole = full.report()["cost"]["total_usd"]
    budget = whole / 4
    stopped = run(
        MeterPlugin(),
        unique=8,
        repeats=2,
        output=str(out),
        advanced={"budget_usd": budget, "max_concurrency": 1},
    )
    report = stopped.report()
    assert report["stopped"] and "budget_usd=" in report["stopped"]
    assert 0 < len(stopped.rows) < 16
    assert report["cost"]["total_usd"] >= budget
    # one rollout past the line at most: a run with one in flight stops right after it
    assert report["cost"]["total_usd"] < budget + max(r["usage"]["cost_usd"] for r in full.rows)
    on_disk = read_jsonl(out).rows
    assert [r["lineage"]["rollout_key"] for r in on_disk] == [
        r["lineage"]["rollout_key"] for r in stopped.rows
    ]
    assert json.loads(sidecar_path(out).read_text())["complete"] is False
    assert any("stopped short" in w for w in stopped.warnings)
    resumed = run(
        MeterPlugin(),
        unique=8,
        repeats=2,
        output=str(out),
        resume=True,
        advanced={"budget_usd": whole * 10, "max_concurrency": 1},
    )
    keys = [r["lineage"]["rollout_key"] for r in read_jsonl(out).rows]
    assert len(keys) == len(set(keys)) == 16
    assert resumed.report()["stopped"] is None
    assert json.loads(sidecar_path(out).read_text())["complete"] is True


def test_a_budget_needs_a_price_for_every_model_before_any_call() -> None:
    plugin = MeterPlugin()
    with pytest.raises(ValueError, match=r"needs a price for every model.*'meter:house-model"):
        run(plugin, agent="meter:house-model-7b", advanced={"budget_usd": 1.0})
    assert sum(b.calls for b in plugin.built) == 0


def test_prices_are_found_by_name_and_bad_ones_are_named() -> None:
    table = shipped_table()
    assert table.lookup("gpt-4o-mini-2024-07-18") == table.lookup("gpt-4o-mini")
    assert table.lookup("gpt-4o-2024-08-06") == table.lookup("gpt-4o")
    assert table.lookup("openai:gpt-4.1") == table.lookup("gpt-4.1")
    assert table.lookup("local:smollm2") == Price(0.0, 0.0, 0.0)
    assert table.lookup("some-other-model") is None
    # cached input at its own price, never more tokens than were sent
    assert Price(2.0, 8.0, 0.5).cost(1_000_000, 0, cached_input_tokens=400_000) == pytest.approx(
        0.6 * 2.0 + 0.4 * 0.5
    )
    with pytest.raises(ValueError, match=r"'x' input must be a price >= 0"):
        price_table({"x": {"input": -1, "output": 1}})
    with pytest.raises(ValueError, match="prices must be a mapping"):
        price_table(42)


class PromptCached(Metered):
    """A server that answers three quarters of every prompt from its prompt cache."""

    async def complete(self, messages: Any, tools: Any = None, sampling: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
        answer: Completion = await super().complete(messages, tools, sampling, **kw)
        cached = (answer.input_tokens or 0) * 3 // 4
        self.stats.cached_input_tokens += cached
        return attrs.evolve(answer, cached_input_tokens=cached)


def test_input_the_server_served_from_its_prompt_cache_costs_the_cached_rate() -> None:
    class CachedPlugin(MeterPlugin):
        @hookimpl
        def whileai_register_backends(self, register: Any) -> None:
            register("cached", lambda argument="gpt-4o", **_: PromptCached("agent", argument))
            register("meter-user", lambda argument="gpt-4o", **_: Metered("user", argument))

    data = run(CachedPlugin(), agent="cached:gpt-4o")
    assert any(r["usage"]["cached_input_tokens"] for r in data.rows)
    four_o = shipped_table().lookup("gpt-4o")
    assert four_o is not None and four_o.cached_input is not None
    assert four_o.cached_input < four_o.input
    for row in data.rows:
        usage = row["usage"]
        assert usage["cached_input_tokens"] == sum(
            (s["input_tokens"] or 0) * 3 // 4 for s in row["steps"] if s["role"] == "assistant"
        )
        agent = four_o.cost(
            usage["input_tokens"], usage["output_tokens"], usage["cached_input_tokens"]
        )
        user = four_o.cost(usage["user_input_tokens"], usage["user_output_tokens"])
        assert usage["cost_usd"] == pytest.approx(agent + user, abs=1e-8)
        # cheaper than the same tokens at the full input rate
        full = four_o.cost(usage["input_tokens"], usage["output_tokens"])
        assert usage["cached_input_tokens"] == 0 or agent < full
    # a judge's or writer's cached tokens are priced from its backend's counters the same way
    assert data.report()["cost"]["usd_by_role"]["agent"] == pytest.approx(
        sum(
            four_o.cost(
                r["usage"]["input_tokens"],
                r["usage"]["output_tokens"],
                r["usage"]["cached_input_tokens"],
            )
            for r in data.rows
        ),
        abs=1e-6,
    )


def test_a_budget_is_refused_when_a_backend_counts_no_tokens() -> None:
    """A backend with no token counters would spend unseen: the budget could never stop it."""

    class Silent(FakeBackend):
        def __init__(self, role: str) -> None:
            super().__init__(role)
            del self.stats

    class Uncounted(MeterPlugin):
        @hookimpl
        def whileai_register_backends(self, register: Any) -> None:
            super().whileai_register_backends(register)
            register("silent", lambda argument="gpt-4o", **_: Silent("agent"))

    with pytest.raises(ValueError, match=r"count its tokens .* 'silent:gpt-4o' keeps none"):
        run(Uncounted(), agent="silent:gpt-4o", advanced={"budget_usd": 1.0})
