"""wai.rows(): every input form, the rows it builds, and the errors bad input gets.

No built-in plugin is needed here: verifiers are small classes defined below, callables are
plain functions, and numbers are numbers.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import pytest

import whileai as wai
from whileai.build_rows import RowsWarning
from whileai.schema.export import export_row
from whileai.schema.records import RowError, check_row, from_row, prompt_hash, to_row
from whileai.scoring import Verdict

QUESTIONS = ["What is 2 + 3?", "What is 7 * 6?"]
GOLD = ["5", "42"]


class Equals:
    """A verifier: 1.0 when the stripped completion equals the reference."""

    name = "Equals"
    version = "2.1"

    def verify(self, completion: str, reference: Any, prompt: str | None = None) -> Verdict:
        if reference is None:
            return Verdict.error("no reference")
        equal = completion.strip() == reference
        return Verdict(1.0 if equal else 0.0, f"{completion!r} vs {reference!r}")


def test_wai_rows_is_a_function_documented_as_build_rows() -> None:
    from whileai.build_rows import build_rows

    assert inspect.isfunction(wai.rows)
    assert wai.rows.__doc__ == build_rows.__doc__


def test_one_string_per_prompt_scored_by_a_verifier() -> None:
    rows = wai.rows(QUESTIONS, ["5", "41"], Equals(), references=GOLD)
    assert type(rows) is list
    assert all(type(row) is dict for row in rows)
    assert [row["reward"] for row in rows] == [1.0, 0.0]
    first = rows[0]
    assert first["schema_version"] == "1"
    assert first["prompt"] == "What is 2 + 3?"
    assert first["final_text"] == "5"
    assert first["task_id"] == prompt_hash("What is 2 + 3?")
    assert first["judge_name"] == "Equals"
    assert first["judge_status"] == "ok"
    assert first["label_source"] == "verifier"
    assert first["judge_meta"] == {"name": "Equals", "version": "2.1"}
    assert first["reason"] == "'5' vs '5'"
    assert first["privileged"] == {"reference": "5"}
    assert first["steps"] == [{"role": "assistant", "content": "5"}]
    assert first["messages"] == [
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "5"},
    ]


def test_k_completions_per_prompt_become_k_rows_in_order() -> None:
    rows = wai.rows(QUESTIONS, [["5", "4", "5"], ["42", "41", "42"]], Equals(), references=GOLD)
    assert [(r["prompt"], r["final_text"], r["reward"]) for r in rows] == [
        ("What is 2 + 3?", "5", 1.0),
        ("What is 2 + 3?", "4", 0.0),
        ("What is 2 + 3?", "5", 1.0),
        ("What is 7 * 6?", "42", 1.0),
        ("What is 7 * 6?", "41", 0.0),
        ("What is 7 * 6?", "42", 1.0),
    ]
    assert len({r["task_id"] for r in rows[:3]}) == 1
    assert rows[0]["task_id"] != rows[3]["task_id"]


def test_single_strings_and_sequences_mix_and_tuples_work() -> None:
    rows = wai.rows(QUESTIONS, ["5", ("42", "40")], Equals(), references=GOLD)
    assert [r["reward"] for r in rows] == [1.0, 1.0, 0.0]


def test_the_default_task_id_is_stable_across_calls() -> None:
    first = wai.rows(QUESTIONS, ["5", "42"], None)
    again = wai.rows(list(reversed(QUESTIONS)), ["42", "5"], None)
    assert first[0]["task_id"] == again[1]["task_id"] == prompt_hash(QUESTIONS[0])


def test_a_two_argument_callable() -> None:
    def says_five(prompt: str, completion: str) -> float:
        return 1.0 if completion == "5" and "2 + 3" in prompt else 0.0

    rows = wai.rows(QUESTIONS, ["5", "5"], says_five)
    assert [r["reward"] for r in rows] == [1.0, 0.0]
    assert rows[0]["judge_name"] == "test_a_two_argument_callable.<locals>.says_five"
    assert rows[0]["label_source"] == "callable"


def test_a_three_argument_callable_gets_the_reference() -> None:
    seen: list[tuple[str, str, Any]] = []

    def graded(prompt: str, completion: str, reference: Any) -> bool:
        seen.append((prompt, completion, reference))
        return completion == reference

    rows = wai.rows(QUESTIONS, [["5", "6"], "42"], graded, references=GOLD)
    assert [r["reward"] for r in rows] == [1.0, 0.0, 1.0]
    assert seen[1] == ("What is 2 + 3?", "6", "5")


def test_a_judge_contract_callable_reads_the_row() -> None:
    def judge(row: Mapping[str, Any]) -> dict[str, Any]:
        long = len(row["final_text"]) > 3
        return {"reward": 0.5 if long else 1.0, "reason": "too long" if long else "short"}

    rows = wai.rows(QUESTIONS, ["5", "forty-two"], judge)
    assert [(r["reward"], r["reason"]) for r in rows] == [(1.0, "short"), (0.5, "too long")]
    assert rows[0]["label_source"] == "judge"


def test_given_numbers_nested_like_completions() -> None:
    rows = wai.rows(QUESTIONS, [["5", "4"], ["42", "41"]], [[1, 0], [1, 0.5]])
    assert [r["reward"] for r in rows] == [1.0, 0.0, 1.0, 0.5]
    assert all(r["label_source"] == "given" for r in rows)
    assert all(r["judge_status"] == "ok" for r in rows)
    assert all(isinstance(r["reward"], float) for r in rows)


def test_given_numbers_flat_one_per_completion() -> None:
    rows = wai.rows(QUESTIONS, [["5", "4"], "42"], [1, 0, 1])
    assert [r["reward"] for r in rows] == [1.0, 0.0, 1.0]


def test_given_numbers_one_per_single_completion() -> None:
    rows = wai.rows(QUESTIONS, ["5", "41"], (1.0, 0.0))
    assert [r["reward"] for r in rows] == [1.0, 0.0]


def test_given_booleans_are_pass_and_fail() -> None:
    rows = wai.rows(QUESTIONS, ["5", "41"], [True, False])
    assert [r["reward"] for r in rows] == [1.0, 0.0]


def test_given_none_leaves_that_row_unjudged() -> None:
    rows = wai.rows(QUESTIONS, ["5", "41"], [1, None])
    assert rows[1]["reward"] is None
    assert "label_source" not in rows[1]


def test_numpy_rewards() -> None:
    np = pytest.importorskip("numpy")
    rows = wai.rows(QUESTIONS, [["5", "4"], ["42", "41"]], np.array([[1.0, 0.0], [1.0, 0.0]]))
    assert [r["reward"] for r in rows] == [1.0, 0.0, 1.0, 0.0]
    assert all(type(r["reward"]) is float for r in rows)
    flat = wai.rows(QUESTIONS, [["5", "4"], "42"], list(np.array([1.0, 0.0, 1.0])))
    assert [r["reward"] for r in flat] == [1.0, 0.0, 1.0]


def test_reward_none_gives_unjudged_rows() -> None:
    rows = wai.rows(QUESTIONS, ["5", "41"], None)
    assert [r["reward"] for r in rows] == [None, None]
    assert "judge_name" not in rows[0]


def test_message_list_prompts_keep_their_messages() -> None:
    chat = [
        {"role": "system", "content": "Answer with a number."},
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "Are you sure? What is 2 + 3?"},
    ]
    rows = wai.rows([chat], [["5", "4"]], Equals(), references=["5"])
    assert rows[0]["prompt"] == "Are you sure? What is 2 + 3?"
    assert rows[0]["messages"] == [*chat, {"role": "assistant", "content": "5"}]
    assert rows[1]["messages"][-1] == {"role": "assistant", "content": "4"}
    assert rows[0]["task_id"] == prompt_hash("Are you sure? What is 2 + 3?")
    rows[0]["messages"][0]["content"] = "changed"
    assert rows[1]["messages"][0]["content"] == "Answer with a number."
    assert chat[0]["content"] == "Answer with a number."


def test_content_parts_give_their_text() -> None:
    chat = [{"role": "user", "content": [{"type": "text", "text": "What is 2 + 3?"}]}]
    rows = wai.rows([chat], ["5"], [1])
    assert rows[0]["prompt"] == "What is 2 + 3?"


def test_strings_and_message_lists_mix() -> None:
    rows = wai.rows(
        ["What is 2 + 3?", [{"role": "user", "content": "What is 7 * 6?"}]], ["5", "42"], [1, 1]
    )
    assert [r["prompt"] for r in rows] == QUESTIONS


def test_references_are_privileged_and_never_exported() -> None:
    rows = wai.rows(QUESTIONS, ["5", "42"], Equals(), references=GOLD)
    exported = export_row(rows[0])
    assert "privileged" not in exported
    assert "5" not in str(
        {
            k: v
            for k, v in exported.items()
            if k not in ("final_text", "messages", "steps", "reason", "task_id")
        }
    )
    assert exported["messages"] == rows[0]["messages"]


def test_no_reference_for_one_prompt_leaves_no_privileged_block() -> None:
    with pytest.warns(RowsWarning, match="prompt 1, completion 0: no reference"):
        rows = wai.rows(QUESTIONS, ["5", "42"], Equals(), references=["5", None])
    assert rows[0]["privileged"] == {"reference": "5"}
    assert "privileged" not in rows[1]
    assert rows[1]["judge_status"] == "error"


def test_task_ids_name_the_prompts() -> None:
    rows = wai.rows(QUESTIONS, [["5", "4"], "42"], [1, 0, 1], task_ids=["add", 7])
    assert [r["task_id"] for r in rows] == ["add", "add", "7"]


def test_markers_nested_like_completions() -> None:
    answers = [["5", "four"], ["42", "41"]]
    lengths = [[{"chars": len(a)} for a in group] for group in answers]
    rows = wai.rows(QUESTIONS, answers, [[1, 0], [1, 0]], markers=lengths)
    assert [r["markers"] for r in rows] == [{"chars": 1}, {"chars": 4}, {"chars": 2}, {"chars": 2}]


def test_markers_flat_and_for_single_completions() -> None:
    rows = wai.rows(QUESTIONS, ["5", "42"], [1, 1], markers=[{"polite": True}, {"polite": 0.5}])
    assert [r["markers"] for r in rows] == [{"polite": True}, {"polite": 0.5}]


def test_rows_are_schema_rows() -> None:
    rows = wai.rows(
        QUESTIONS,
        [["5", "4"], "42"],
        Equals(),
        references=GOLD,
        markers=[{"n": 1}, {"n": 2}, {"n": 3}],
    )
    for index, row in enumerate(rows):
        check_row(row, index)
        assert to_row(*from_row(row)) == row


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completions", "message"),
    [
        (["5"], r"completions has 1 entry for 2 prompts"),
        (["5", 42], r"completions\[1\] \(prompt 1\) is a int"),
        (["5", ["42", None]], r"completions\[1\]\[1\] \(prompt 1, completion 1\) is a NoneType"),
        (["5", []], r"completions\[1\] \(prompt 1\) is empty"),
        ("5", r"completions must be a list"),
    ],
)
def test_bad_completions_name_the_prompt_and_completion(completions: Any, message: str) -> None:
    with pytest.raises(RowError, match=message):
        wai.rows(QUESTIONS, completions, None)


@pytest.mark.parametrize(
    ("prompts", "message"),
    [
        ("What is 2 + 3?", r"prompts must be a list"),
        ([{"role": "user", "content": "hi"}], r"prompts\[0\] is a dict"),
        ([[{"role": "system", "content": "Be brief."}]], r"prompts\[0\] has no user turn"),
        ([["hello"]], r"prompts\[0\]\[0\] is not a message"),
        ([[{"role": "user", "content": None}]], r"prompts\[0\]: the last user turn has no text"),
        ([3], r"prompts\[0\] is a int"),
    ],
)
def test_bad_prompts_are_named(prompts: Any, message: str) -> None:
    with pytest.raises(RowError, match=message):
        wai.rows(prompts, ["5"], None)


@pytest.mark.parametrize(
    ("reward", "message"),
    [
        ([[1, 0], [1, 1.5]], r"reward for prompt 1, completion 1 is 1.5, outside \[0, 1\]"),
        ([[1, -0.1], [1, 1]], r"prompt 0, completion 1 is -0.1, outside \[0, 1\]"),
        ([[1, float("nan")], [1, 1]], r"prompt 0, completion 1 is nan"),
        ([[1, "yes"], [1, 1]], r"prompt 0, completion 1 is 'yes'; a reward is a number"),
        ([[1, 0], [1]], r"reward\[1\] has 1 entry for the 2 completions of prompt 1"),
        ([1, 0, 1], r"reward has 3 entries; give one per completion \(4, flat\)"),
        ([[1, 0], 1], r"reward\[1\] is 1; prompt 1 has 2 completions"),
    ],
)
def test_bad_given_rewards_are_named(reward: Any, message: str) -> None:
    with pytest.raises(RowError, match=message):
        wai.rows(QUESTIONS, [["5", "4"], ["42", "41"]], reward)


@pytest.mark.plugins
def test_a_reward_given_as_a_verifiers_name_grades_as_the_verifier_does() -> None:
    # as grade(), simulate(judge=) and reward_function take names
    by_name = wai.rows(QUESTIONS, ["5", "41"], "MathEqual", references=GOLD)
    assert by_name == wai.rows(QUESTIONS, ["5", "41"], wai.verify.MathEqual(), references=GOLD)
    assert [row["reward"] for row in by_name] == [1.0, 0.0]
    assert wai.rows(QUESTIONS, ["5", "41"], "math", references=GOLD) == by_name
    with pytest.raises(
        LookupError, match=r"no verifier named 'MathEqaul'(.|\n)*Did you mean 'MathEqual'"
    ):
        wai.rows(QUESTIONS, ["5", "42"], "MathEqaul", references=GOLD)


def test_a_reward_named_for_no_verifier_is_refused_with_the_name() -> None:
    with pytest.raises(LookupError, match="no verifier named 'NoSuchVerifier'"):
        wai.rows(QUESTIONS, ["5", "42"], "NoSuchVerifier")
    with pytest.raises(TypeError, match="reward is the bytes b'MathEqual'"):
        wai.rows(QUESTIONS, ["5", "42"], b"MathEqual")


def test_a_reward_that_is_nothing_usable_is_refused() -> None:
    with pytest.raises(TypeError, match="reward must be a verifier"):
        wai.rows(QUESTIONS, ["5", "42"], 3)


def test_a_callable_outside_the_unit_interval_names_the_completion() -> None:
    with pytest.raises(RowError, match=r"prompt 1, completion 0: .*returned reward 2.0, outside"):
        wai.rows(QUESTIONS, ["5", "42"], lambda p, c: 2 if c == "42" else 1)


def test_a_raising_callable_gives_error_rows_and_a_warning_never_a_zero() -> None:
    def fragile(prompt: str, completion: str) -> float:
        return 1.0 / int(completion == "5")

    with pytest.warns(RowsWarning, match=r"1 of 2 rows could not be scored by .*fragile") as caught:
        rows = wai.rows(QUESTIONS, ["5", "41"], fragile)
    assert "prompt 1, completion 0: ZeroDivisionError" in str(caught[0].message)
    assert rows[0]["reward"] == 1.0
    assert rows[1]["reward"] is None
    assert rows[1]["judge_status"] == "error"
    assert rows[1]["reason"] == "ZeroDivisionError: float division by zero"


def test_a_verifier_error_verdict_is_kept_and_warned_about() -> None:
    with pytest.warns(RowsWarning, match="no reference"):
        rows = wai.rows(QUESTIONS, ["5", "42"], Equals())
    assert [r["judge_status"] for r in rows] == ["error", "error"]
    assert [r["reward"] for r in rows] == [None, None]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"references": ["5"]}, r"references has 1 entry for 2 prompts"),
        ({"task_ids": ["a", "b", "c"]}, r"task_ids has 3 entries for 2 prompts"),
        ({"task_ids": ["a", ""]}, r"task_ids\[1\] is ''"),
        ({"task_ids": ["a", None]}, r"task_ids\[1\] is None"),
        ({"markers": [{"n": 1}]}, r"markers has 1 entry"),
        ({"markers": [{"n": 1}, "long"]}, r"markers for prompt 1, completion 0 is 'long'"),
        ({"markers": [{"n": 1}, {"n": "x"}]}, r"prompt 1, completion 0: .*marker 'n' is 'x'"),
        ({"references": "55"}, r"references must be a list"),
    ],
)
def test_bad_per_prompt_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(RowError, match=message):
        wai.rows(QUESTIONS, ["5", "42"], [1, 1], **kwargs)


def test_row_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        wai.rows(QUESTIONS, ["5"], None)


def test_one_prompt_with_two_references_is_two_tasks_not_one() -> None:
    rows = wai.rows(
        ["What is x?", "What is x?", "What is y?"],
        ["3", "3", "1"],
        None,
        references=["3", "4", "1"],
    )
    assert rows[0]["task_id"] != rows[1]["task_id"]
    assert rows[2]["task_id"] == prompt_hash("What is y?")  # a prompt alone keeps its plain id
    same = wai.rows(["What is x?", "What is x?"], ["3", "3"], None, references=["3", "3"])
    assert same[0]["task_id"] == same[1]["task_id"] == prompt_hash("What is x?")
