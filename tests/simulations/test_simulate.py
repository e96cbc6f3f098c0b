"""simulate() end to end with the deterministic doubles: rows, provenance, grading, errors."""

from __future__ import annotations

import asyncio
import json
import warnings
from typing import Any

import pytest
import sim_doubles as d

import whileai as wai
from whileai import hookimpl
from whileai.schema.row_file import DuplicateRowsWarning
from whileai.scoring import Verdict


def run(*extra_plugins: object, **kwargs: Any) -> Any:
    params = {**d.BASE, **kwargs}
    params["advanced"] = {**d.BASE["advanced"], **(kwargs.get("advanced") or {})}
    return wai.simulate(registry=d.registry(*extra_plugins), **params)


def test_rows_carry_the_conversation_the_grade_and_their_provenance() -> None:
    data = run(unique=3, repeats=4, seed=1)
    assert len(data.rows) == 12 and data.rows() is data.rows
    row = data.rows[0]
    assert row["schema_version"] == "1"
    assert row["scenario_id"] == row["task_id"]
    assert row["prompt"].startswith(("Where", "Can", "What"))
    assert row["steps"][0]["role"] == "assistant"
    call = row["steps"][0]["tool_calls"][0]
    assert call["name"] == "lookup_order" and set(call) == {"id", "name", "arguments"}
    assert row["steps"][1]["role"] == "tool" and row["steps"][1]["tool_call_id"] == call["id"]
    agent_steps = [s for s in row["steps"] if s["role"] == "assistant"]
    assert row["usage"]["input_tokens"] == sum(s["input_tokens"] for s in agent_steps)
    assert row["usage"]["output_tokens"] == sum(s["output_tokens"] for s in agent_steps)
    assert row["messages"][0]["role"] == "system"
    assert row["messages"][1] == {"role": "user", "content": row["prompt"]}
    sha = row["lineage"]["system_prompt_sha"]
    assert row["policy_version"] == f"fake-agent-1@{sha}"
    assert row["model_version"] == "fake-agent-1"
    assert row["sampling"] == {"temperature": 0.7, "max_tokens": 256, "model": "fake-agent-1"}
    assert row["writer_model"] == "template"
    assert row["lineage"]["system_prompt_head"] == data.system_prompts[sha][:120]
    assert row["lineage"]["system_prompt_chars"] == len(data.system_prompts[sha])
    assert row["lineage"]["run_id"] == data.metadata["run_id"] == row["run_id"]
    assert row["lineage"]["replayed"] is False
    assert isinstance(row["seed"], int)
    assert set(row["scenario_dimensions"]) == {"status", "difficulty"}
    assert row["judge_name"] == "world:tinyshop" and row["label_source"] == "world"
    assert row["reward"] in (0.0, 1.0)
    assert row["markers"]["n_steps"] == len(row["steps"])
    # privileged stays in memory for the judge and never reaches a row
    assert "hidden_state" in data.trajectories[0]["privileged"]
    assert all("privileged" not in r for r in data.rows)
    # the seed's rule: rows with the user's answer carry who played the user
    assert any(r.get("user_model") == "fake:user" for r in data.rows)


def test_pass_at_groups_by_task_and_reports_the_k_way_numbers() -> None:
    data = run(unique=4, repeats=4)
    report = data.pass_at
    assert report.k == 4
    assert set(report.per_task) == {r["scenario_id"] for r in data.rows}
    assert report.pass_at_1 == pytest.approx(sum(r["reward"] for r in data.rows) / len(data.rows))


def test_report_carries_every_knob_as_resolved() -> None:
    data = run(
        unique=2, repeats=4, fault_rate=0.5, seed=3, hard_share=0.5, advanced={"max_concurrency": 3}
    )
    report = data.report()
    assert report["fault_rate"] == 0.5
    assert report["world"]["default_fault_rate"] == 0.2
    assert "fault_rate=0.5 given" in report["world_note"]
    assert report["knobs"]["max_concurrency"] == 3
    assert report["advanced"] == {"world": "tinyshop", "max_concurrency": 3}
    for key in (
        "mode",
        "budget",
        "seed",
        "repeats",
        "hard_share",
        "strategy",
        "dimensions",
        "arm_weights",
        "n_tasks",
        "n_traces",
        "n_seeds",
        "grader",
        "simulator",
        "agent_model",
        "user_model",
        "sampling",
        "max_turns",
        "max_tool_calls",
    ):
        assert key in report
    assert report["n_traces"] == 8 and report["n_tasks"] == 2
    assert sum(report["faults"].values()) == sum(len(r["faults"]) for r in data.rows)
    assert "fault rate" in str(report) and "pass@1" in str(report)


def test_the_world_default_fault_rate_applies_when_no_rate_is_given() -> None:
    report = run(unique=1, repeats=1).report()
    assert report["fault_rate"] == 0.2
    assert "default_fault_rate 0.2" in report["world_note"]


def test_aliases_stand_for_their_parameters_and_disagreement_is_an_error() -> None:
    data = run(unique=2, phrasings=2, repeats=1, policy="Be brief.", risk=0.0)
    assert len(data.rows) == 4
    assert {r["lineage"]["phrasing"] for r in data.rows} == {0, 1}
    assert data.system_prompts[data.rows[0]["lineage"]["system_prompt_sha"]] == "Be brief."
    assert all(r["faults"] == [] for r in data.rows)
    with pytest.raises(ValueError, match=r"rollouts_per_request=2 and repeats=3 disagree"):
        run(rollouts_per_request=2, repeats=3)
    with pytest.raises(ValueError, match="n= is an alias of requests_per_situation"):
        run(phrasings=2, n=3)
    assert len(run(unique=1, repeats=2, rollouts_per_request=2).rows) == 2


def test_advanced_values_out_of_bounds_name_the_floor_ceiling_and_default() -> None:
    with pytest.raises(ValueError, match=r"max_concurrency.*below its floor 1 \(default 16\)"):
        run(advanced={"max_concurrency": 0})
    with pytest.raises(
        ValueError, match=r"agent_temperature.*above its ceiling 2.0 \(default 0.7\)"
    ):
        run(advanced={"agent_temperature": 3.5})
    with pytest.raises(ValueError, match="did you mean 'max_concurrency'"):
        run(advanced={"max_concurency": 4})


def test_bad_public_values_are_errors_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match="fault_rate must be a number in"):
        run(fault_rate=1.5)
    with pytest.raises(ValueError, match="mode must be one of"):
        run(mode="train")
    with pytest.raises(ValueError, match="budget=5 is below the planned 8 rollouts"):
        run(unique=2, repeats=4, budget=5)


def test_budget_alone_sizes_the_run() -> None:
    data = run(budget=8, repeats=4)
    assert len(data.rows) == 8 and data.report()["unique_situations"] == 2


def test_a_callable_agent_and_its_declared_sampling() -> None:
    seen: list[int] = []

    def agent(messages: list[dict[str, Any]]) -> str:
        seen.append(len(messages))
        return "Your order is shipped."

    data = run(agent_model=agent, unique=2, repeats=2, max_turns=1)
    assert len(seen) == 4
    assert all(r["sampling"] is None for r in data.rows)
    assert data.rows[0]["model_version"].startswith("callable:")
    assert "user_model" not in data.rows[0]  # a single message: nobody played the user

    async def async_agent(messages: list[dict[str, Any]], tools: Any) -> str:
        return "Your order is delivered." if tools else "no tools"

    data = run(
        agent_model=async_agent, unique=1, repeats=2, max_turns=1, sampling={"temperature": 0.0}
    )
    assert data.rows[0]["final_text"] == "Your order is delivered."
    assert data.rows[0]["sampling"] == {"temperature": 0.0}


def test_a_failing_backend_or_tool_becomes_a_row_with_its_error() -> None:
    data = run(agent_model="fake:flaky-agent", unique=5, repeats=4)
    failed = [r for r in data.rows if r.get("error")]
    assert failed and len(failed) < len(data.rows)
    assert all("503" in r["error"] and r["reward"] is None for r in failed)
    assert all(r["judge_status"] == "skipped" for r in failed)
    # the three retries the backend made before giving up count on the failed row
    assert all(r["usage"]["retries"] >= 3 for r in failed)
    assert data.report()["n_errors"] == len(failed)

    def caller(messages: list[dict[str, Any]], tools: Any) -> Any:
        from whileai.backends import Completion, ToolCall

        if any(m["role"] == "tool" for m in messages):
            return "done"
        return Completion(
            text="", model="caller", sampling={}, tool_calls=(ToolCall(id="x", name="explode"),)
        )

    data = run(agent_model=caller, unique=1, repeats=2, advanced={"world": "boomshop"})
    assert all("on fire" in r["error"] for r in data.rows)


def test_a_marker_that_fails_or_exits_is_a_warning_and_the_rows_keep_the_others() -> None:
    # a marker is plugin code run on every row: one that raises, or calls sys.exit, loses its
    # own value and says so; the run, its rows and the other markers go on
    import sys

    def exits(row: dict[str, Any]) -> int:
        sys.exit(3)

    def raises(row: dict[str, Any]) -> int:
        raise KeyError("no such field")

    class Markers:
        @hookimpl
        def whileai_register_markers(self, register: Any) -> None:
            register("exits", lambda: exits)
            register("raises", lambda: raises)

    data = run(Markers(), unique=2, repeats=2)
    assert len(data.rows) == 4
    assert all(set(r["markers"]) == {"n_steps"} for r in data.rows)
    assert "marker 'exits' failed: SystemExit: 3" in data.warnings
    assert "marker 'raises' failed: KeyError: 'no such field'" in data.warnings


def test_a_marker_keeps_to_the_bounds_it_declares_and_the_run_records_them(tmp_path: Any) -> None:
    # a marker declares the range of its values; the run records it beside the rows, where
    # the measurements read it, and a value outside it is the marker's error, not a row value
    class Share:
        bounds = (0, 1)

        def __call__(self, row: dict[str, Any]) -> float:
            return len(row["steps"]) / 10  # a share while a rollout has at most 10 steps

    class Steps:
        bounds = (0, None)

        def __call__(self, row: dict[str, Any]) -> int:
            return len(row["steps"])

    class Tight(Share):
        bounds = (0, 0.1)

    class Misdeclared:
        bounds = (1, 0)

        def __call__(self, row: dict[str, Any]) -> int:
            return 1

    class Markers:
        @hookimpl
        def whileai_register_markers(self, register: Any) -> None:
            register("share", Share)
            register("too_tight", Tight)
            register("steps", Steps)
            register("misdeclared", Misdeclared)

    out = tmp_path / "run.jsonl"
    data = run(Markers(), unique=2, repeats=2, output=str(out))
    # (n_steps, the doubles' marker, declares none)
    bounds = {"share": [0.0, 1.0], "steps": [0.0, None], "too_tight": [0.0, 0.1]}
    assert data.metadata["marker_bounds"] == bounds
    assert json.loads(out.with_suffix(".meta.json").read_text())["metadata"]["marker_bounds"] == (
        bounds
    )
    assert all({"share", "steps", "misdeclared"} <= set(r["markers"]) for r in data.rows)
    assert all("too_tight" not in r["markers"] for r in data.rows)
    assert any(
        w.startswith("marker 'too_tight' returned ")
        and "outside the bounds it declares [0, 0.1]" in w
        for w in data.warnings
    )
    assert any(
        "marker 'misdeclared': bounds has its low end above its high end: (1, 0)" in w
        and "measured without bounds" in w
        for w in data.warnings
    )


def test_two_runs_of_one_plan_pool_whole_and_a_rollout_given_twice_counts_once(
    tmp_path: Any,
) -> None:
    # runs=2 plays the same situations twice: the same rollout keys, each run's own rollouts
    first, second = run(unique=3, repeats=2, seed=4, runs=2)
    pooled = list(first.rows) + list(second.rows)
    assert {r["lineage"]["rollout_key"] for r in first.rows} == {
        r["lineage"]["rollout_key"] for r in second.rows
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error", DuplicateRowsWarning)
        assert wai.pass_at(pooled).counts.rows == 12
    # one file holding both runs' rows reads whole too
    both = tmp_path / "both.jsonl"
    both.write_text("".join(json.dumps(r) + "\n" for r in pooled))
    assert wai.pass_at(str(both)).counts.rows == 12
    # the same run's rows given twice are one run's rollouts
    with pytest.warns(DuplicateRowsWarning, match="the same run and lineage.rollout_key"):
        assert wai.pass_at(list(first.rows) * 2).counts.rows == 6


def test_logprobs_and_truncation_are_recorded_per_turn_and_summed() -> None:
    data = run(unique=2, repeats=2, logprobs=True, sampling={"max_tokens": 3})
    row = data.rows[0]
    agent_steps = [s for s in row["steps"] if s["role"] == "assistant"]
    assert all("logprob" in s and "n_tokens" in s and "truncated" in s for s in agent_steps)
    assert row["n_tokens"] == sum(s["n_tokens"] for s in agent_steps)
    assert row["logprob"] == pytest.approx(sum(s["logprob"] for s in agent_steps))
    assert any(r.get("truncated") for r in data.rows)


def test_a_judge_callable_grades_instead_of_the_world() -> None:
    def strict(row: dict[str, Any]) -> Verdict:
        assert "reference" in row["privileged"]  # the judge sees the answer key
        return Verdict(1.0 if row["privileged"]["reference"] in row["final_text"] else 0.0, "ref")

    data = run(unique=2, repeats=2, judge=strict)
    assert {r["judge_name"].rsplit(".", 1)[-1] for r in data.rows} == {"strict"}
    assert data.report()["grader"].endswith("strict")
    regraded = data.grade(judge=lambda prompt, completion: 1.0)
    assert all(r["reward"] == 1.0 for r in regraded.rows)
    assert "privileged" in regraded.trajectories[0]


def test_regrading_a_run_skips_failed_rollouts_and_bounds_the_judges_in_flight() -> None:
    calls = 0

    def shaky(messages: list[dict[str, Any]]) -> str:
        nonlocal calls
        calls += 1
        if calls % 3 == 0:
            raise RuntimeError("the agent fell over")
        return "fine"

    data = run(agent_model=shaky, unique=12, repeats=1, max_turns=1)
    failed = [r for r in data.rows if r.get("error")]
    assert len(failed) == 4 and all(r["judge_status"] == "skipped" for r in failed)
    in_flight = most = 0

    async def slow_praise(prompt: str, completion: str) -> float:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return 1.0

    regraded = data.grade(slow_praise, concurrency=3)
    # a judge that praises everything still gives a crashed rollout no reward
    for row in regraded.rows:
        if row.get("error"):
            assert row["reward"] is None and row["judge_status"] == "skipped"
            assert row["reason"].startswith("rollout failed: RuntimeError: the agent fell over")
        else:
            assert row["reward"] == 1.0
    assert most == 3  # 8 rows judged, never more than 3 at once
    with pytest.raises(ValueError, match="concurrency= must be a positive int, got 0"):
        data.grade(slow_praise, concurrency=0)


class RubricPlugin:
    @hookimpl
    def whileai_register_judges(self, register: Any) -> None:
        async def rubric(row: dict[str, Any]) -> Verdict:
            return Verdict(0.5, "half")

        rubric.name = "rubric"  # type: ignore[attr-defined]
        rubric.version = "t1"  # type: ignore[attr-defined]
        register("rubric", lambda: rubric)


def test_llm_grade_adds_the_rubric_score_beside_the_reward() -> None:
    data = run(RubricPlugin(), unique=1, repeats=2, llm_grade=True)
    assert all(r["llm_reward"] == 0.5 for r in data.rows)
    assert all(r["judge_name"] == "world:tinyshop" for r in data.rows)


def test_a_strategy_names_the_arm_and_why_each_situation_was_chosen() -> None:
    data = run(unique=4, repeats=1, strategy="alternate")
    assert [r["arm"] for r in data.rows] == ["a", "b", "a", "b"]
    assert data.rows[1]["selection_reason"] == "arm b turn 1"
    assert data.report()["strategy"] == "alternate"


def test_hard_share_sets_the_difficulty_of_that_share_of_situations() -> None:
    data = run(unique=8, repeats=1, hard_share=0.5)
    hard = [r for r in data.rows if r["scenario_dimensions"]["difficulty"] == "hard"]
    assert len(hard) == 4


def test_rl_mode_adds_repeats_where_groups_split() -> None:
    data = run(unique=6, repeats=4, mode="rl", advanced={"adaptive_extra_repeats": 2})
    sizes: dict[str, int] = {}
    for r in data.rows:
        sizes[r["scenario_id"]] = sizes.get(r["scenario_id"], 0) + 1
    assert set(sizes.values()) <= {4, 6} and 6 in sizes.values()
    assert data.report()["repeat_policy"] == "rl"


def test_the_same_model_as_agent_and_user_is_degraded_and_says_the_fix() -> None:
    data = run(user_model="fake:agent", unique=1, repeats=1, max_turns=1)
    assert data.degraded == []
    data = run(user_model="fake:agent", agent_model="fake:agent", unique=1, repeats=1)
    assert data.degraded == ["same_model"]
    (warning,) = [w for w in data.warnings if "also played the user" in w]
    assert "user_model=" in warning and "simulator=" in warning


def test_observers_see_the_run_and_a_failing_one_is_a_warning() -> None:
    observer = d.Observer()
    data = run(observer, d.BrokenObserver(), unique=2, repeats=2)
    kinds = [e[0] for e in observer.events]
    assert kinds[0] == "started" and kinds[-1] == "finished" and kinds.count("rollout") == 4
    assert any("dashboard is down" in w for w in data.warnings)


def test_runs_replay_the_same_situations_with_lineage() -> None:
    first, second = run(unique=2, repeats=2, runs=2)
    assert [r["prompt"] for r in first.rows] == [r["prompt"] for r in second.rows]
    assert all(r["lineage"]["replayed"] for r in second.rows)
    assert {r["lineage"]["replayed_from_run"] for r in second.rows} == {first.metadata["run_id"]}
    assert {r["writer_model"] for r in second.rows} == {"template"}


def test_tasks_replay_rows_keeping_their_writer() -> None:
    original = run(unique=2, repeats=1)
    replay = run(tasks=original.trajectories, repeats=2)
    assert len(replay.rows) == 4
    assert {r["scenario_id"] for r in replay.rows} == {r["scenario_id"] for r in original.rows}
    assert all(r["lineage"]["replayed"] for r in replay.rows)
    assert {r["writer_model"] for r in replay.rows} == {"template"}
    prompts = run(tasks=["Where is my order A1234?"], repeats=1)
    assert prompts.rows[0]["writer_model"] == "seed"


def replying(text: str) -> Any:
    """An agent that says ``text`` whatever it is asked."""

    def agent(messages: list[dict[str, Any]]) -> str:
        return text

    return agent


def test_a_task_row_with_only_an_answer_key_keeps_it_for_the_judge() -> None:
    """A row from your own dataset: a prompt and a reference, no hidden state. The world
    rebuilds the facts; the reference, goal, principle and rubric stay the row's own."""
    task = {
        "prompt": "What is 6 * 7?",
        "privileged": {"reference": "42", "principle": "show the product", "goal": {"n": 42}},
    }
    for reply, reward in (("The answer is 42.", 1.0), ("The answer is 41.", 0.0)):
        agent = replying(reply)
        data = run(ContainsPlugin(), tasks=[task], repeats=2, agent_model=agent, judge="Contains")
        assert [(r["judge_status"], r["reward"]) for r in data.rows] == [("ok", reward)] * 2
        kept = data.trajectories[0]["privileged"]
        assert (kept["reference"], kept["principle"], kept["goal"]) == (
            "42",
            "show the product",
            {"n": 42},
        )
        assert all("privileged" not in r for r in data.rows)


@pytest.mark.parametrize(
    ("privileged", "message"),
    [
        ({"reference": "42", "goal": "42"}, r"\['goal'\] must be a mapping, got str"),
        ({"principle": ["be kind"]}, r"\['principle'\] must be a string, got list"),
        ({"rubric": {"a": 1}}, r"\['rubric'\] must be a string or a list of criteria"),
        ({"hidden_state": {"order": "A1"}, "goal": 3}, r"\['goal'\] must be a mapping, got int"),
        ({"hidden_state": ["A1"]}, r"\['hidden_state'\] must be a mapping, got list"),
    ],
)
def test_a_task_rows_answer_key_of_the_wrong_type_names_the_row_and_the_field(
    privileged: dict[str, Any], message: str
) -> None:
    task = {"prompt": "What is 6 * 7?", "privileged": privileged}
    with pytest.raises(ValueError, match=r"tasks\[1\]\['privileged'\]" + message):
        run(tasks=["Where is my order A1234?", task], repeats=1)


def test_a_task_rows_rubric_may_be_a_list_of_criteria() -> None:
    task = {"prompt": "Cancel order A1", "privileged": {"rubric": ["polite", "cancels A1"]}}
    data = run(tasks=[task], repeats=1)
    assert data.trajectories[0]["privileged"]["rubric"] == ["polite", "cancels A1"]


def test_a_model_writer_rephrases_situations_and_is_named_on_rows() -> None:
    data = run(simulator="fake:user", unique=2, repeats=1)
    assert {r["writer_model"] for r in data.rows} == {"fake:user"}
    data = run(simulator="fake:agent", unique=1, repeats=1, max_turns=1)
    assert "same_model" in data.degraded


def test_a_runs_sidecar_is_the_same_text_whether_its_report_is_copied_first_or_not() -> None:
    from whileai.schema.files import sidecar_text

    data = run(unique=3, repeats=2, seed=4)
    written = sidecar_text(data.sidecar(complete=True, plain=False))
    assert written == sidecar_text(data.sidecar(complete=True))
    assert json.loads(written)["report"] == data.report().to_dict()


def test_output_streams_rows_and_writes_the_sidecar(tmp_path: Any) -> None:
    out = tmp_path / "run.jsonl"
    data = run(unique=2, repeats=2, output=str(out))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["lineage"]["rollout_key"] for r in lines) == sorted(
        r["lineage"]["rollout_key"] for r in data.rows
    )
    assert all("privileged" not in r for r in lines)
    side = json.loads((tmp_path / "run.meta.json").read_text())
    assert side["complete"] is True
    assert side["metadata"]["writer_model"] == "template"
    assert side["metadata"]["user_model"] == "fake:user"
    assert side["report"]["knobs"]["max_concurrency"] == 16
    with pytest.raises(FileExistsError, match="resume=True"):
        run(unique=2, repeats=2, output=str(out))
    saved = data.save(tmp_path / "copy.jsonl")
    assert [json.loads(x) for x in saved.read_text().splitlines()] == list(data.rows)
    assert (tmp_path / "copy.meta.json").exists()


def test_resume_finishes_a_cut_run_without_duplicates(tmp_path: Any) -> None:
    out = tmp_path / "run.jsonl"
    full = run(unique=3, repeats=2, output=str(out))
    # a streamed run's rows are read from its file: take what is compared before it is cut
    full_keys = sorted(r["lineage"]["rollout_key"] for r in full.rows)
    lines = out.read_text().splitlines(keepends=True)
    # keep three whole rows and half of the fourth, as a killed writer would leave them
    out.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    resumed = run(unique=3, repeats=2, output=str(out), resume=True)
    keys = [json.loads(x)["lineage"]["rollout_key"] for x in out.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 6
    assert sorted(keys) == full_keys
    assert resumed.metadata["run_id"] == full.metadata["run_id"]
    assert len(resumed.rows) == 6
    with pytest.raises(ValueError, match="started with other settings: rollouts_per_request"):
        run(unique=3, repeats=3, output=str(out), resume=True)


class ContainsPlugin:
    """A verifier registered by name: passes when the reference appears in the reply."""

    @hookimpl
    def whileai_register_verifiers(self, register: Any) -> None:
        class Contains:
            name = "Contains"
            version = "1"

            def verify(self, completion: str, reference: Any, prompt: str | None = None) -> Verdict:
                return Verdict(1.0 if str(reference) in completion else 0.0)

        register("Contains", Contains)


def test_a_judge_named_by_spec_resolves_to_a_registered_verifier() -> None:
    data = run(ContainsPlugin(), unique=2, repeats=2, judge="Contains")
    assert {r["judge_name"] for r in data.rows} == {"Contains"}
    assert {r["label_source"] for r in data.rows} == {"verifier"}
    with pytest.raises(LookupError, match="names no registered judge or verifier"):
        run(unique=1, repeats=1, judge="Nope")


def test_every_row_a_run_writes_validates_against_the_wire_contract() -> None:
    from importlib.resources import files

    import jsonschema

    schema = json.loads((files("whileai.schema") / "row-v1.json").read_text())
    data = run(agent_model="fake:flaky-agent", unique=5, repeats=2, logprobs=True)
    for row in data.rows:
        jsonschema.validate(row, schema)


class LocalStandIn:
    """Stands in for the embedded model under its own spec, so the defaults can be checked
    without loading it."""

    @hookimpl
    def whileai_register_backends(self, register: Any) -> None:
        register("local", lambda argument=None, **options: d.FakeBackend("agent"))


def test_with_no_endpoint_every_role_is_the_embedded_model_and_the_run_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("WHILEAI_BASE_URL", "WHILEAI_AGENT", "WHILEAI_USER", "WHILEAI_SIMULATOR"):
        monkeypatch.delenv(name, raising=False)
    data = wai.simulate(
        registry=d.registry(LocalStandIn()), unique=1, repeats=2, advanced={"world": "tinyshop"}
    )
    report = data.report()
    assert report["agent_model"] == report["user_model"] == "local:smollm2"
    assert report["writer_model"] == "template"
    assert any("No model endpoint is configured" in w for w in data.warnings)
    assert any("templates" in note for note in report["model_notes"])
    assert data.degraded == ["same_model"]
    assert "No model endpoint" in str(report)


def test_a_situation_the_world_cannot_start_fails_its_rollouts_only() -> None:
    # A row whose hidden state holds no order: the tiny shop has nothing to build an episode on.
    original = run(unique=2, repeats=1)
    broken = {**original.trajectories[0], "privileged": {"hidden_state": {"note": "no order"}}}
    replay = run(tasks=[broken, *original.trajectories[1:]], repeats=2)
    failed = [r for r in replay.rows if r.get("error")]
    assert len(failed) == 2 and len(replay.rows) == 4
    assert all("could not start an episode" in r["error"] for r in failed)
    assert all(r["reward"] is None and r["judge_status"] == "skipped" for r in failed)
    assert all(r.get("reward") is not None for r in replay.rows if not r.get("error"))


def test_simulate_works_inside_a_running_event_loop_and_asimulate_awaits() -> None:
    import asyncio

    async def notebook_cell() -> tuple[Any, Any]:
        blocking = run(unique=1, repeats=2)  # as in a notebook, where a loop already runs
        awaited = await wai.asimulate(registry=d.registry(), unique=1, repeats=2, **{**d.BASE})
        return blocking, awaited

    blocking, awaited = asyncio.run(notebook_cell())
    assert len(blocking.rows) == len(awaited.rows) == 2
    assert [r["prompt"] for r in blocking.rows] == [r["prompt"] for r in awaited.rows]


def test_a_strategy_without_hard_share_still_gets_the_engine_share() -> None:
    data = run(unique=8, repeats=1, strategy="alternate", hard_share=0.25)
    hard = [r for r in data.rows if r["scenario_dimensions"]["difficulty"] == "hard"]
    assert len(hard) == 2
    assert [r["arm"] for r in data.rows] == list("abababab")


def test_a_run_planned_by_an_older_engine_is_not_resumed_with_other_situations(
    tmp_path: Any,
) -> None:
    out = tmp_path / "run.jsonl"
    run(unique=2, repeats=1, phrasings=2, output=str(out))
    sidecar = out.with_suffix(".meta.json")
    meta = json.loads(sidecar.read_text())
    del meta["metadata"]["resume_plan"]["plan_version"]  # as a sidecar from before it existed
    sidecar.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="plan_version: saved None, now 2"):
        run(unique=2, repeats=1, phrasings=2, output=str(out), resume=True)
