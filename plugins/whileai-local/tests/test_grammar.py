"""The grammar a schema becomes: a number bounded to [0, 1] is bounded in the grammar too."""

from __future__ import annotations

import json

import pytest

from whileai_local.grammar import STAND_IN, UNIT_NUMBER, gbnf_for, grammar_for, with_unit_numbers

SCORE = {"type": "number", "minimum": 0, "maximum": 1}


def test_only_a_plain_unit_interval_number_is_rewritten() -> None:
    schema = {"type": "object", "properties": {"score": SCORE, "n": {"type": "integer"}}}
    rewritten, found = with_unit_numbers(schema)
    assert found and rewritten["properties"]["score"] == {"const": STAND_IN}
    assert rewritten["properties"]["n"] == {"type": "integer"}
    # other bounds, or a bound beside a constraint the rewrite would drop, are left as they are
    for left in (
        {"type": "number", "minimum": 0, "maximum": 10},
        {"type": "number", "minimum": 0},
        {**SCORE, "multipleOf": 0.5},
        {**SCORE, "exclusiveMaximum": 1},
        {"type": "integer", "minimum": 0, "maximum": 1},
    ):
        assert with_unit_numbers({"properties": {"x": left}}) == (
            {"properties": {"x": left}},
            False,
        )
    # inside lists (anyOf, items) as well
    assert with_unit_numbers({"anyOf": [SCORE, {"type": "null"}]})[1]


def test_the_grammar_holds_a_decimal_in_the_unit_interval_not_any_number() -> None:
    pytest.importorskip("llama_cpp")
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    schema = {"type": "object", "properties": {"score": SCORE}, "required": ["score"]}
    text = gbnf_for(schema)
    assert f"score ::= {UNIT_NUMBER}" in text and STAND_IN not in text
    assert grammar_for(schema) is not None
    # a schema without such a number is llama-cpp-python's conversion as it is
    plain = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert gbnf_for(plain) == json_schema_to_gbnf(json.dumps(plain))
    with pytest.raises(ValueError, match="cannot be turned into a grammar"):
        grammar_for({"type": "object", "$ref": "#/nowhere", "properties": {"s": SCORE}})
