"""ExactMatch: string equality after the SQuAD normalisation, each step switchable."""

from __future__ import annotations

import pytest

import whileai as wai
from whileai.scoring import as_scorer, grade_row
from whileai_verifiers.exact import ExactMatch


@pytest.mark.parametrize(
    "completion",
    ["Paris", "paris", "  Paris. ", "The Paris", "PARIS!", "Ｐａｒｉｓ"],
)
def test_default_normalisation_matches(completion: str) -> None:
    verdict = ExactMatch().verify(completion, "Paris")
    assert verdict.reward == 1.0, verdict
    assert verdict.reason == "matches 'Paris'"


def test_whitespace_is_collapsed_inside_the_answer() -> None:
    assert ExactMatch().verify("New   York\nCity", "new york city").reward == 1.0


def test_a_different_answer_says_what_it_compared() -> None:
    verdict = ExactMatch().verify("Lyon", "Paris")
    assert (verdict.reward, verdict.status) == (0.0, "ok")
    assert verdict.reason == "'lyon' does not match 'Paris' after normalisation"


def test_each_normalisation_can_be_switched_off() -> None:
    assert ExactMatch(ignore_case=False).verify("paris", "Paris").reward == 0.0
    assert ExactMatch(ignore_punctuation=False).verify("Paris.", "Paris").reward == 0.0
    assert ExactMatch(ignore_articles=False).verify("the Paris", "Paris").reward == 0.0
    assert ExactMatch(unicode_normalize=None).verify("Ｐａｒｉｓ", "Paris").reward == 0.0
    strict = ExactMatch(
        ignore_case=False,
        ignore_punctuation=False,
        ignore_articles=False,
        collapse_whitespace=False,
        strip=False,
        unicode_normalize=None,
    )
    assert strict.verify(" Paris", "Paris").reward == 0.0
    assert strict.verify("Paris", "Paris").reward == 1.0


def test_strip_without_collapsing_keeps_inner_whitespace() -> None:
    verifier = ExactMatch(collapse_whitespace=False)
    assert verifier.verify("  new york ", "new york").reward == 1.0
    assert verifier.verify("new  york", "new york").reward == 0.0


def test_articles_are_words_not_letters() -> None:
    # "an" inside "answer" or "the" inside "theory" stays.
    assert ExactMatch().verify("theory", "ory").reward == 0.0
    assert ExactMatch().verify("an apple", "apple").reward == 1.0


def test_any_of_several_references() -> None:
    verdict = ExactMatch().verify("NYC", ["New York", "nyc"])
    assert verdict.reward == 1.0
    missed = ExactMatch().verify("LA", ["New York", "nyc"])
    assert missed.reason == "'la' does not match 'any of 2' after normalisation"


def test_numbers_as_references_compare_as_text() -> None:
    assert ExactMatch().verify("42", 42).reward == 1.0


def test_missing_reference_is_an_error_not_a_zero() -> None:
    verdict = ExactMatch().verify("Paris", None)
    assert (verdict.reward, verdict.status) == (None, "error")


def test_bad_unicode_form_is_refused() -> None:
    with pytest.raises(ValueError, match="unicode_normalize"):
        ExactMatch(unicode_normalize="NFX")


def test_resolved_by_name_and_alias_with_its_options_on_the_row() -> None:
    verifier = wai.verify.ExactMatch(ignore_case=False)
    assert isinstance(wai.verify.get("exact_match"), ExactMatch)
    row = {
        "prompt": "Capital of France?",
        "final_text": "Paris",
        "privileged": {"reference": "Paris"},
    }
    graded = grade_row(row, as_scorer(verifier))
    assert (graded["reward"], graded["judge_name"]) == (1.0, "ExactMatch")
    assert graded["judge_meta"]["options"]["ignore_case"] is False
    assert graded["judge_meta"]["version"] == verifier.version


@pytest.mark.parametrize("completion", ["", "the", "An", ".", "a the", "  ?! "])
def test_a_letter_answer_is_not_matched_by_nothing(completion: str) -> None:
    # Multiple-choice references are letters; "A" is also an article. Stripping it to "" would
    # let an empty completion, or one that says only "the", pass.
    verdict = ExactMatch().verify(completion, "A")
    assert verdict.reward == 0.0, verdict


@pytest.mark.parametrize("completion", ["A", "a", "a.", "(A)", " A "])
def test_a_letter_answer_still_matches_its_letter(completion: str) -> None:
    assert ExactMatch().verify(completion, "A").reward == 1.0


def test_the_other_letters_are_told_apart() -> None:
    assert ExactMatch().verify("B", "A").reward == 0.0
    assert ExactMatch().verify("A", ["B", "C"]).reward == 0.0


def test_an_empty_reference_is_matched_by_an_empty_answer_only() -> None:
    # SQuAD 2.0 marks an unanswerable question with an empty reference.
    assert ExactMatch().verify("", "").reward == 1.0
    assert ExactMatch().verify("   ", "").reward == 1.0
    assert ExactMatch().verify("...", "").reward == 0.0
    assert ExactMatch().verify("the", "").reward == 0.0


def test_a_reference_of_articles_only_is_kept_whole() -> None:
    assert ExactMatch().verify("The The", "the the").reward == 1.0
    assert ExactMatch().verify("", "The The").reward == 0.0
