"""Counts in messages read as English for a count of one; a mistyped name is met with the
names it may have meant."""

import re
from collections.abc import Callable

import pytest

from whileai.backends import Sampling
from whileai.faults import coerce_fault_plan
from whileai.schema.wording import agreeing, counted, did_you_mean, named_with_close, plural_of


@pytest.mark.parametrize(
    ("noun", "plural"),
    [
        ("row", "rows"),
        ("task", "tasks"),
        ("entry", "entries"),
        ("key", "keys"),
        ("day", "days"),
        ("batch", "batches"),
        ("pass", "passes"),
        ("box", "boxes"),
        ("y", "ys"),
    ],
)
def test_regular_plurals(noun: str, plural: str) -> None:
    assert plural_of(noun) == plural


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert counted(1, "row") == "1 row"
    assert counted(0, "row") == "0 rows"
    assert counted(2, "row") == "2 rows"
    assert counted(-1, "row") == "-1 rows"


def test_an_irregular_plural_and_a_number_format() -> None:
    assert counted(3, "analysis", "analyses") == "3 analyses"
    assert counted(1, "analysis", "analyses") == "1 analysis"
    assert counted(12_000, "row", spec=",") == "12,000 rows"
    assert counted(1, "row", spec=",") == "1 row"


def test_a_verb_agrees_with_its_count() -> None:
    assert f"{counted(1, 'row')} {agreeing(1, 'has', 'have')} no reward" == "1 row has no reward"
    assert f"{counted(4, 'row')} {agreeing(4, 'has', 'have')} no reward" == "4 rows have no reward"


def test_a_report_on_one_task_speaks_of_one_task_and_one_row() -> None:
    import whileai as wai

    one = wai.rows(["What is 2 + 3?"], [["5"]], [[1.0]])
    text = str(wai.metric_summary(one).metrics["reward"])
    assert "over 1 task, 1 row" in text
    assert "1 tasks" not in text and "1 rows" not in text
    two = wai.rows(
        ["What is 2 + 3?", "What is 7 * 6?"], [["5", "4"], ["42", "41"]], [[1, 0], [1, 0]]
    )
    assert "over 2 tasks, 4 rows" in str(wai.metric_summary(two).metrics["reward"])


def test_a_typo_is_answered_with_the_names_it_may_have_meant() -> None:
    assert did_you_mean("uniqe", ["unique", "repeats"]) == " (did you mean 'unique'?)"
    assert did_you_mean("colour", ["unique", "repeats"]) == ""
    assert (
        named_with_close(["uniqe", "colour"], ["unique", "repeats"])
        == "'uniqe' (did you mean 'unique'?), 'colour'"
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: Sampling.coerce({"temprature": 0.5}),
            "sampling has unknown keys 'temprature' (did you mean 'temperature'?)",
        ),
        (
            lambda: coerce_fault_plan({"kinds": "timeout", "rat": 0.2}),
            "fault_plan has unknown keys 'rat' (did you mean 'rate'?)",
        ),
    ],
)
def test_a_mapping_with_a_mistyped_key_names_the_key_it_may_have_meant(
    call: Callable[[], object], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
