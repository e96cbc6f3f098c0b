"""Numeric: the completion's number against the reference, within a tolerance.

What counts as the answer: by default the LAST number in the completion (chain-of-thought
replies end with their answer: "3 * 6 = 18, so she makes $18." gives 18). With
``whole_answer=True`` the completion must be a number and nothing else (currency, a trailing
full stop, ``####`` and surrounding space allowed); anything more scores 0.0.

How numbers are read: thousands separators (``1,000,000``), a currency sign before the number
(``$``, ``€``, ``£``, ``¥``, ``₹``, ``-$5`` and ``$-5``), units after it (``5 cm``, ``18 dollars``:
words after a number are not part of it), scientific notation (``1.5e-3``, ``1.5 × 10^3``,
``1.5 \\times 10^{3}``), negative numbers (``-5``, ``−5``), percentages (``50%``, ``50\\%``,
``50 percent``). A decimal comma (``12,5``) is not read as one: ``,`` is a thousands separator.

Percentages, ``percent=``:

- ``"either"`` (default): ``50%`` equals both 50 and 0.5, in the answer and in the reference
  alike. Benchmarks disagree on whether "what percent" answers are stored as 50 or 0.5, and a
  reply rarely says which it means, so either reading passes (math-verify does the same).
- ``"fraction"``: ``50%`` is 0.5 only.
- ``"number"``: the sign is ignored, ``50%`` is 50 only.

Tolerance: equal when ``|a - b| <= max(rel_tol * max(|a|, |b|), abs_tol)`` (``math.isclose``'s
rule) in decimal arithmetic: the numbers are read exactly, however many digits they have, and
the difference is kept to 50 significant digits. A number whose exponent has more than 15
digits (``1e99999999999999999``) is out of range: as the completion's answer it scores 0.0, as a
reference it is an error. Defaults ``rel_tol=1e-6`` (six significant digits, what a
reply that rounds agrees on) and ``abs_tol=0.0`` (so 0 equals only 0; raise it for answers near
zero).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from whileai.scoring import Verdict
from whileai_verifiers import __version__
from whileai_verifiers._numbers import (
    ARITHMETIC,
    NumberToken,
    find_numbers,
    shifted,
    shown,
    whole_number,
)

_PERCENT_MODES = ("either", "fraction", "number")


class Numeric:
    """1.0 when the completion's number is within tolerance of the reference's."""

    name = "Numeric"
    version = __version__

    def __init__(
        self,
        *,
        rel_tol: float = 1e-6,
        abs_tol: float = 0.0,
        percent: str = "either",
        whole_answer: bool = False,
    ) -> None:
        for label, tol in (("rel_tol", rel_tol), ("abs_tol", abs_tol)):
            if isinstance(tol, bool) or not isinstance(tol, int | float) or not tol >= 0:
                raise ValueError(f"{label} must be a number >= 0, got {tol!r}")
        if percent not in _PERCENT_MODES:
            raise ValueError(f"percent must be one of {', '.join(_PERCENT_MODES)}, got {percent!r}")
        self.rel_tol = Decimal(str(rel_tol))
        self.abs_tol = Decimal(str(abs_tol))
        self.percent = percent
        self.whole_answer = whole_answer
        self.options = {
            "rel_tol": rel_tol,
            "abs_tol": abs_tol,
            "percent": percent,
            "whole_answer": whole_answer,
        }
        self.meta = {"options": dict(self.options)}

    def _readings(self, value: Decimal, percent: bool) -> list[Decimal]:
        if not percent or self.percent == "number":
            return [value]
        if self.percent == "fraction":
            return [shifted(value, -2)]
        return [value, shifted(value, -2)]

    def within_tolerance(self, a: Decimal, b: Decimal) -> bool:
        """Whether ``a`` and ``b`` are equal within the tolerances."""
        if a == b:
            return True
        difference = ARITHMETIC.subtract(a, b).copy_abs()
        scale = ARITHMETIC.multiply(self.rel_tol, max(a.copy_abs(), b.copy_abs()))
        return difference <= max(scale, self.abs_tol)

    def answer(self, completion: str) -> NumberToken | None:
        """The number the completion gives as its answer, or None."""
        if self.whole_answer:
            return whole_number(completion)
        tokens = find_numbers(completion)
        return tokens[-1] if tokens else None

    def verify(self, completion: str, reference: Any, prompt: str | None = None) -> Verdict:
        if reference is None:
            return Verdict.error("no reference to compare with (privileged.reference is empty)")
        refs = reference if isinstance(reference, list | tuple) else [reference]
        if not refs:
            return Verdict.error("the reference list is empty")
        ref_tokens: list[tuple[NumberToken, Decimal]] = []
        for ref in refs:
            token = _reference_token(ref)
            if token is None:
                return Verdict.error(f"the reference {ref!r} is not a number")
            if token.value is None:
                return Verdict.error(f"the reference {ref!r} is out of range (its exponent)")
            ref_tokens.append((token, token.value))
        got = self.answer(completion)
        if got is None:
            what = "is not a number" if self.whole_answer else "has no number"
            return Verdict(0.0, f"the completion {what}")
        if got.value is None:
            # The policy wrote it: a number no reference can equal, not a grader's failure.
            return Verdict(0.0, f"the completion's number {got.text.strip()} is out of range")
        for ref_token, ref_value in ref_tokens:
            for a in self._readings(got.value, got.percent):
                for b in self._readings(ref_value, ref_token.percent):
                    if self.within_tolerance(a, b):
                        return Verdict(
                            1.0, f"{shown(a)} == {shown(b)}", quotes=(shown(a), shown(b))
                        )
        wanted = [ref.text.strip() for ref, _ in ref_tokens]
        return Verdict(0.0, f"{got.text.strip()} != {' or '.join(wanted)}", quotes=wanted)


def _reference_token(reference: Any) -> NumberToken | None:
    if isinstance(reference, bool):
        return None
    if isinstance(reference, int | float | Decimal):
        value = Decimal(str(reference))
        if not value.is_finite():
            return None
        return NumberToken(value, str(reference), 0, 0, percent=False, exponent=False)
    if isinstance(reference, str):
        return whole_number(reference)
    return None
