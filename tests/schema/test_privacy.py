"""Nothing privileged leaves memory, at any depth, and nothing else is dropped."""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import json
import math
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import whileai as wai
from whileai.schema.answer_key import AnswerKey, answer_key
from whileai.schema.export import (
    _OUTSIDE,
    NEVER_EXPORTED,
    export_line,
    export_row,
    step_messages,
    strip_private,
)
from whileai.schema.files import row_line
from whileai.schema.jsonline import dumps_exact, line_of
from whileai.schema.reserved import Stripper, compact_name, unescaped

COMPACT = {compact_name(k) for k in NEVER_EXPORTED}
#: the reserved names and how else a writer spells them
RESERVED = [*sorted(NEVER_EXPORTED), "Privileged", "REFERENCE", "reference ", "hidden-state"]
safe_keys = st.text(min_size=1, max_size=8).filter(lambda k: compact_name(k) not in COMPACT)
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
            if compact_name(key) in COMPACT:
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
        return {k: remove_reserved(v) for k, v in value.items() if compact_name(k) not in COMPACT}
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
def test_a_privileged_block_inside_json_tool_results_is_removed(leak: Any, payload: Any) -> None:
    result = json.dumps({"order": payload, "privileged": leak, "nested": [{"Privileged": leak}]})
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
    assert "privileged" not in json.dumps(exported).lower()
    tool_content = json.loads(exported["steps"][1]["content"])
    assert tool_content == {"order": payload, "nested": [{}]}
    # messages are rebuilt from the cleaned steps: the transcript carries no leak either
    assert exported["messages"][0] == {"role": "user", "content": "Where is my order?"}
    assert exported["messages"][1:] == step_messages(exported["steps"])


def test_the_agents_own_reference_and_rubric_fields_stay_in_the_transcript() -> None:
    """Stripped by provenance, not by name: a payment reference the agent passed to a tool and
    the tool's reply about it are the agent's data, in steps and messages alike."""
    call = {"id": "c1", "name": "pay", "arguments": {"reference": "PAY-7781", "amount": 20}}
    reply = {"reference": "PAY-7781", "rubric": "standard", "status": "paid"}
    row = {
        "prompt": "Pay invoice 7781",
        "final_text": "Paid, reference PAY-7781.",
        "steps": [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "name": "pay", "content": json.dumps(reply)},
            {"role": "assistant", "content": "Paid, reference PAY-7781."},
        ],
        "privileged": {"reference": "paid once"},
    }
    row["messages"] = [
        {"role": "user", "content": "Pay invoice 7781"},
        *step_messages(row["steps"]),
    ]
    exported = export_row(row)
    assert exported["steps"][0]["tool_calls"][0]["arguments"] == call["arguments"]
    assert json.loads(exported["steps"][1]["content"]) == reply
    assert json.loads(exported["messages"][1]["tool_calls"][0]["function"]["arguments"]) == {
        "reference": "PAY-7781",
        "amount": 20,
    }
    assert json.loads(exported["messages"][2]["content"]) == reply
    assert "privileged" not in exported


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
                "content": {"status": "ok", "privileged": {"x": 1}, "rubric": "house"},
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
    assert exported["steps"][0]["content"] == {"status": "ok", "rubric": "house"}
    assert exported["messages"][1]["content"] == '{"rubric": "house", "status": "ok"}'
    # the input row is untouched: the judge still reads privileged in memory
    assert row["privileged"]["reference"] == "refund B7"


def test_prose_is_left_alone_and_unreadable_text_is_cut_at_a_reserved_key() -> None:
    assert strip_private("the reference answer is 5") == "the reference answer is 5"
    assert strip_private("see {the rubric} = [draft]") == "see {the rubric} = [draft]"
    # this reads as JSON cut short: what follows the key is the answer key's, so it goes
    assert strip_private('ok {"reference": but this is prose, not JSON') == "ok {***"


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


# -- every encoding: a property test over layered encodings of planted values -------------------

REFERENCE = "gold7c3e9a51d4e8f2"  # planted values: long enough that finding one is never chance
STATUS = "hidden4b2d8f60a9c1"
PLANTED = (REFERENCE, STATUS)


def leaked(written: str, values: tuple[str, ...] = PLANTED) -> list[str]:
    """The planted values ``written`` still holds, read the ways a person or a parser would:
    as written, lower case, with escapes decoded, URL-decoded; and cut to half or more of a
    value and at least 12 characters (a truncated copy is still a copy)."""
    views = {written}
    for _ in range(3):
        views |= {urllib.parse.unquote(v) for v in views} | {unescaped(v) for v in views}
    lowered = "\n".join(views).lower()
    return [v for v in values if v[: max(12, len(v) // 2)].lower() in lowered]


def written_line(row: dict[str, Any]) -> str:
    """Exactly what a run writes for the row."""
    return row_line(row)


#: A reserved name as a writer may spell it, and the layers an encoder may wrap a block in.
SPELLINGS = ["privileged", "Privileged", "PRIVILEGED", " privileged ", "privileged "]


def _as_text(value: Any) -> str:
    # what a writer does with a value JSON cannot hold (a set, an attrs object): its str()
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _u_keys(value: Any) -> str:
    return re.sub(
        r'"(\s*privileged\s*|reference|hidden_state)"',
        lambda m: '"' + "".join(f"\\u{ord(c):04x}" for c in m.group(1)) + '"',
        _as_text(value),
        flags=re.IGNORECASE,
    )


LAYERS: dict[str, Callable[[Any], Any]] = {
    "json": lambda v: json.dumps(v, default=str),
    "json-ascii": lambda v: json.dumps(v, ensure_ascii=True, default=str),
    "python-repr": repr,
    "u-escaped keys": _u_keys,
    "prose prefix": lambda v: "Here is what the lookup returned: " + _as_text(v),
    "inside an error": lambda v: f"RuntimeError: upstream said {_as_text(v)} (retry later)",
    "truncated": lambda v: _as_text(v)[: max(1, len(_as_text(v)) * 3 // 4)],
    "nested as a field": lambda v: {"payload": v},
    "used as a key": lambda v: {_as_text(v): 1},
    "in a set": lambda v: {_as_text(v)},
}


@st.composite
def encoded_blocks(draw: st.DrawFn) -> Any:
    """A privileged block holding the planted values, spelt one way, wrapped in 1-4 layers."""
    name = draw(st.sampled_from(SPELLINGS))
    block: Any = {
        "order": {"id": "A1"},
        name: {"reference": REFERENCE, "hidden_state": {"status": STATUS}},
    }
    for layer in draw(st.lists(st.sampled_from(sorted(LAYERS)), min_size=1, max_size=4)):
        block = LAYERS[layer](block)
    return block


@settings(max_examples=300, deadline=None)
@given(encoded_blocks())
def test_a_privileged_block_in_any_encoding_leaves_nothing_in_a_carried_field(block: Any) -> None:
    row = {"prompt": "p", "final_text": "f", "dataset": {"note": block}, "extra": block}
    assert leaked(written_line(row)) == []


@settings(max_examples=300, deadline=None)
@given(encoded_blocks())
def test_a_privileged_block_in_any_encoding_leaves_nothing_in_a_tool_result(block: Any) -> None:
    steps = [
        {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": block},
        {"role": "assistant", "content": "It ships today."},
    ]
    row = {"prompt": "p", "final_text": "It ships today.", "steps": steps}
    row["messages"] = [{"role": "user", "content": "p"}, *step_messages(steps)]
    assert leaked(written_line(row)) == []


@st.composite
def encoded_values(draw: st.DrawFn) -> Any:
    """The planted values themselves (no reserved key around them) in 0-4 layers, as a world's
    state or a grader's reason might hold them."""
    value: Any = draw(
        st.sampled_from(
            [
                {"status": STATUS, "expected": REFERENCE},
                f"expected {REFERENCE!r}, the order is {STATUS}",
                [STATUS.upper(), REFERENCE],
                {STATUS: REFERENCE},
            ]
        )
    )
    for layer in draw(st.lists(st.sampled_from(sorted(LAYERS)), max_size=4)):
        value = LAYERS[layer](value)
    return value


@settings(max_examples=300, deadline=None)
@given(
    encoded_values(),
    st.sampled_from(["world_state", "reason", "judge_meta", "error", "notes"]),
    # a reference that is also a number gives the key numbers to compare where they stand:
    # the same values must come out masked either way
    st.sampled_from([REFERENCE, [REFERENCE, "4217"]]),
)
def test_the_answer_key_is_masked_by_value_in_every_field_the_run_writes_about_an_episode(
    value: Any, field: str, reference: Any
) -> None:
    row = {
        "prompt": "Where is my order?",
        "final_text": "It ships today.",
        "privileged": {"reference": reference, "hidden_state": {"status": STATUS}},
        field: value,
    }
    assert leaked(written_line(row)) == []


def test_the_agents_words_and_what_the_situation_shows_are_not_masked() -> None:
    row = {
        "prompt": "Where is my bluetooth speaker?",
        "scenario_dimensions": {"intent": "track"},
        "final_text": f"Your order is {STATUS}; tracking {REFERENCE}.",
        "steps": [{"role": "tool", "content": {"status": STATUS}}],
        "privileged": {
            "reference": REFERENCE,
            "hidden_state": {
                "status": STATUS,
                "item": "bluetooth speaker",  # the prompt says it
                "days_ago": 3,  # shorter than MIN_FACT
                "withheld_until_asked": ["status"],  # names a field
            },
            "goal": {"intent": "track"},  # a dimension of the situation
        },
        "world_state": {
            "item": "bluetooth speaker",
            "status": STATUS,
            "days": 3,
            "intent": "track",
        },
        "reason": f"told {STATUS}",
    }
    shipped = export_row(row)
    assert shipped["final_text"] == row["final_text"]  # the agent's correct answer is its own
    assert shipped["steps"] == row["steps"]  # what it saw through its tools
    assert shipped["world_state"] == {
        "item": "bluetooth speaker",
        "status": "***",
        "days": 3,
        "intent": "track",
    }
    assert shipped["reason"] == "told ***"
    assert row["world_state"]["status"] == STATUS  # memory keeps it for the judge


def test_a_number_of_the_hidden_state_is_masked_where_it_stands_as_a_number() -> None:
    row = {
        "prompt": "My lamp arrived broken; it cost 54.50.",
        "final_text": "Refunded.",
        "privileged": {
            "hidden_state": {
                "price": 129.99,
                "zip": "90210",
                "days_ago": 5,  # shorter than MIN_FACT
                "paid": 54.5,  # the prompt says it
            }
        },
        "world_state": {"price": 129.99, "zip": 90210, "days": 5, "paid": 54.5, "other": 12.5},
    }
    assert export_row(row)["world_state"] == {
        "price": "***",
        "zip": "***",
        "days": 5,
        "paid": 54.5,
        "other": 12.5,
    }
    assert json.loads(row_line(row))["world_state"] == export_row(row)["world_state"]
    assert row["world_state"]["price"] == 129.99  # memory keeps it for the judge


def test_a_key_with_numbers_masks_a_rows_strings_by_its_table_not_the_walk() -> None:
    # the walk compiles a pattern per key (a situation's): a streamed run of many situations
    # whose keys hold a number ran at half its speed when their new strings took it
    from whileai.schema.answer_key import _pattern

    rows = [
        {
            "prompt": "Where is my order?",
            "privileged": {"hidden_state": {"price": 100.25 + n, "email": f"a{n}@example.com"}},
            "world_state": {"price": 100.25 + n, "email": f"a{n}@example.com", "note": "ok"},
        }
        for n in range(20)
    ]
    _pattern.cache_clear()
    lines = [json.loads(row_line(row)) for row in rows]
    assert _pattern.cache_info().misses == 0
    for row, line in zip(rows, lines, strict=True):
        assert line["world_state"] == {"price": "***", "email": "***", "note": "ok"}
        assert line == export_row(row)


def test_what_a_grader_quotes_in_another_form_is_masked_too() -> None:
    graded = wai.rows(
        ["What is half of one?"],
        ["0.25"],
        lambda row: wai.Verdict(0.0, "parsed 0.25 vs 1/2: not equal", quotes=["1/2"]),
        references=["\\frac{1}{2}"],
    )[0]
    assert graded["reason"] == "parsed 0.25 vs 1/2: not equal"
    assert export_row(graded)["reason"] == "parsed 0.25 vs ***: not equal"
    assert graded["privileged"]["quoted"] == ["1/2"]


def recorded_as_parsed(reference: str, parsed: float, **verdict: Any) -> dict[str, Any]:
    """A row graded by a grader that records the reference as it parsed it, a number, in its
    metadata (as a hand-written grader does: ``meta={"expected": float(reference)}``)."""
    return wai.rows(
        ["What is the answer?"],
        ["0"],
        lambda row: wai.Verdict(0.0, "not equal", meta={"expected": parsed}, **verdict),
        references=[reference],
    )[0]


@pytest.mark.parametrize(
    ("reference", "parsed"),
    [
        ("42", 42),
        ("42", 42.0),
        (" 42 ", 42),
        ("42.0", 42),
        ("-3.5", -3.5),
        ("1e3", 1000),
        ("1,000", 1000),
        ("$42", 42),
        ("42%", 42),
        ("42%", 0.42),
        ("1/2", 0.5),
    ],
)
def test_a_reference_written_as_text_is_masked_where_a_grader_records_it_as_a_number(
    reference: str, parsed: float
) -> None:
    graded = recorded_as_parsed(reference, parsed)
    assert json.loads(row_line(graded))["judge_meta"]["expected"] == "***"
    assert graded["judge_meta"]["expected"] == parsed  # memory keeps it for the judge


def test_a_form_a_grader_quotes_is_masked_where_it_records_that_form_as_a_number() -> None:
    graded = recorded_as_parsed("\\frac{1}{2}", 0.5, quotes=["0.5"])
    assert json.loads(row_line(graded))["judge_meta"]["expected"] == "***"


@pytest.mark.parametrize(
    ("reference", "recorded"), [("12 apples", 12), ("A2665", 2665), ("1", True), ("42", 41)]
)
def test_numbers_a_reference_does_not_stand_for_are_written_as_they_are(
    reference: str, recorded: Any
) -> None:
    graded = recorded_as_parsed(reference, recorded)
    assert json.loads(row_line(graded))["judge_meta"]["expected"] == recorded


def test_carried_fields_whose_names_mask_alike_both_reach_the_file_in_their_place() -> None:
    row = {
        "prompt": "Where is my order?",
        "privileged": {"reference": REFERENCE, "hidden_state": {"status": STATUS}},
        f"note {REFERENCE}": "first",
        "reward": 1.0,
        f"note {STATUS}": "second",
    }
    shipped = export_row(row)
    assert list(shipped) == ["prompt", "note ***", "reward", "***#2"]
    assert [shipped["note ***"], shipped["***#2"]] == ["first", "second"]
    assert leaked(written_line(row)) == []


@st.composite
def spelled_apart(draw: st.DrawFn) -> str:
    """A reserved name as a writer might spell it: any case, white space, "_" or "-" between
    any of its letters."""
    name = draw(st.sampled_from(sorted(COMPACT)))
    gaps = st.sampled_from(["", "", " ", "_", "-", "\t", "\n", "\u00a0", "\u2028", "\x0b"])
    letters = [c.upper() if draw(st.booleans()) else c for c in name]
    return "".join(c + draw(gaps) for c in letters).strip("".join([" "]))


def as_text(doc: Any) -> Any:
    return json.dumps(doc, ensure_ascii=False)


spelled_docs = st.recursive(
    scalars | spelled_apart(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(safe_keys | spelled_apart(), inner, max_size=4)
        | inner.map(as_text)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(spelled_docs)
def test_a_text_the_stripper_calls_clean_is_one_its_walk_leaves_as_it_is(doc: Any) -> None:
    # holds_none lets the export skip the walk: it must never call clean what the walk strips
    from whileai.schema.export import _OUTSIDE

    if _OUTSIDE.holds_none(json.dumps(doc, ensure_ascii=False)):
        assert strip_private(doc) == doc
    if reserved_keys_in(doc):
        assert not _OUTSIDE.holds_none(json.dumps(doc, ensure_ascii=False))
    # and the walk removes a name spelled apart, in JSON inside JSON too
    assert reserved_keys_in(strip_private(doc)) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(spelled_docs, min_size=1, max_size=20))
def test_what_a_stripper_remembers_never_changes_what_it_strips(docs: list[Any]) -> None:
    # a stripper remembers the keys and clean texts it met; one that met many others strips
    # each document as one that never met any
    from whileai.schema.reserved import Stripper

    seasoned = Stripper(NEVER_EXPORTED)
    for i in range(3000):
        seasoned.value({f"key {i}": f"text {i}", "reference": i})
    for doc in docs:
        assert seasoned.value(doc) == Stripper(NEVER_EXPORTED).value(doc)
        assert seasoned.value(doc) == seasoned.value(doc)
    # and what it remembers stays bounded
    assert len(seasoned._fates) <= 2048 and len(seasoned._clean) <= 2048
    assert len(seasoned._named) <= 2048


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='\\"ntrfbxhidenpvlgs _-', max_size=40))
def test_escaped_white_space_is_read_out_of_a_name_as_the_pattern_reads_it(text: str) -> None:
    # the pattern \\+[ntrfb] removed escaped white space before names were looked for; plain
    # replaces do it now, and must find a name where the pattern would and nowhere else (a
    # text whose every backslash escapes a quote, JSON inside JSON, is returned at once)
    from whileai.schema.reserved import _without_escaped_separators

    by_pattern = re.sub(r"\\+[ntrfb]", "", text)
    assert _without_escaped_separators(text) == re.sub(r"\\+", r"\\", by_pattern)


# -- one encoding per row: export_line writes exactly what export_row's walk and the standard
# library's encoder would have written, read back; the bytes test that lets it skip the walk
# never calls clean a text the walk would change


def shares_a_container(a: Any, b: Any) -> bool:
    """Whether any dict or list of ``a`` is one of ``b``'s (an export must be a copy)."""
    seen: set[int] = set()

    def ids(value: Any) -> None:
        if isinstance(value, dict | list):
            seen.add(id(value))
            for item in value.values() if isinstance(value, dict) else value:
                ids(item)

    ids(b)

    def walk(value: Any) -> bool:
        if isinstance(value, dict | list):
            if id(value) in seen:
                return True
            return any(walk(v) for v in (value.values() if isinstance(value, dict) else value))
        return False

    return walk(a)


planted_values = st.sampled_from(
    [
        {"status": STATUS, "expected": REFERENCE},
        f"expected {REFERENCE!r}, the order is {STATUS}",
        [STATUS.upper(), REFERENCE],
        {STATUS: REFERENCE, "other": STATUS},
        {"orders": {"A1": {"status": STATUS, "tracking": "1Z99"}}, "note": "fine"},
        "nothing to see",
        # numbers, which a key with a number compares where they stand
        {"expected": 4217, "parsed": 4217.0, "count": 12, "ok": True, "said": "4217 or 12"},
        [4217, [1, 4217.5], None],
    ]
)


@st.composite
def rows(draw: st.DrawFn) -> dict[str, Any]:
    """A row as a run writes it: episode, accounting and carried fields holding anything a
    document may (reserved names in any spelling, JSON inside JSON), with or without a
    privileged block whose values the fields may hold in any encoding."""
    value = draw(planted_values)
    for layer in draw(st.lists(st.sampled_from(sorted(LAYERS)), max_size=3)):
        value = LAYERS[layer](value)
    steps = [
        {"role": "assistant", "content": draw(st.text(max_size=20))},
        {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": draw(spelled_docs)},
    ]
    row: dict[str, Any] = {
        "prompt": "Where is my order?",
        "final_text": "It ships today.",
        "steps": steps,
        "messages": [{"role": "user", "content": "Where is my order?"}],
        "scenario_dimensions": {"intent": draw(st.sampled_from(["track", "refund"]))},
        "usage": {"input_tokens": draw(st.integers(0, 9)), "cost_usd": 0.25},
        "markers": draw(any_docs),
        draw(st.sampled_from(["world_state", "reason", "judge_meta", "error", "notes"])): value,
        "carried": draw(spelled_docs),
    }
    if draw(st.booleans()):
        row["privileged"] = {"reference": REFERENCE, "hidden_state": {"status": STATUS}}
    if draw(st.booleans()):
        row["vector"] = [0.5, 0.25]
    return row


@settings(max_examples=400, deadline=None)
@given(rows())
def test_the_line_and_the_copy_are_the_walks_export(row: dict[str, Any]) -> None:
    exported, line = export_line(row)
    walked = export_row(row)
    assert exported == walked
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == walked
    assert not shares_a_container(exported, row)
    if "privileged" in row:
        assert leaked(line.decode()) == []


@settings(max_examples=400, deadline=None)
@given(spelled_docs)
def test_a_text_the_bytes_test_calls_clean_is_one_the_walk_leaves_as_it_is(doc: Any) -> None:
    written = orjson.dumps(doc)
    if _OUTSIDE.holds_none_encoded(written):
        assert strip_private(doc) == doc
        assert _OUTSIDE.holds_none(json.dumps(doc, ensure_ascii=False))
    if reserved_keys_in(doc):
        assert not _OUTSIDE.holds_none_encoded(written)


def test_the_bytes_test_reads_a_name_spelled_apart_escaped_or_in_any_case() -> None:
    for clean in ({"order": "A1"}, ["hidden", "state of things"], {"ref": "erence"}):
        assert _OUTSIDE.holds_none_encoded(orjson.dumps(clean)), clean
    for held in (
        {"Hidden-State": 1},
        {"x": json.dumps({"rubric": 1})},
        {"x": json.dumps(json.dumps({"re\nference": 1}))},
        {"x": "{'REFERENCE': 1}"},
        {"x": "priv\tileged=1"},
        {"x": "refer\u00a0ence"},  # a non-ASCII separator: read as text
        {"\x1f": "vector"},
    ):
        assert not _OUTSIDE.holds_none_encoded(orjson.dumps(held)), held


@settings(max_examples=300, deadline=None)
@given(
    st.lists(planted_values, min_size=1, max_size=8),
    st.sampled_from([REFERENCE, [REFERENCE, "4217"], [REFERENCE, 4217]]),
)
def test_masking_string_by_string_masks_as_the_whole_text_does(
    values: list[Any], reference: Any
) -> None:
    row = {
        "prompt": "Where is my order?",
        "privileged": {"reference": reference, "hidden_state": {"status": STATUS}},
    }
    key = answer_key(row)
    # the same key over several rows, as a situation's rollouts use it: what it remembers
    # from one row never changes the next
    for value in values:
        copy = json.loads(json.dumps(value))
        assert key.mask_strings(copy) == key.mask(copy)
        assert key.mask_strings(copy) == AnswerKey(key.values, key.numbers).mask_strings(copy)


def test_a_key_remembers_a_bounded_number_of_strings_and_masks_past_it() -> None:
    key = answer_key({"prompt": "p", "privileged": {"reference": REFERENCE}})
    many = {f"order {i}": f"{REFERENCE} {i}" for i in range(600)}
    masked = key.mask_strings(many)
    assert masked == key.mask(many)
    assert all(v == f"*** {i}" for i, v in enumerate(masked.values()))
    assert len(key._masked) <= 128
    long = {"log": "x" * 200 + REFERENCE}
    assert key.mask_strings(long) == {"log": "x" * 200 + "***"}
    assert long["log"] not in key._masked
    # nothing changed: the very value comes back, so the export keeps its one encoding
    clean = {"orders": ["A1", {"status": "delivered"}]}
    assert key.mask_strings(clean) is clean


def test_a_key_that_remembers_every_string_still_masks_what_json_does_not_hold() -> None:
    key = answer_key({"prompt": "p", "privileged": {"reference": REFERENCE}})
    seen = {"status": STATUS, "note": f"{REFERENCE} ok"}
    key.mask_strings(seen)
    # the same strings, in a tuple, under a key that is not a string, or by a number: not
    # JSON's kinds, so not read from what the key remembers but masked as mask() masks them
    for odd in (
        {"pair": (STATUS, f"{REFERENCE} ok")},
        {1: f"{REFERENCE} ok"},
        {"status": STATUS, "when": dt.date(2026, 12, 4)},
    ):
        assert key.mask_strings(odd) == key.mask(odd), odd
    assert key.mask_strings(seen) == {"status": STATUS, "note": "*** ok"}


def test_keys_masked_alike_stay_apart_as_the_whole_text_keeps_them() -> None:
    key = answer_key({"prompt": "p", "privileged": {"hidden_state": {"a": STATUS, "b": REFERENCE}}})
    value = {STATUS: 1, REFERENCE: 2, "***": 3, "***#2": 4}
    assert key.mask_strings(value) == key.mask(value)
    assert list(key.mask_strings(value)) == ["***", "***#2", "***#3", "***#4"]


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


#: Values orjson writes otherwise than ``json`` does, or not at all: each line falls back to
#: ``json``, so what is read back is what was always read back.
ODD = [
    {"reward": math.nan},
    {"logprob": -math.inf},
    {"pair": (1, 2)},
    {"tags": {"b", "a"}},
    {"at": dt.datetime(2026, 12, 3, 23, 0, tzinfo=dt.UTC)},
    {"big": 2**70},
    {1: "one"},
    {"colour": Colour.RED},
    {"lone": "\ud800"},
]


def test_values_orjson_would_write_otherwise_fall_back_to_json() -> None:
    for value in ODD:
        assert dumps_exact(value) is None, value
        try:
            expected = (json.dumps(value, ensure_ascii=False, default=str) + "\n").encode()
        except UnicodeEncodeError:
            continue
        assert line_of(value) == expected, value


def test_a_line_orjson_writes_reads_back_to_the_value() -> None:
    value = {
        "a": [1, 2.5, 1e-05, 1e16, -0.0, True, None],
        "s": 'é \u2028 \x01 "q"',
        "l": Level.HIGH,
    }
    line = line_of(value)
    assert line == orjson.dumps(value) + b"\n"
    assert json.loads(line) == value


def test_a_situations_key_is_the_one_its_block_makes_whatever_the_block_holds() -> None:
    # keys are remembered by what they are made of, written by orjson where that reads back
    # exactly and by json otherwise: two blocks that write alike must make the same key
    from whileai.schema.answer_key import _key_of, _public_face

    blocks = [{"reference": value} for value in ODD] + [
        {"reference": [math.nan, STATUS]},
        {"reference": [None, STATUS]},
        {"reference": (STATUS, REFERENCE)},
        {"reference": [STATUS, REFERENCE]},
        {"hidden_state": {"status": STATUS, "level": Level.HIGH}},
        {"hidden_state": {"status": STATUS, "code": 1}, "goal": {"flag": True}},
        {"hidden_state": {"status": STATUS, "code": True}, "goal": {"flag": 1}},
        {"hidden_state": {"empty": [], "none": None}, "goal": {}},
    ]
    for block in blocks * 2:  # the second pass reads what the first remembered
        row = {"prompt": "Where is order A1?", "scenario_dimensions": {"x": 1}, "privileged": block}
        # (by repr: a key of a NaN holds a NaN, which equals nothing)
        assert repr(answer_key(row)) == repr(_key_of(block, _public_face(row))), block


def test_a_rows_top_level_loses_reserved_names_in_any_spelling_read_or_remembered() -> None:
    stripper = Stripper(NEVER_EXPORTED)
    row = {"Privileged": 1, "x": 2, 3: 4, "hidden-state": 5, "Vector ": 6, "REFERENCE": 7}
    for _ in range(2):  # the second time from what the stripper remembers
        top = stripper.unreserved(row)
        assert top == {"x": 2, 3: 4}
        assert top is not row
    plain = {"x": 2, "reward": 1.0}
    for _ in range(2):  # the second time every name is known: a copy all the same
        top = stripper.unreserved(plain)
        assert top == plain and top is not plain
    # known names beside a reserved one, and past the memory's bound
    assert stripper.unreserved({"x": 2, "reward": 1.0, "rubric ": "r"}) == plain
    many = {f"field_{i}": i for i in range(5000)}
    assert stripper.unreserved({**many, "Privileged": 1}) == many
    assert stripper.unreserved({**plain, "hidden_state": {}}) == plain


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=30))
def test_every_form_of_a_value_is_how_json_repr_and_urls_write_it(value: str) -> None:
    from whileai.schema.answer_key import forms

    once = json.dumps(value)[1:-1]
    expected = {
        value,
        once,
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(once)[1:-1],
        repr(value)[1:-1],
        "".join(f"\\u{ord(c):04x}" for c in value),
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value),
    }
    assert forms(value) == {f for f in expected if f}


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aZ9 .@_-'\"\\%+/é😀\u2028\n")), max_size=30))
def test_a_text_without_backslashes_percent_signs_or_pluses_is_searched_for_every_form_it_can_hold(
    value: str,
) -> None:
    """A key's first text (a shop state's strings: no backslash, percent sign or plus) makes
    only the forms such a text can hold, and misses none of them."""
    from whileai.schema.answer_key import _marks_of, _needles, forms

    every = _needles(value)
    for marks in range(8):
        assert _needles(value, marks) == tuple(n for n in every if n.marks & ~marks == 0)
        held = {f for f in forms(value) if _marks_of(f) & ~marks == 0}
        assert held <= forms(value, marks)


def test_cache_keys_tell_apart_what_orjson_writes_alike_and_match_equal_mappings() -> None:
    from whileai.schema.jsonline import key_text

    assert key_text({"a": 1, "b": [2]}) == key_text({"b": [2], "a": 1})
    for one, other in (
        ([math.nan], [None]),
        ([(1, 2)], [[1, 2]]),
        ([{"x": True}], [{"x": 1}]),
        ([Colour.RED], ["red"]),
    ):
        assert key_text(one) != key_text(other), (one, other)
    assert key_text({1: "a"}) == json.dumps({1: "a"}, sort_keys=True)
    assert key_text([object()]) is None


def test_rows_of_one_situation_export_alike_from_several_threads_at_once() -> None:
    # A situation's rows share one answer key, which remembers how their strings were masked;
    # rows saved from several threads at once (data.save in one, a data loader exporting in
    # another) read and fill that memory together. Each thread's world states draw from more
    # strings than it holds, so it is cleared and refilled while the others read it.
    import random
    import sys
    import threading

    key_holder = {
        "prompt": "Where is my order?",
        "scenario_id": "s-threads",
        "privileged": {"hidden_state": {"order": "A1234", "name": "Dana Whitfield"}},
        "steps": [],
        "messages": [],
        "final_text": "It is on its way.",
        "reward": 1.0,
    }
    failures: list[str] = []

    def export_many(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(1500):
                row = dict(key_holder)
                row["world_state"] = {
                    f"k{rng.randrange(400)}": f"v{rng.randrange(400)} A1234 Dana Whitfield"
                    for _ in range(20)
                }
                line = row_line(row)
                assert "A1234" not in line and "Dana Whitfield" not in line, line
                assert json.loads(line)["world_state"] == export_row(row)["world_state"]
        except Exception as exc:  # reported below, with the thread's seed
            failures.append(f"thread {seed}: {exc!r}")

    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often, as they would under load
    try:
        threads = [threading.Thread(target=export_many, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switching)
    assert failures == []
