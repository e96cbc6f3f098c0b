"""The grammar a JSON schema asks the embedded model for, with the bounds llama.cpp leaves out.

llama-cpp-python turns a schema into a GBNF grammar, but a ``number``'s ``minimum`` and
``maximum`` are not in it (its converter does not support them, in 0.3). A judge's score is
such a number, in [0, 1]: asked to "rate" an answer, SmolLM2 writes 5, 2.5 or 4.8 on a scale
it brought along, and every such verdict is an error. A number the schema bounds to exactly
[0, 1] is therefore written into the grammar as a decimal in [0, 1] (``0``, ``0.75``, ``1``,
``1.0``): the converter is given a stand-in string constant where the number was, and the
stand-in's rule in the grammar's text becomes the decimal's. Other bounds are left as
llama.cpp leaves them; the caller still checks the value it reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: stands for a [0, 1] number while the converter writes the rest of the grammar
STAND_IN = "__whileai_unit_interval_number__"
#: a decimal in [0, 1], up to six places, then the converter's own optional space
UNIT_NUMBER = '("0" ("." [0-9]{1,6})? | "1" ("." "0"{1,6})?) space'


def grammar_for(schema: Mapping[str, Any]) -> Any:
    """The ``LlamaGrammar`` of ``schema`` (any JSON object for an empty one); a ValueError
    when llama.cpp cannot compile it, rather than its quiet fall back to any JSON."""
    from llama_cpp.llama_grammar import LlamaGrammar

    try:
        return LlamaGrammar.from_string(gbnf_for(schema), verbose=False)
    except Exception as exc:
        raise ValueError(f"response_format schema cannot be turned into a grammar: {exc}") from exc


def gbnf_for(schema: Mapping[str, Any]) -> str:
    """The GBNF text of ``schema``: llama-cpp-python's conversion, with each number bounded to
    [0, 1] written as a decimal in [0, 1]."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    bounded, found = with_unit_numbers(schema or {"type": "object"})
    text = str(json_schema_to_gbnf(json.dumps(bounded)))
    if found:
        text = text.replace(f'"\\"{STAND_IN}\\""', UNIT_NUMBER)
        if STAND_IN in text:  # the converter wrote the constant some other way
            raise ValueError(f"the [0, 1] number was not placed in the grammar:\n{text}")
    return text


def with_unit_numbers(schema: Any) -> tuple[Any, bool]:
    """``schema`` with each number bounded to exactly [0, 1] replaced by the stand-in
    constant, and whether there was one."""
    if isinstance(schema, Mapping):
        if _is_unit_number(schema):
            return {"const": STAND_IN}, True
        found = False
        out: dict[str, Any] = {}
        for key, value in schema.items():
            out[key], inner = with_unit_numbers(value)
            found = found or inner
        return out, found
    if isinstance(schema, list):
        pairs = [with_unit_numbers(item) for item in schema]
        return [item for item, _ in pairs], any(inner for _, inner in pairs)
    return schema, False


def _is_unit_number(schema: Mapping[str, Any]) -> bool:
    # only the plain form: a number with both bounds, inclusive, and nothing else that
    # constrains it (an enum, a multipleOf) which the rewrite would drop
    return (
        schema.get("type") == "number"
        and schema.get("minimum") == 0
        and schema.get("maximum") == 1
        and set(schema) <= {"type", "minimum", "maximum", "description", "title"}
    )
