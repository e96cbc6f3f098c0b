"""Answers that are one exact rational written in LaTeX: ``$\\frac{36}{2}$``, ``\\boxed{-3}``,
``\\dfrac{3}{4}``, ``0.75``. MathEqual compares these as exact fractions without math-verify.

math-verify compares two rationals exactly (SymPy's ``==``) and rounds only when one side is a
float, that is, written with a decimal point. So equal fractions are equal either way, and
unequal ones are unequal when neither side is a decimal; an unequal pair with a decimal on
either side is left to math-verify, whose rounding may call it equal. Anything else (a zero
denominator, a leading zero, a bare leading point, a Unicode minus, more than one ``\\boxed``,
text around the number) is not read here at all.
"""

from __future__ import annotations

import re
from fractions import Fraction

import attrs

_WHOLE = r"(?:0|[1-9]\d*)"
_RATIONAL = re.compile(
    rf"""
    (?P<sign>-)?\s*
    (?:
        \\[dt]?frac\s*\{{\s*(?P<num>{_WHOLE})\s*\}}\s*\{{\s*(?P<den>{_WHOLE})\s*\}}
      | (?P<int>{_WHOLE})(?:\.(?P<frac>\d+))?
    )
    """,
    re.VERBOSE,
)
_BOXED = re.compile(r"\\boxed\s*\{(.*)\}", re.DOTALL)
_MAX_DIGITS = 4000


@attrs.frozen
class Rational:
    value: Fraction
    # Written with a decimal point: math-verify reads it as a float and rounds.
    decimal: bool


def _strip(text: str) -> str:
    text = text.strip()
    if text.endswith(".") and not text[:-1].rstrip().endswith("."):
        text = text[:-1].rstrip()
    if len(text) >= 2 and text[0] == "$" and text[-1] == "$":
        text = text.strip("$").strip()
    if text.count("\\boxed") == 1:
        match = _BOXED.fullmatch(text)
        if match is None:
            return ""
        text = match.group(1).strip()
    return text


def latex_rational(text: str) -> Rational | None:
    """The exact rational ``text`` is and nothing else, or None."""
    if "$" in text.strip().strip("$") or ("\\boxed" in text and text.count("\\boxed") != 1):
        return None
    core = _strip(text)
    match = _RATIONAL.fullmatch(core)
    # int() refuses a number of more digits than its limit (4,300 by default); math-verify
    # decides those.
    if match is None or len(core) > _MAX_DIGITS:
        return None
    if match["num"] is not None:
        denominator = int(match["den"])
        if denominator == 0:
            return None
        value = Fraction(int(match["num"]), denominator)
        decimal = False
    else:
        digits = match["int"] + ("." + match["frac"] if match["frac"] is not None else "")
        value = Fraction(digits)
        decimal = match["frac"] is not None
    return Rational(-value if match["sign"] else value, decimal)


def compare(answer: str, references: list[str]) -> tuple[bool, Fraction, list[Fraction]] | None:
    """(equal, the answer, the references) when every side is an exact rational and the
    verdict cannot depend on math-verify's rounding; None otherwise."""
    got = latex_rational(answer)
    if got is None:
        return None
    wanted = [latex_rational(r) for r in references]
    if any(w is None for w in wanted):
        return None
    golds = [w for w in wanted if w is not None]
    if any(w.value == got.value for w in golds):
        return True, got.value, [w.value for w in golds]
    if got.decimal or any(w.decimal for w in golds):
        return None
    return False, got.value, [w.value for w in golds]
