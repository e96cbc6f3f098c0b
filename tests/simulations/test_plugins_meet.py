"""simulate() with the built-in plugins it was written beside: the grid strategy, the shop
world, the rubric judge, the markers and the OpenAI-compatible backend."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import sim_doubles as d

import whileai as wai
from whileai.backends import Completion, ToolCall

pytestmark = pytest.mark.plugins

# The built-in plugins; the core-only check runs without them, and skips this module.
judges_plugin = pytest.importorskip("whileai_judges.plugin")
markers_plugin = pytest.importorskip("whileai_markers.plugin")
openai_plugin = pytest.importorskip("whileai_openai.plugin")
strategies_plugin = pytest.importorskip("whileai_strategies.plugin")
worlds_plugin = pytest.importorskip("whileai_worlds.plugin")
openai_testing = pytest.importorskip("whileai_openai.testing")
FaultServer, Reply = openai_testing.FaultServer, openai_testing.Reply


def run(*extra_plugins: object, **kwargs: Any) -> Any:
    params = {**d.BASE, **kwargs}
    params["advanced"] = {**d.BASE["advanced"], **(kwargs.get("advanced") or {})}
    return wai.simulate(registry=d.registry(*extra_plugins), **params)


def test_the_grid_strategy_balances_hard_share_across_the_other_dimensions() -> None:
    data = run(strategies_plugin, unique=12, repeats=1, strategy="grid", hard_share=0.5)
    cells = Counter(
        (r["scenario_dimensions"]["status"], r["scenario_dimensions"]["difficulty"])
        for r in data.rows
    )
    # 12 situations over 3 statuses x 2 difficulties: the grid puts 2 in every cell, which an
    # override drawn after the strategy had chosen would scatter
    assert cells == {
        (s, diff): 2 for s in ("shipped", "delivered", "processing") for diff in ("easy", "hard")
    }
    assert all("hard_share 0.5" in r["selection_reason"] for r in data.rows)


def test_phrasings_reword_one_situation_and_each_is_a_task_of_its_repeats() -> None:
    data = run(
        worlds_plugin,
        unique=2,
        phrasings=3,
        repeats=4,
        max_turns=1,
        fault_rate=0.0,
        advanced={"world": "shop"},
    )
    assert len(data.rows) == 2 * 3 * 4
    for situation in (0, 1):
        mine = [t for t in data.trajectories if t["lineage"]["situation"] == situation]
        # one customer, one order, one goal: the same hidden state behind every wording
        assert len({json.dumps(t["privileged"], sort_keys=True) for t in mine}) == 1
        assert len({t["prompt"] for t in mine}) == 3
        assert len({json.dumps(t["world_state"]["orders"], sort_keys=True) for t in mine}) == 1
        # each phrasing is its own task, and the engine writes task_id == scenario_id
        assert len({t["scenario_id"] for t in mine}) == 3
        assert all(t["task_id"] == t["scenario_id"] for t in mine)
    # pass_at groups the repeats of one request: k is the repeats, not phrasings x repeats
    report = data.pass_at
    assert report.k == 4 and len(report.per_task) == 6


def test_each_fault_on_a_row_points_at_the_tool_step_it_answered() -> None:
    def agent(messages: list[dict[str, Any]], tools: Any) -> Completion:
        asked = sum(1 for m in messages if m["role"] == "tool")
        if tools and asked < 4:
            # two calls per round, two rounds: an ordinal count of calls would miss the steps
            return Completion(
                text="",
                model="scripted",
                sampling={},
                tool_calls=(
                    ToolCall(id=f"c{asked}", name="get_order", arguments={"order_id": "A1000"}),
                    ToolCall(id=f"d{asked}", name="list_orders", arguments={"email": "x@y.z"}),
                ),
            )
        return Completion(text="I could not reach the order system.", model="scripted", sampling={})

    data = run(
        worlds_plugin,
        agent_model=agent,
        unique=2,
        repeats=1,
        max_turns=1,
        fault_rate=1.0,
        advanced={"world": "shop"},
    )
    for row in data.rows:
        assert len(row["faults"]) == 4
        for fault in row["faults"]:
            step = row["steps"][fault["step"]]
            assert step["role"] == "tool" and step["name"] == fault["tool"]
            assert step["fault"] == fault["kind"]


def test_llm_grade_resolves_the_judge_model_in_the_run_registry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the judge's model is a backend only the run's registry knows
    monkeypatch.setenv("WHILEAI_JUDGE", "fake:judge")
    data = run(judges_plugin, unique=2, repeats=3, llm_grade=True)
    for row in data.rows:
        assert row["llm_judge"]["status"] == "ok", row["llm_judge"]["reason"]
        assert row["llm_judge"]["meta"]["model"] == "fake:judge"
        assert row["llm_judge"]["meta"]["served_model"] == "fake-judge-1"
        assert row["llm_reward"] == (1.0 if "Your order is" in row["final_text"] else 0.0)
    assert data.report()["llm_grader"] == "rubric"
    assert "judge: fake:judge (from WHILEAI_JUDGE)" in data.report()["model_notes"]


def test_a_rubric_judge_named_by_judge_grades_with_the_judge_role_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WHILEAI_JUDGE", "fake:judge")
    data = run(judges_plugin, unique=1, repeats=2, judge="rubric")
    assert all(r["judge_meta"]["model"] == "fake:judge" for r in data.rows)
    assert all(r["judge_status"] == "ok" for r in data.rows)


def test_every_simulated_user_step_says_how_the_user_left_it() -> None:
    data = run(markers_plugin, unique=4, repeats=3, fault_rate=0.0)
    user_steps = [s for r in data.rows for s in r["steps"] if s["role"] == "user"]
    assert user_steps and all(
        s["user_status"] in ("continue", "satisfied", "gave_up") for s in user_steps
    )
    for row in data.rows:
        statuses = [s["user_status"] for s in row["steps"] if s["role"] == "user"]
        if row["stop_reason"] == "satisfied":
            assert statuses[-1] == "satisfied" and set(statuses[:-1]) <= {"continue"}
        if statuses and statuses[-1] == "continue":
            assert row["stop_reason"] in ("turn_limit", "gave_up")
    assert any(r["stop_reason"] == "satisfied" for r in data.rows)
    assert all(
        r["markers"]["gave_up"] is False for r in data.rows if r["stop_reason"] == "satisfied"
    )

    quit_run = run(markers_plugin, user_model="fake:quitter-user", unique=2, repeats=2)
    for row in quit_run.rows:
        assert [s["user_status"] for s in row["steps"] if s["role"] == "user"] == ["gave_up"]
        assert row["stop_reason"] == "gave_up" and row["markers"]["gave_up"] is True


def test_an_endpoint_answering_429_then_ok_gives_good_rows_and_a_report_that_says_it_waited() -> (
    None
):
    with FaultServer() as server:
        server.push(Reply.rate_limited(retry_after=0.2), Reply.rate_limited(retry_after=0.2))
        data = run(
            openai_plugin,
            agent_model=server.url,
            unique=2,
            repeats=1,
            max_turns=1,
            fault_rate=0.0,
        )
        chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert all(not r.get("error") for r in data.rows)
    assert all(r["final_text"].startswith("echo:") for r in data.rows)
    # two 429s were waited out: two more requests than rows
    assert len(chats) == len(data.rows) + 2
    stats = data.report()["backends"][server.url]["stats"]
    assert stats["retries"] == 2 and stats["rate_limited"] == 2
    assert stats["errors"] == {"rate_limited": 2} and stats["waited_s"] >= 0.2
    (sentence,) = [w for w in data.warnings if "rate limits" in w]
    assert sentence.startswith(f"The agent backend {server.url} waited ")
    assert "on rate limits over 2 retries" in sentence
    assert sum(r["usage"]["retries"] for r in data.rows) == 2


def test_grading_a_run_later_with_a_rubric_judge_closes_the_judge_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spies = d.SpyBackends()
    monkeypatch.setenv("WHILEAI_JUDGE", "spy:judge")
    data = run(spies, judges_plugin, unique=1, repeats=2)
    graded = data.grade("rubric")
    (judge,) = [b for b in spies.built if b.role == "judge"]
    assert judge.calls == 2 and judge.closed == 1
    assert all(r["judge_status"] == "ok" for r in graded.rows)
