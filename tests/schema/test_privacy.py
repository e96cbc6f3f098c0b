"""Nothing privileged leaves memory, at any depth, and nothing else is dropped."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import whileai as wai
from whileai.schema.export import NEVER_EXPORTED, export_row, step_messages, strip_private

RESERVED = sorted(NEVER_EXPORTED)
safe_keys = st.text(min_size=1, max_size=8).filter(lambda k: k not in NEVER_EXPORTED)
scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6)


def documents(keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=20,
    )


clean_docs = documents(safe_keys)
any_docs = documents(safe_keys | st.sampled_from(RESERVED))


def reserved_keys_in(value: Any) -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in NEVER_EXPORTED:
                found.append(key)
            found.extend(reserved_keys_in(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(reserved_keys_in(item))
    elif isinstance(value, str) and value[:1] in "{[":
        with contextlib.suppress(ValueError):
            found.extend(reserved_keys_in(json.loads(value)))
    return found


def remove_reserved(value: Any) -> Any:
    """The reference model of what strip_private should return (structures only)."""
    if isinstance(value, dict):
        return {k: remove_reserved(v) for k, v in value.items() if k not in NEVER_EXPORTED}
    if isinstance(value, list):
        return [remove_reserved(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(any_docs)
def test_no_reserved_key_survives_at_any_depth(doc: Any) -> None:
    assert reserved_keys_in(strip_private(doc)) == []


@settings(max_examples=300, deadline=None)
@given(any_docs)
def test_nothing_else_is_dropped(doc: Any) -> None:
    assert strip_private(doc) == remove_reserved(doc)


@settings(max_examples=200, deadline=None)
@given(clean_docs)
def test_clean_documents_come_back_unchanged(doc: Any) -> None:
    assert strip_private(doc) == doc


@settings(max_examples=200, deadline=None)
@given(any_docs, clean_docs)
def test_privileged_inside_json_tool_results_is_removed(leak: Any, payload: Any) -> None:
    result = json.dumps({"order": payload, "privileged": leak, "nested": [{"rubric": leak}]})
    row = wai.to_row(
        wai.Task(prompt="Where is my order?", privileged={"hidden_state": {"order_id": "A1"}}),
        wai.Rollout(
            final_text="It ships today.",
            steps=[
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "name": "get_order", "arguments": {"id": "A1"}}],
                },
                {"role": "tool", "tool_call_id": "c1", "name": "get_order", "content": result},
                {"role": "assistant", "content": "It ships today."},
            ],
            messages=None,
        ),
    )
    row["messages"] = [
        {"role": "user", "content": "Where is my order?"},
        *step_messages(row["steps"]),
    ]
    exported = export_row(row)
    assert reserved_keys_in(exported) == []
    tool_content = json.loads(exported["steps"][1]["content"])
    assert tool_content == {"order": payload, "nested": [{}]}
    # messages are rebuilt from the cleaned steps: the transcript carries no leak either
    assert exported["messages"][0] == {"role": "user", "content": "Where is my order?"}
    assert exported["messages"][1:] == step_messages(exported["steps"])


def test_carried_fields_and_structured_tool_results_are_cleaned() -> None:
    row = {
        "prompt": "Refund order B7",
        "final_text": "Refunded.",
        "privileged": {"principle": "refund only within 30 days", "reference": "refund B7"},
        "vector": [0.1, 0.2],
        "steps": [
            {
                "role": "tool",
                "tool_call_id": "c",
                "content": {"status": "ok", "hidden_state": {"x": 1}},
            },
            {"role": "assistant", "content": "Refunded."},
        ],
        "world_state": {"orders": {"B7": {"refunded": True}}, "privileged": {"fraud": True}},
        "dataset": {"source": "seed", "rubric": "secret"},
    }
    row["messages"] = [{"role": "user", "content": "Refund order B7"}, *step_messages(row["steps"])]
    exported = export_row(row)
    assert "privileged" not in exported and "vector" not in exported
    assert exported["world_state"] == {"orders": {"B7": {"refunded": True}}}
    assert exported["dataset"] == {"source": "seed"}
    assert exported["steps"][0]["content"] == {"status": "ok"}
    assert exported["messages"][1]["content"] == '{"status": "ok"}'
    # the input row is untouched: the judge still reads privileged in memory
    assert row["privileged"]["reference"] == "refund B7"


def test_non_json_text_is_left_alone() -> None:
    text = '{"reference": but this is prose, not JSON'
    assert strip_private(text) == text
    assert strip_private("the reference answer is 5") == "the reference answer is 5"


def test_messages_of_another_shape_are_cleaned_in_place() -> None:
    row = {
        "prompt": "p",
        "final_text": "f",
        "messages": [{"role": "user", "content": "p", "privileged": {"x": 1}}],
        "steps": [],
    }
    assert export_row(row)["messages"] == [{"role": "user", "content": "p"}]


def test_a_graders_words_lose_the_answer_key_on_export_and_keep_it_in_memory() -> None:
    tests = (
        "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"
    )
    row = {
        "prompt": "What is 6 * 7?",
        "final_text": "It is 41, or maybe 42.",
        "reward": 0.0,
        "reason": "41 != 42",
        "judge_meta": {
            "compared": ["41", "42"],
            "note": "AssertionError: assert candidate(1, 2) == 3",
        },
        "privileged": {"reference": "42", "rubric": "say forty-two"},
    }
    shipped = export_row(row)
    assert shipped["reason"] == "41 != ***"
    assert shipped["judge_meta"]["compared"] == ["41", "***"]
    assert shipped["final_text"] == "It is 41, or maybe 42."  # the agent's own words stay
    assert row["reason"] == "41 != 42"  # the row in memory keeps it for the judge
    code = {**row, "reason": "AssertionError (<tests> line 2: assert candidate(1, 2) == 3)"}
    code["privileged"] = {"reference": tests}
    assert export_row(code)["reason"] == "AssertionError (<tests> line 2: ***)"


@pytest.mark.plugins
def test_verifier_reasons_on_rows_from_outputs_carry_no_reference_once_exported() -> None:
    rows = wai.rows(
        ["What is 2 + 3?", "Capital of France?"],
        ["6", "Lyon"],
        wai.verify.ExactMatch(),
        references=["5", "Paris"],
    )
    assert "Paris" in rows[1]["reason"]  # the grader said what it compared
    for shipped in wai.export_rows(rows):
        assert "Paris" not in json.dumps(shipped) and "'5'" not in json.dumps(shipped)
