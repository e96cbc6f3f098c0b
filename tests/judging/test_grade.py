"""wai.grade: the rubric judge on the judge role's model by default, any judge by name or
callable otherwise; every row says who graded it, and a self-judged run says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judging_doubles import JUDGE_SERVED_MODEL, EmbeddedStandIn, ModelDoubles

import whileai as wai
from whileai.registry import Registry
from whileai.schema.records import RowError

QUESTIONS = ["What is 2 + 3?", "What is 7 * 6?", "What is 10 - 4?"]
GOLD = ["5", "42", "6"]
ANSWERS = [["5", "4"], ["42", "41"], ["6", "six"]]


def sample_rows(model_version: str | None = "agent-double-7b") -> list[dict[str, Any]]:
    rows = wai.rows(QUESTIONS, ANSWERS, None, references=GOLD)
    for row in rows:
        if model_version is not None:
            row["model_version"] = model_version
    return rows


@pytest.fixture
def doubles() -> ModelDoubles:
    return ModelDoubles()


# -- the default judge: the rubric judge on WHILEAI_JUDGE, run for real against a double ----


@pytest.fixture
def rubric_registry(doubles: ModelDoubles) -> Registry:
    plugin = pytest.importorskip("whileai_judges.plugin")
    return Registry.from_plugins(doubles, plugin)


@pytest.fixture
def judge_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("WHILEAI_JUDGE", "judgefake:phi-4")
    monkeypatch.delenv("WHILEAI_BASE_URL", raising=False)
    return "judgefake:phi-4"


@pytest.mark.plugins
def test_the_default_judge_writes_its_provenance_on_every_row(
    rubric_registry: Registry, doubles: ModelDoubles, judge_env: str
) -> None:
    from whileai_judges.rubric import DEFAULT_RUBRIC, prompt_sha

    scored = wai.grade(sample_rows(), registry=rubric_registry)

    assert [r["reward"] for r in scored.rows] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    sha = prompt_sha("score", DEFAULT_RUBRIC)
    for row in scored.rows:
        assert row["judge_name"] == "rubric"
        assert row["judge_status"] == "ok"
        assert row["label_source"] == "judge"
        meta = row["judge_meta"]
        assert meta["model"] == judge_env
        assert meta["prompt_sha"] == sha
        assert meta["temperature"] == 0.0
        assert meta["version"] == f"{judge_env}@{sha[:12]}"
    # the judge saw the reference; the exported rows do not carry it
    assert "Reference answer: 42" in doubles.judges[0].prompts[2]
    assert all("privileged" not in row for row in scored.rows)
    assert scored.trajectories[0]["privileged"] == {"reference": "5"}
    # the judge's backend was built for this call, so it was closed
    assert doubles.judges[0].closed

    report = scored.report()
    assert (report.judge, report.judge_model) == ("rubric", judge_env)
    assert report.judge_version == f"{judge_env}@{sha[:12]}"
    assert (report.n_rows, report.n_graded, report.n_errors) == (6, 6, 0)
    assert report["status_counts"] == {"ok": 6}
    assert report.pass_at.pass_at_1 == pytest.approx(0.5)
    assert "rubric" in str(report) and "self_judged" in str(report)


@pytest.mark.plugins
def test_a_rubric_edit_is_a_new_judge_and_the_rows_say_so(
    rubric_registry: Registry, judge_env: str
) -> None:
    from whileai_judges.rubric import prompt_sha

    first = sample_rows()
    for row in first:
        row["privileged"]["rubric"] = "The answer is the reference number."
    before = wai.grade(first, registry=rubric_registry)

    edited = [dict(row) for row in before.trajectories]
    for row in edited:
        row["privileged"] = {**row["privileged"], "rubric": "The answer is the number, alone."}
    after = wai.grade(edited, registry=rubric_registry)

    old = {r["judge_meta"]["version"] for r in before.rows}
    new = {r["judge_meta"]["version"] for r in after.rows}
    assert old == {f"{judge_env}@{prompt_sha('score', 'The answer is the reference number.')[:12]}"}
    assert new == {f"{judge_env}@{prompt_sha('score', 'The answer is the number, alone.')[:12]}"}
    assert old != new
    assert all(r["judge_meta"]["rubric_source"] == "row" for r in after.rows)
    assert any("graded before by rubric" in note for note in after.report().notes)


@pytest.mark.plugins
@pytest.mark.parametrize("model_version", [JUDGE_SERVED_MODEL, "judgefake:phi-4"])
def test_rows_from_the_judges_own_model_are_self_judged(
    rubric_registry: Registry, judge_env: str, model_version: str
) -> None:
    scored = wai.grade(sample_rows(model_version), registry=rubric_registry)
    assert scored.self_judged is True
    report = scored.report()
    assert report.self_judged is True and report.n_self_judged == 6
    assert len(scored.warnings) == 1
    assert "grades its own model's writing" in scored.warnings[0]
    assert "WHILEAI_JUDGE" in scored.warnings[0]
    assert scored.warnings[0] in str(report)


@pytest.mark.plugins
def test_rows_from_another_model_are_not_self_judged(
    rubric_registry: Registry, judge_env: str
) -> None:
    scored = wai.grade(sample_rows("Qwen/Qwen2.5-7B-Instruct"), registry=rubric_registry)
    assert scored.self_judged is False
    assert scored.report().self_judged is False
    assert scored.warnings == []


@pytest.mark.plugins
def test_with_no_endpoint_the_embedded_judge_grades_and_the_result_says_so(
    doubles: ModelDoubles, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = pytest.importorskip("whileai_judges.plugin")
    embedded = EmbeddedStandIn()
    registry = Registry.from_plugins(doubles, embedded, plugin)
    monkeypatch.delenv("WHILEAI_JUDGE", raising=False)
    monkeypatch.delenv("WHILEAI_BASE_URL", raising=False)

    scored = wai.grade(sample_rows(), registry=registry)

    assert {r["judge_meta"]["model"] for r in scored.rows} == {"local:smollm2"}
    assert any("embedded model local:smollm2" in w for w in scored.warnings)
    assert embedded.built[0].closed


@pytest.mark.plugins
def test_a_model_spec_as_judge_runs_the_rubric_judge_on_it(
    rubric_registry: Registry, judge_env: str
) -> None:
    scored = wai.grade(sample_rows(), "judgefake:llama-70b", registry=rubric_registry)
    assert {r["judge_meta"]["model"] for r in scored.rows} == {"judgefake:llama-70b"}
    assert scored.report().judge == "rubric"


@pytest.mark.plugins
def test_a_judge_call_that_fails_leaves_that_row_in_error_and_grades_the_rest(
    rubric_registry: Registry, judge_env: str
) -> None:
    rows = sample_rows()
    rows[3]["final_text"] = rows[3]["steps"][0]["content"] = "BOOM"

    scored = wai.grade(rows, registry=rubric_registry)

    broken = scored.rows[3]
    assert broken["judge_status"] == "error"
    assert broken["reward"] is None
    assert "judge backend failed (http_500)" in broken["reason"]
    assert broken["judge_meta"]["model"] == judge_env
    assert [r["judge_status"] for r in scored.rows].count("ok") == 5
    report = scored.report()
    assert (report.n_graded, report.n_errors) == (5, 1)
    assert report.status_counts == {"ok": 5, "error": 1}


# -- any judge: a callable, a verifier name ----------------------------------------------------


def test_a_judge_that_raises_on_one_row_leaves_an_error_there_and_grades_the_others() -> None:
    def strict(row: dict[str, Any]) -> float:
        if row["final_text"] == "six":
            raise ValueError("not a numeral")
        return float(row["final_text"] == row["privileged"]["reference"])

    scored = wai.grade(sample_rows(), strict, registry=Registry.from_plugins())

    assert [r["reward"] for r in scored.rows] == [1.0, 0.0, 1.0, 0.0, 1.0, None]
    assert scored.rows[5]["judge_status"] == "error"
    assert scored.rows[5]["reason"] == "ValueError: not a numeral"
    assert scored.report().n_errors == 1
    # the pass rates leave the unjudged row out rather than count it a failure
    assert scored.pass_at.pass_at_1 == pytest.approx((1 / 2 + 1 / 2 + 1) / 3)


@pytest.mark.parametrize("how", ["inline", "verifier", "into a file"])
def test_a_judge_that_exits_fails_its_row_not_the_grading(how: str, tmp_path: Path) -> None:
    # sys.exit(0) inside a judge ended the process with status 0 and nothing written: the last
    # grading's file, passes and all, was left in place as if it were this one's
    import sys

    def quits(row: dict[str, Any]) -> float:
        if row["final_text"] == "six":
            sys.exit(0)
        return float(row["final_text"] == row["privileged"]["reference"])

    class Quits:
        name = "Quits"
        version = "1"

        def verify(self, completion: str, reference: Any, prompt: str | None = None) -> float:
            return quits({"final_text": completion, "privileged": {"reference": reference}})

    out = tmp_path / "graded.jsonl"
    out.write_text('{"prompt": "yesterday", "final_text": "six", "reward": 1.0}\n')
    judge = Quits() if how == "verifier" else quits
    scored = wai.grade(
        sample_rows(),
        judge,
        registry=Registry.from_plugins(),
        output=out if how == "into a file" else None,
    )
    assert [r["reward"] for r in scored.rows] == [1.0, 0.0, 1.0, 0.0, 1.0, None]
    assert (scored.rows[5]["judge_status"], scored.rows[5]["reason"]) == ("error", "SystemExit: 0")
    if how == "into a file":
        assert [json.loads(line) for line in out.read_text().splitlines()] == list(scored.rows)


def test_a_judge_returning_no_score_is_an_error_naming_the_row() -> None:
    with pytest.raises(RowError, match="row 2"):
        wai.grade(
            sample_rows(),
            lambda row: "yes" if row["final_text"] == "42" else 1.0,
            registry=Registry.from_plugins(),
        )


def test_an_async_judge_works() -> None:
    async def judge(prompt: str, completion: str, reference: str) -> bool:
        return completion == reference

    scored = wai.grade(sample_rows(), judge, registry=Registry.from_plugins())
    assert [r["reward"] for r in scored.rows] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]


def test_an_unknown_judge_name_says_what_is_registered() -> None:
    with pytest.raises(wai.UnknownPluginError, match="names no registered judge or verifier"):
        wai.grade(sample_rows(), "no-such-judge", registry=Registry.from_plugins())


@pytest.mark.plugins
def test_a_mistyped_verifier_name_is_offered_the_verifier_it_may_mean() -> None:
    # a verifier is as often named as a judge: the error lists both, with close names
    with pytest.raises(wai.UnknownPluginError) as caught:
        wai.grade(sample_rows(), "MathEqaul")
    said = str(caught.value)
    assert "Registered judges:" in said and "Registered verifiers:" in said
    assert "Did you mean 'MathEqual'" in said


# -- what grade reads: rows, a run, a file ------------------------------------------------------


def reads_reference(row: dict[str, Any]) -> float:
    """A judge that needs the privileged reference: it fails loudly without it."""
    return float(row["final_text"] == row["privileged"]["reference"])


def test_a_run_keeps_its_privileged_block_for_the_judge_and_out_of_rows() -> None:
    first = wai.grade(sample_rows(), lambda row: 0.5, registry=Registry.from_plugins())
    again = wai.grade(first, reads_reference, registry=Registry.from_plugins())

    assert [r["reward"] for r in again.rows] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert again.trajectories[1]["privileged"]["reference"] == "5"
    assert all("privileged" not in row for row in again.rows)
    assert "privileged" not in json.dumps(again.rows)


def test_a_simulation_is_graded_from_its_trajectories() -> None:
    # a run as simulate() returns it; the engine's own tests cover how it is made
    from whileai.simulations.data import Simulation

    sim = Simulation(
        trajectories=sample_rows(),
        metadata={"run_id": "run-1"},
        system_prompts={},
        warnings=[],
        degraded=[],
        report_fields={"repeat_policy": "fixed"},
    )
    scored = wai.grade(sim, reads_reference, registry=Registry.from_plugins())
    assert [r["reward"] for r in scored.rows] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert scored.report().source == "run run-1"
    assert scored.metadata["run_id"] == "run-1"
    assert scored.pass_at.pass_at_1 == wai.pass_at(scored.rows, repeat_policy="fixed").pass_at_1


def test_a_saved_file_is_graded_and_says_its_rows_carry_no_reference(tmp_path: Path) -> None:
    first = wai.grade(sample_rows(), lambda row: 1.0, registry=Registry.from_plugins())
    path = first.save(tmp_path / "run.jsonl")
    assert (tmp_path / "run.meta.json").exists()

    def exact(prompt: str, completion: str) -> bool:
        return completion in ("5", "42", "6")

    scored = wai.grade(path, exact, registry=Registry.from_plugins())
    assert [r["reward"] for r in scored.rows] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert scored.report().source == str(path)
    assert any("never carries the privileged block" in n for n in scored.report().notes)
    # a str path works as well as a Path, and the file is left as it was
    text = path.read_text()
    wai.grade(str(path), exact, registry=Registry.from_plugins())
    assert path.read_text() == text


def test_a_judge_that_needs_the_reference_errors_on_saved_rows_rather_than_scoring_0(
    tmp_path: Path,
) -> None:
    path = wai.grade(sample_rows(), lambda row: 1.0, registry=Registry.from_plugins()).save(
        tmp_path / "run.jsonl"
    )
    scored = wai.grade(path, reads_reference, registry=Registry.from_plugins())
    assert {r["judge_status"] for r in scored.rows} == {"error"}
    assert all(r["reward"] is None for r in scored.rows)


def test_bad_input_names_the_row_or_the_path(tmp_path: Path) -> None:
    registry = Registry.from_plugins()
    rows = sample_rows()
    del rows[4]["final_text"]
    with pytest.raises(RowError, match="row 4: missing required field 'final_text'"):
        wai.grade(rows, reads_reference, registry=registry)
    with pytest.raises(RowError, match=r"rows\[1\] is a str, not a row"):
        wai.grade([sample_rows()[0], "oops"], reads_reference, registry=registry)
    with pytest.raises(FileNotFoundError, match=r"missing\.jsonl"):
        wai.grade(tmp_path / "missing.jsonl", reads_reference, registry=registry)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(sample_rows()[0]) + "\n{not json\n")
    with pytest.raises(RowError, match="line 2: not valid JSON"):
        wai.grade(broken, reads_reference, registry=registry)
    with pytest.raises(TypeError, match="single row"):
        wai.grade(sample_rows()[0], reads_reference, registry=registry)
    with pytest.raises(ValueError, match="empty"):
        wai.grade([], reads_reference, registry=registry)
    with pytest.raises(ValueError, match="concurrency="):
        wai.grade(sample_rows(), reads_reference, concurrency=0, registry=registry)


def test_a_failed_rollout_is_not_sent_to_the_judge() -> None:
    rows = sample_rows()
    rows[2]["error"] = "agent backend failed (timeout)"
    seen: list[str] = []

    def judge(row: dict[str, Any]) -> float:
        seen.append(row["final_text"])
        return 1.0

    scored = wai.grade(rows, judge, registry=Registry.from_plugins())
    assert len(seen) == 5
    failed = scored.rows[2]
    assert (failed["judge_status"], failed["reward"]) == ("skipped", None)
    assert failed["reason"] == "rollout failed: agent backend failed (timeout)"
    assert scored.report().n_failed_rollouts == 1


def test_pass_at_on_scored_data_is_pass_at_of_its_rows() -> None:
    rows = wai.rows(
        ["a", "b", "c", "d"],
        [["1", "1", "0", "1"], ["0", "0", "0", "1"], ["1"] * 4, ["1", "0", "1", "1"]],
        None,
    )
    scored = wai.grade(rows, lambda p, c: c == "1", registry=Registry.from_plugins())
    direct = wai.pass_at(scored.rows)
    assert scored.pass_at.pass_at_1 == direct.pass_at_1 == pytest.approx(0.6875)
    assert scored.pass_at.pass_pow_k == direct.pass_pow_k == pytest.approx(0.25)
    assert scored.pass_at.pass_at_k == direct.pass_at_k == pytest.approx(1.0)
    assert scored.pass_at.ci95 == direct.ci95
    assert len(scored) == 16 and list(scored) == list(scored.rows) and scored.rows() is scored.rows
    assert "ScoredData" in repr(scored) and "16 rows" in repr(scored)
