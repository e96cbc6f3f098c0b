"""Numeric: the last number of a reply against the reference, within a tolerance."""

from __future__ import annotations

import pytest

import whileai as wai
from whileai.scoring import as_scorer, grade_row
from whileai_verifiers.numeric import Numeric


@pytest.mark.parametrize(
    ("completion", "reference"),
    [
        ("1,000,000", "1000000"),
        ("The total is $1,450,000.", "1450000"),
        ("It costs €18.50", "18.5"),
        ("-$5", "-5"),
        ("$-5", "-5"),
        ("The temperature fell to −5 degrees", "-5"),
        ("The rope is 5 cm long", "5"),
        ("She makes 18 dollars.", "18"),
        ("1.5e3", "1500"),
        ("about 2.5E-3 grams", "0.0025"),
        ("1.5 × 10^3", "1500"),
        ("$1.5 \\times 10^{3}$", "1500"),
        ("#### 18", "18"),
        ("18.000", "18"),
    ],
)
def test_numbers_as_people_write_them(completion: str, reference: str) -> None:
    verdict = Numeric().verify(completion, reference)
    assert verdict.reward == 1.0, verdict


def test_the_last_number_in_the_text_is_the_answer() -> None:
    numeric = Numeric()
    assert numeric.verify("9 - 3 = 6 eggs, times 3 = 18", "18").reward == 1.0
    verdict = numeric.verify("18 at first, but then 17", "18")
    assert (verdict.reward, verdict.reason) == (0.0, "17 != 18")


def test_whole_answer_requires_the_reply_to_be_a_number() -> None:
    numeric = Numeric(whole_answer=True)
    assert numeric.verify("$18.00.", "18").reward == 1.0
    assert numeric.verify("#### 18", "18").reward == 1.0
    verdict = numeric.verify("The answer is 18", "18")
    assert (verdict.reward, verdict.reason) == (0.0, "the completion is not a number")


def test_relative_tolerance() -> None:
    assert Numeric().verify("3.1415929", "3.14159265").reward == 1.0  # within 1e-6
    assert Numeric().verify("3.1416", "3.14159265").reward == 0.0
    assert Numeric(rel_tol=0.01).verify("3.14", "3.14159265").reward == 1.0


def test_absolute_tolerance_for_answers_near_zero() -> None:
    assert Numeric().verify("0.0000001", "0").reward == 0.0
    assert Numeric(abs_tol=1e-6).verify("0.0000001", "0").reward == 1.0


def test_percent_either_reading_by_default() -> None:
    numeric = Numeric()
    assert numeric.verify("50%", "0.5").reward == 1.0
    assert numeric.verify("50%", "50").reward == 1.0
    assert numeric.verify("0.5", "50%").reward == 1.0
    assert numeric.verify("50 percent", "0.5").reward == 1.0
    assert numeric.verify("$50\\%$", "50").reward == 1.0
    assert numeric.verify("40%", "0.5").reward == 0.0


def test_percent_fraction_and_number_modes() -> None:
    assert Numeric(percent="fraction").verify("50%", "0.5").reward == 1.0
    assert Numeric(percent="fraction").verify("50%", "50").reward == 0.0
    assert Numeric(percent="number").verify("50%", "50").reward == 1.0
    assert Numeric(percent="number").verify("50%", "0.5").reward == 0.0


def test_words_inside_identifiers_are_not_numbers() -> None:
    verdict = Numeric().verify("Order A1234 ships in 3 days", "3")
    assert verdict.reward == 1.0
    assert Numeric().verify("Order A1234 is late", "1234").reward == 0.0


def test_no_number_scores_zero_with_the_reason() -> None:
    verdict = Numeric().verify("I cannot tell.", "18")
    assert (verdict.reward, verdict.status, verdict.reason) == (
        0.0,
        "ok",
        "the completion has no number",
    )


def test_numbers_and_lists_as_references() -> None:
    assert Numeric().verify("18", 18).reward == 1.0
    assert Numeric().verify("0.1", 0.1).reward == 1.0
    assert Numeric().verify("7", ["6", "7"]).reward == 1.0


@pytest.mark.parametrize("reference", ["eighteen", "x + 1", True, float("nan"), None, []])
def test_a_reference_that_is_not_a_number_is_an_error(reference: object) -> None:
    verdict = Numeric().verify("18", reference)
    assert verdict.status == "error"
    assert verdict.reward is None


TWO_TO_THE_100 = 2**100  # 31 digits: more than Decimal's default 28-digit precision


def test_answers_longer_than_decimals_default_precision_are_read_exactly() -> None:
    exact = Numeric(rel_tol=0.0)
    written = str(TWO_TO_THE_100)
    for completion in (written, f"The answer is {written}.", f"#### {written}"):
        verdict = exact.verify(completion, TWO_TO_THE_100)
        assert (verdict.reward, verdict.reason) == (1.0, f"{written} == {written}")
    one_more = str(TWO_TO_THE_100 + 1)
    assert exact.verify(one_more, written).reward == 0.0
    assert exact.verify(f"{one_more[0]}.{one_more[1:]}e30", written).reward == 0.0
    # the default six significant digits still call them equal
    assert Numeric().verify(one_more, written).reward == 1.0


@pytest.mark.parametrize(
    "completion",
    [
        "1e99999999999999999",  # an exponent of 17 digits: out of range
        "1 \\times 10^{-99999999999999999}",
        "1e" + "9" * 5000,  # past int()'s digit limit
        "So it is \\boxed{1e99999999999999999}",
    ],
)
def test_a_number_out_of_range_scores_zero_never_an_error(completion: str) -> None:
    # an error would leave the row unjudged: a policy unsure of the answer could write one to
    # keep a failure out of its training groups
    for reference in ("5", "0", 1e300):
        verdict = Numeric(abs_tol=1.0).verify(completion, reference)
        assert (verdict.reward, verdict.status) == (0.0, "ok"), verdict
        assert "out of range" in verdict.reason


@pytest.mark.parametrize(
    ("completion", "reference", "reward", "reason"),
    [
        ("1e999999", "1e999999", 1.0, "1e+999999 == 1e+999999"),
        ("9e999999999999999", "-9e999999999999999", 0.0, "9e999999999999999 != -9e999999999999999"),
        ("1e-999999", "0", 0.0, "1e-999999 != 0"),
        ("1e99999%", "1e99997", 1.0, "1e+99997 == 1e+99997"),
        ("1" + "0" * 5000, "1e5000", 1.0, "1e+5000 == 1e+5000"),
    ],
)
def test_huge_and_tiny_numbers_compare_without_overflow(
    completion: str, reference: str, reward: float, reason: str
) -> None:
    verdict = Numeric().verify(completion, reference)
    assert (verdict.reward, verdict.status, verdict.reason) == (reward, "ok", reason)


def test_a_reference_out_of_range_is_an_error() -> None:
    verdict = Numeric().verify("5", "1e99999999999999999")
    assert verdict.status == "error"
    assert "out of range" in verdict.reason


@pytest.mark.parametrize(
    "options",
    [{"rel_tol": -1.0}, {"abs_tol": -0.1}, {"percent": "maybe"}, {"rel_tol": True}],
)
def test_bad_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        Numeric(**options)  # type: ignore[arg-type]


def test_resolved_by_name_with_options_and_recorded_on_the_row() -> None:
    verifier = wai.verify.Numeric(rel_tol=0.01)
    assert isinstance(verifier, Numeric)
    row = {"prompt": "pi?", "final_text": "about 3.14", "privileged": {"reference": "3.14159"}}
    graded = grade_row(row, as_scorer(verifier))
    assert graded["reward"] == 1.0
    assert graded["judge_name"] == "Numeric"
    assert graded["judge_meta"]["version"] == verifier.version
    assert graded["judge_meta"]["options"]["rel_tol"] == 0.01
