"""A verifier's reason says what failed; once exported it quotes no form of the reference.

Each verifier writes its reason from what it compared (the reference as written, normalised,
parsed by math-verify, an assertion's message), and lists every form other than the one
written in ``Verdict.quotes``; the export masks them all, and the row in memory keeps them
for the judge."""

from __future__ import annotations

import json

import pytest

import whileai as wai
from whileai.schema.export import export_row
from whileai_verifiers.codeexec import CodeExec
from whileai_verifiers.exact import ExactMatch
from whileai_verifiers.mathequal import MathEqual
from whileai_verifiers.numeric import Numeric


def graders_words(row: dict[str, object]) -> str:
    """What the grader wrote on the exported row (the agent's own answer is not searched)."""
    shipped = export_row(row)
    return json.dumps({k: shipped.get(k) for k in ("reason", "judge_meta")})


def shipped_reason(verifier: object, answer: str, reference: str) -> tuple[str, str]:
    row = wai.rows(["q"], [answer], verifier, references=[reference])[0]
    return str(row["reason"]), graders_words(row)


@pytest.mark.parametrize(
    ("verifier", "answer", "reference", "forms"),
    [
        # math-verify parses the reference and its reason shows the parsed form
        (MathEqual(), "0.3", "\\frac{1}{2}", ["1/2"]),
        (MathEqual(), "$\\frac{2}{4}$", "\\frac{1}{2}", ["1/2"]),
        # the fast path shows the reference as a number
        (MathEqual(), "The answer is 41.", "42.00", ["42"]),
        (MathEqual(), "The answer is 42.", "42.00", ["42"]),
        (Numeric(), "41", "42.50", ["42.50", "42.5"]),
        (Numeric(), "42.5", "42.50", ["42.50", "42.5"]),
        (ExactMatch(), "Lyon", "  PARIS!  ", ["PARIS!", "paris"]),
        (ExactMatch(), "paris", "PARIS!", ["PARIS!", "paris"]),
    ],
)
def test_no_form_of_the_reference_survives_export(
    verifier: object, answer: str, reference: str, forms: list[str]
) -> None:
    reason, shipped = shipped_reason(verifier, answer, reference)
    assert any(f in reason for f in forms), reason  # in memory the reason says what it compared
    for form in forms:
        assert f'"{form}' not in shipped and f" {form}" not in shipped, (form, shipped)


def test_a_codeexec_failure_keeps_its_line_and_message_out_of_the_export() -> None:
    tests = (
        "def check(f):\n"
        "    assert f(2) == 4, 'expected double(2) to be 4'\n"
        "    assert f(3) == 6  # the second case\n"
    )
    with CodeExec(timeout=5) as code:
        row = wai.rows(
            ["double"],
            ["def double(x):\n    return x + 1\n"],
            code,
            references=[tests + "check(double)\n"],
        )[0]
    assert "expected double(2) to be 4" in row["reason"]
    shipped = graders_words(row)
    assert "expected double(2)" not in shipped
    assert "assert f(2) == 4" not in shipped
    assert "AssertionError" in shipped  # what kind of failure it was still reads
