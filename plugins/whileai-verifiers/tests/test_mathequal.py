"""MathEqual: GSM8K answers on the fast path, LaTeX through math-verify, deadlines that hold."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import whileai as wai
from whileai.scoring import as_scorer, grade_row
from whileai_verifiers.mathequal import MathEqual

# A power tower math-verify evaluates for minutes: what a deadline is for.
HANGS = "$9^{9^{9^{9}}}$"


@pytest.fixture(scope="module")
def math_equal() -> Iterator[MathEqual]:
    verifier = MathEqual(timeout=30.0, workers=1)
    yield verifier
    verifier.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child that was reaped is gone; one not yet reaped shows as a zombie.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize(
    "completion",
    [
        "#### 18",
        "The answer is 18.",
        "$18.00",
        "18",
        "18.0",
        "She makes 9 * 2 = $18 every day.\n#### 18",
        "Answer: 18",
        "\\boxed{18}",
        "so she pays 3 * 6 = 18 dollars",
        "The answer is **18**.",
        "18 cm",
    ],
)
def test_gsm8k_style_answers_equal_the_gold_number(completion: str) -> None:
    verdict = MathEqual().verify(completion, "18")
    assert verdict.reward == 1.0, verdict
    assert verdict.reason == "18 == 18"
    assert verdict.meta["path"] == "fast"


@pytest.mark.parametrize(
    ("completion", "reference"),
    [
        ("1,000", "1000"),
        ("#### 1,000", "1000"),
        ("$1,450,000", "1,450,000"),
        ("-5", "-5"),
        ("70e3", "70,000"),
        ("1.5e-3", "0.0015"),
    ],
)
def test_thousands_separators_and_signs_on_the_fast_path(completion: str, reference: str) -> None:
    assert MathEqual().verify(completion, reference).reward == 1.0


@pytest.mark.parametrize(
    ("completion", "reason"),
    [
        ("#### 17", "17 != 18"),
        ("The answer is 18.5.", "18.5 != 18"),
        ("I first got 18, then 17", "17 != 18"),
        ("-18", "-18 != 18"),
        (".18", "0.18 != 18"),
    ],
)
def test_a_different_number_is_not_equal_and_says_both(completion: str, reason: str) -> None:
    verdict = MathEqual().verify(completion, "18")
    assert (verdict.reward, verdict.status, verdict.reason) == (0.0, "ok", reason)


def test_a_power_written_with_stars_is_not_read_as_bold(math_equal: MathEqual) -> None:
    verdict = math_equal.verify("3**2", "9")
    assert verdict.meta["path"] == "math-verify"
    assert verdict.reward == 1.0


def test_exact_decimals_do_not_round() -> None:
    assert MathEqual().verify("18.000001", "18").reward == 0.0
    assert MathEqual().verify("0.1", "0.10").reward == 1.0


def test_equal_strings_need_no_parsing() -> None:
    verdict = MathEqual().verify("\\frac{1}{2}", "\\frac{1}{2}")
    assert verdict.reward == 1.0
    assert verdict.meta["path"] == "fast"
    # A comma's reading depends on its context (a set, a decimal, an interval): math-verify's.
    interval = MathEqual().verify("[1,2)", "[1,2)")
    assert (interval.reward, interval.meta["path"]) == (1.0, "math-verify")


@pytest.mark.parametrize(
    ("completion", "reference", "reward"),
    [
        ("x^2+2x+1", "(x+1)^2", 1.0),
        ("10\\sqrt3 + \\sqrt{4}", "10\\sqrt{3}+2", 1.0),
        ("10\\sqrt3 + \\sqrt{4}", "10", 0.0),
        ("\\frac{3}{4}i", "3/4", 0.0),
        ("1 000", "1000", 1.0),
    ],
)
def test_a_bare_completion_is_read_as_one_expression(
    completion: str, reference: str, reward: float
) -> None:
    assert MathEqual(timeout=None).verify(completion, reference).reward == reward


def test_math_verify_options_are_passed_through() -> None:
    assert MathEqual(timeout=None).verify("$x \\leq 3$", "(-\\infty, 3]").reward == 0.0
    relaxed = MathEqual(timeout=None, allow_set_relation_comp=True)
    assert relaxed.verify("$x \\leq 3$", "(-\\infty, 3]").reward == 1.0
    latex_only = MathEqual(timeout=None, extraction="latex")
    assert latex_only.verify("The answer is $\\frac{1}{2}$", "0.5").reward == 1.0
    assert latex_only.fast_path is False
    assert latex_only.meta["options"]["extraction"] == "latex"
    coarse = MathEqual(timeout=None, float_rounding=2, fast_path=False)
    assert coarse.verify("$3.14159$", "3.14").reward == 1.0
    assert MathEqual(timeout=None, fast_path=False).verify("$3.14159$", "3.14").reward == 0.0
    with pytest.raises(ValueError, match="extraction must be 'any' or 'latex'"):
        MathEqual(extraction="text")
    with pytest.raises(ValueError, match="float_rounding must be a whole number"):
        MathEqual(float_rounding=-1)


@pytest.mark.parametrize(
    ("completion", "reference"),
    [
        ("The answer is $\\frac{3}{4}$", "0.75"),
        ("\\boxed{\\frac{1}{2}}", "1/2"),
        ("$\\frac{1}{\\sqrt{2}}$", "\\frac{\\sqrt{2}}{2}"),
        ("$(x+1)^2$", "x^2+2x+1"),
        ("$\\{2, 1\\}$", "\\{1,2\\}"),
        ("$[1, 2)$", "[1,2)"),
        ("50%", "0.5"),
        ("$10\\%$", "0.1"),
        ("$5\\text{ cm}$", "5"),
        ("1 000", "1000"),
        ("The answer is 3 / 4", "0.75"),
        ("The answer is 10 - 4", "6"),
    ],
)
def test_math_verify_decides_what_the_fast_path_cannot(
    math_equal: MathEqual, completion: str, reference: str
) -> None:
    verdict = math_equal.verify(completion, reference)
    assert verdict.reward == 1.0, verdict
    assert verdict.meta["path"] == "math-verify"
    assert verdict.reason is not None and verdict.reason.endswith(": equal")


@pytest.mark.parametrize(
    ("completion", "reference"),
    [
        ("0.8", "\\frac{3}{4}"),
        ("$[1,2)$", "(1,2]"),
        ("$\\{1,3\\}$", "\\{1,2\\}"),
        ("$(x+1)^3$", "x^2+2x+1"),
        ("\\boxed{\\sqrt{3}}", "\\frac{3}{4}"),
    ],
)
def test_math_verify_non_equivalences(
    math_equal: MathEqual, completion: str, reference: str
) -> None:
    verdict = math_equal.verify(completion, reference)
    assert (verdict.reward, verdict.status) == (0.0, "ok"), verdict
    assert verdict.reason is not None and verdict.reason.endswith(": not equal")


@pytest.mark.parametrize(
    "completion",
    [
        "\\boxed{18, 19}",
        "\\boxed{18 or 19}",
        "\\boxed{18 and 19}",
        "\\boxed{18; 19}",
        "\\boxed{x = 18, x = 19}",
    ],
)
def test_a_box_holding_two_numbers_is_credited_for_neither(
    math_equal: MathEqual, completion: str
) -> None:
    # math-verify reads a box whole ({18, 19}, a hedge): the fast path once credited its first
    # number, so a policy unsure of the answer could box both and be paid when the first was it
    for reference in ("18", "19"):
        verdict = math_equal.verify(completion, reference)
        assert (verdict.reward, verdict.status) == (0.0, "ok"), (reference, verdict)
        assert verdict.meta["path"] == "math-verify"
    # as the set it is, it is graded as math-verify grades it
    slow = MathEqual(timeout=None, fast_path=False).verify(completion, "\\{18, 19\\}")
    assert math_equal.verify(completion, "\\{18, 19\\}").reward == slow.reward


def test_integers_longer_than_decimals_default_precision_on_the_fast_path(
    math_equal: MathEqual,
) -> None:
    written = str(2**100)  # 31 digits
    slow = MathEqual(timeout=None, fast_path=False)
    for completion, reward in ((f"The answer is {written}.", 1.0), (f"#### {2**100 + 1}", 0.0)):
        verdict = math_equal.verify(completion, 2**100)
        assert (verdict.reward, verdict.meta["path"]) == (reward, "fast"), verdict
        assert slow.verify(completion, 2**100).reward == reward


@pytest.mark.parametrize(
    "completion",
    [
        "The answer is 1e999999.",  # past Decimal's default exponent range
        "#### 1e99999999999",
        "\\boxed{1e99999999999999999}",  # an exponent of 17 digits: math-verify decides
        "The answer is 1e" + "9" * 5000,  # past int()'s digit limit
        "#### 1" + "0" * 5000,
        "\\boxed{\\frac{1}{1" + "0" * 5000 + "}}",
    ],
)
def test_huge_numbers_in_an_answer_score_zero_never_an_error(
    math_equal: MathEqual, completion: str
) -> None:
    # an error would leave the row unjudged: a policy unsure of the answer could write one to
    # keep a failure out of its training groups
    verdict = math_equal.verify(completion, "5")
    assert (verdict.reward, verdict.status) == (0.0, "ok"), verdict


def test_reason_shows_what_each_side_parsed_to(math_equal: MathEqual) -> None:
    assert math_equal.verify("0.8", "\\frac{3}{4}").reason == "parsed 0.8 vs 3/4: not equal"


def test_no_answer_in_the_completion_scores_zero_and_says_so(math_equal: MathEqual) -> None:
    verdict = math_equal.verify("I do not know.", "\\frac{3}{4}")
    assert (verdict.reward, verdict.status) == (0.0, "ok")
    assert "no answer found" in (verdict.reason or "")


def test_an_unparseable_reference_is_an_error_not_a_zero(math_equal: MathEqual) -> None:
    verdict = math_equal.verify("42", "\\frac{")
    assert verdict.status == "error"
    assert verdict.reward is None
    assert "could not parse the reference" in (verdict.reason or "")


def test_missing_reference_is_an_error() -> None:
    verdict = MathEqual().verify("18", None)
    assert verdict.status == "error"
    assert "no reference" in (verdict.reason or "")


def test_any_of_several_references(math_equal: MathEqual) -> None:
    assert MathEqual().verify("#### 7", ["6", "7"]).reward == 1.0
    assert math_equal.verify("$\\frac{1}{2}$", ["0.25", "0.5"]).reward == 1.0


def test_numbers_as_references() -> None:
    assert MathEqual().verify("The answer is 42.", 42).reward == 1.0
    assert MathEqual().verify("The answer is 0.5", 0.5).reward == 1.0


def test_a_deadline_kills_the_stuck_worker_and_the_next_call_works() -> None:
    with MathEqual(timeout=2.0, workers=1) as verifier:
        verdict = verifier.verify(HANGS, "1")
        assert (verdict.reward, verdict.status, verdict.reason) == (
            None,
            "error",
            "timeout after 2.0s",
        )
        assert verifier.worker_pids == []
        assert verifier.verify("$\\sqrt{4}$", "2").reward == 1.0


def test_on_timeout_fail_scores_zero_with_the_reason() -> None:
    with MathEqual(timeout=2.0, workers=1, on_timeout="fail") as verifier:
        verdict = verifier.verify(HANGS, "1")
    assert (verdict.reward, verdict.status, verdict.reason) == (0.0, "ok", "timeout after 2.0s")


def test_the_deadline_holds_in_worker_threads(math_equal: MathEqual) -> None:
    with (
        MathEqual(timeout=2.0, workers=1) as verifier,
        concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool,
    ):
        stuck = pool.submit(verifier.verify, HANGS, "1")
        fine = pool.submit(math_equal.verify, "$\\sqrt{4}$", "2")
        assert stuck.result().reason == "timeout after 2.0s"
        assert fine.result().reward == 1.0


def _verify_in_a_child(completion: str) -> tuple[float | None, str | None]:
    with MathEqual(timeout=2.0, workers=1) as verifier:
        verdict = verifier.verify(completion, "1")
    return verdict.reward, verdict.reason


@pytest.mark.slow
def test_the_deadline_holds_in_daemonic_worker_processes() -> None:
    # multiprocessing.Pool workers are daemonic: they may not start multiprocessing children,
    # which is why MathEqual's workers are plain subprocesses.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_verify_in_a_child, (HANGS,)) == (None, "timeout after 2.0s")


def test_close_leaves_no_worker_running() -> None:
    verifier = MathEqual(timeout=10.0, workers=1)
    # A pair only math-verify decides, so a worker starts.
    assert verifier.verify("$\\sqrt{4}$", "2").reward == 1.0
    (pid,) = verifier.worker_pids
    verifier.close()
    assert not _alive(pid)


ORPHANED = """
from whileai_verifiers.mathequal import MathEqual
verifier = MathEqual(timeout=600.0, workers=1)
verifier.verify("$\\\\sqrt{4}$", "2")
print(verifier.worker_pids[0], flush=True)
verifier.verify("$9^{9^{9^{9}}}$", "1")
"""


@pytest.mark.slow
def test_a_worker_stuck_mid_comparison_dies_with_its_killed_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", ORPHANED], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        assert _alive(worker)
    finally:
        parent.kill()
        parent.wait()
    for _ in range(100):  # the kernel delivers the parent-death signal at once; allow a loaded box
        if not _alive(worker):
            break
        time.sleep(0.1)
    assert not _alive(worker)


def test_a_worker_killed_while_idle_is_replaced(math_equal: MathEqual) -> None:
    assert math_equal.verify("$\\sqrt{4}$", "2").reward == 1.0
    (pid,) = math_equal.worker_pids
    os.kill(pid, signal.SIGKILL)
    assert math_equal.verify("$\\sqrt{9}$", "3").reward == 1.0
    assert math_equal.worker_pids != [pid]


def test_timeout_none_runs_math_verify_in_the_calling_thread() -> None:
    verifier = MathEqual(timeout=None)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        verdict = pool.submit(verifier.verify, "$\\sqrt{4}$", "2").result()
    assert (verdict.reward, verdict.meta["path"]) == (1.0, "math-verify")
    assert verifier.worker_pids == []


def test_a_verifier_pickles_without_its_workers(math_equal: MathEqual) -> None:
    math_equal.verify("$\\sqrt{4}$", "2")
    assert math_equal.worker_pids
    copy = pickle.loads(pickle.dumps(math_equal))
    assert copy.worker_pids == []
    assert copy.verify("#### 3", "3").reward == 1.0


@pytest.mark.parametrize(
    "options",
    [{"timeout": 0}, {"timeout": -1.0}, {"workers": 0}, {"on_timeout": "ignore"}],
)
def test_bad_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        MathEqual(**options)  # type: ignore[arg-type]


def test_resolved_by_name_and_graded_through_the_one_path() -> None:
    verifier = wai.verify.MathEqual()
    assert isinstance(verifier, MathEqual)
    assert isinstance(wai.verify.get("math_equal"), MathEqual)
    row = {"prompt": "What is 9 * 2?", "final_text": "#### 18", "privileged": {"reference": "18"}}
    graded = grade_row(row, as_scorer(verifier))
    assert graded["reward"] == 1.0
    assert graded["judge_name"] == "MathEqual"
    assert graded["label_source"] == "verifier"
    meta = graded["judge_meta"]
    assert meta["name"] == "MathEqual"
    assert meta["version"] == verifier.version
    assert meta["math_verify"] == __import__("importlib.metadata").metadata.version("math-verify")


ANSWER_FORMS = [
    "#### {a}",
    "The answer is {a}.",
    "${a}",
    "{a}",
    "\\boxed{{{a}}}",
    "So she has {b} + 1 = {a} apples.",
    "Answer: {a}",
    "**{a}**",
    "I first thought {b}, but it is {a}.",
    "\\boxed{{{a}, {b}}}",
    "\\boxed{{{a} or {b}}}",
    "\\boxed{{{b}; {a}}}",
]


@settings(max_examples=150, deadline=None)
@given(
    gold=st.one_of(st.integers(-(10**6), 10**7), st.decimals("-1000", "1000", places=2)),
    answer=st.one_of(st.integers(-(10**6), 10**7), st.decimals("-1000", "1000", places=2)),
    form=st.sampled_from(ANSWER_FORMS),
    thousands=st.booleans(),
    same=st.booleans(),
)
def test_the_fast_path_agrees_with_math_verify_whenever_it_decides(
    gold: object, answer: object, form: str, thousands: bool, same: bool
) -> None:
    answer = gold if same else answer
    written = f"{answer:,}" if thousands and isinstance(answer, int) else str(answer)
    completion = form.format(a=written, b=7)
    fast = MathEqual(timeout=None).verify(completion, str(gold))
    slow = MathEqual(timeout=None, fast_path=False).verify(completion, str(gold))
    assert fast.reward == slow.reward, (completion, gold, fast, slow)


# Ways people group digits: thousands commas (with a leading zero group too), the decimal
# comma, spaces of several widths, apostrophes, and the period as a thousands mark.
GROUP_MARKS = [",", " ", "\u00a0", "\u202f", "\u2009", "'", "\u2019", "."]


def grouped(digits: str, mark: str) -> str:
    head = len(digits) % 3 or 3
    groups = [digits[:head]] + [digits[i : i + 3] for i in range(head, len(digits), 3)]
    return mark.join(groups)


@settings(max_examples=400, deadline=None)
@given(
    whole=st.text("0123456789", min_size=1, max_size=8),
    fraction=st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=4)),
    group=st.sampled_from(GROUP_MARKS),
    decimal=st.sampled_from([".", ","]),
    sign=st.sampled_from(["", "-"]),
    form=st.sampled_from(ANSWER_FORMS),
    gold_form=st.sampled_from(["plain", "same", "grouped"]),
)
def test_the_fast_path_never_decides_against_math_verify_on_digit_groups(
    whole: str,
    fraction: str,
    group: str,
    decimal: str,
    sign: str,
    form: str,
    gold_form: str,
) -> None:
    written = sign + grouped(whole, group) + (decimal + fraction if fraction else "")
    plain = sign + (whole.lstrip("0") or "0") + ("." + fraction if fraction else "")
    gold = {"plain": plain, "same": written, "grouped": sign + grouped(whole, ",")}[gold_form]
    completion = form.format(a=written, b=7)
    fast = MathEqual(timeout=None).verify(completion, gold)
    if fast.meta.get("path") != "fast":
        return
    slow = MathEqual(timeout=None, fast_path=False).verify(completion, gold)
    assert fast.reward == slow.reward, (completion, gold, fast.reason, slow.reason)


@pytest.mark.parametrize(
    ("completion", "reference"),
    [
        ("0,111", "0.111"),
        ("-0,250", "-0.25"),
        ("The answer is 0,125", "0.125"),
        ("0.111", "0,111"),
        ("00,111", "0.111"),
        ("1'000", "1000"),
    ],
)
def test_decimal_commas_and_apostrophes_are_read_as_math_verify_reads_them(
    completion: str, reference: str
) -> None:
    fast = MathEqual(timeout=None).verify(completion, reference)
    slow = MathEqual(timeout=None, fast_path=False).verify(completion, reference)
    assert fast.reward == slow.reward == 1.0, (fast, slow)
    assert fast.meta["path"] == "math-verify"


RATIONAL_FORMS = [
    "{a}",
    "${a}$",
    "\\boxed{{{a}}}",
    "$\\boxed{{{a}}}$",
    "${a}$.",
    "The answer is $\\boxed{{{a}}}$.",
    "$ {a} $",
]


def written_rational(numerator: int, denominator: int, style: str, sign: bool) -> str:
    if style == "decimal":
        body = f"{numerator / max(denominator, 1):.{(denominator % 7) + 1}f}"
    elif style == "int":
        body = str(numerator)
    elif style == "leading zero":
        body = f"0{numerator}"
    else:
        spaced = style == "tfrac"
        body = (
            f"\\{style} {{ {numerator} }}{{ {denominator} }}"
            if spaced
            else f"\\{style}{{{numerator}}}{{{denominator}}}"
        )
    return ("-" if sign else "") + body


@settings(max_examples=300, deadline=None)
@given(
    numerator=st.integers(0, 400),
    denominator=st.integers(0, 12),
    style=st.sampled_from(["frac", "dfrac", "tfrac", "int", "decimal", "leading zero"]),
    sign=st.booleans(),
    form=st.sampled_from(RATIONAL_FORMS),
    gold_numerator=st.integers(0, 400),
    gold_denominator=st.integers(1, 12),
    gold_style=st.sampled_from(["frac", "int", "decimal"]),
    same_value=st.booleans(),
)
def test_the_latex_rational_fast_path_never_decides_against_math_verify(
    numerator: int,
    denominator: int,
    style: str,
    sign: bool,
    form: str,
    gold_numerator: int,
    gold_denominator: int,
    gold_style: str,
    same_value: bool,
) -> None:
    if same_value:
        gold_numerator, gold_denominator = numerator * 2, max(denominator, 1) * 2
    answer = form.format(a=written_rational(numerator, denominator, style, sign))
    gold = written_rational(gold_numerator, gold_denominator, gold_style, sign and same_value)
    fast = MathEqual(timeout=None).verify(answer, gold)
    if fast.meta.get("path") != "fast":
        return
    slow = MathEqual(timeout=None, fast_path=False).verify(answer, gold)
    assert fast.reward == slow.reward, (answer, gold, fast.reason, slow.reason)


@pytest.mark.parametrize(
    ("completion", "reference", "reward", "reason"),
    [
        ("$\\frac{36}{2}$", "18", 1.0, "18 == 18"),
        ("$\\frac{18}{2}$", "18", 0.0, "9 != 18"),
        ("0.75", "\\frac{3}{4}", 1.0, "3/4 == 3/4"),
        ("\\boxed{-\\dfrac{2}{6}}", "-\\frac{1}{3}", 1.0, "-1/3 == -1/3"),
        ("\\boxed{\\frac{2}{3}}", "\\frac{3}{4}", 0.0, "2/3 != 3/4"),
    ],
)
def test_exact_rationals_in_latex_are_decided_without_math_verify(
    completion: str, reference: str, reward: float, reason: str
) -> None:
    verdict = MathEqual(timeout=None).verify(completion, reference)
    assert (verdict.reward, verdict.reason, verdict.meta["path"]) == (reward, reason, "fast")


def test_an_unequal_decimal_is_left_to_math_verifys_rounding() -> None:
    # 0.333333 and 1/3 differ exactly but agree to math-verify's six places.
    verdict = MathEqual(timeout=None).verify("0.333333", "\\frac{1}{3}")
    assert verdict.meta["path"] == "math-verify"
    assert (
        verdict.reward
        == MathEqual(timeout=None, fast_path=False).verify("0.333333", "\\frac{1}{3}").reward
    )


@pytest.mark.parametrize("strict", [True, False])
def test_tuples_are_ordered_and_sets_are_not_as_math_verify_compares_them(strict: bool) -> None:
    math_equal = MathEqual(timeout=None, strict=strict)
    assert math_equal.verify("$(1,2,3)$", "(1,2,3)").reward == 1.0
    assert math_equal.verify("$(3,2,1)$", "(1,2,3)").reward == 0.0
    assert math_equal.verify("$\\{3,2,1\\}$", "\\{1,2,3\\}").reward == 1.0


BATCH = [
    ("$\\frac{6}{8}$", "\\frac{3}{4}"),  # the fast path: exact rationals
    ("#### 18", "18"),  # the fast path: a GSM8K answer
    ("$\\sqrt{12}$", "2\\sqrt{3}"),  # math-verify
    ("$\\{2,1\\}$", "\\{1,2\\}"),  # math-verify
    ("$(x-1)^2$", "x^2+2x+1"),  # math-verify, not equal
    ("$\\pi/2$", "\\frac{\\pi}{2}", "What is a right angle in radians?"),
    ("42", None),  # no reference: an error verdict, as verify gives
]


def test_verify_many_gives_verifys_verdicts_in_order_using_every_worker() -> None:
    with MathEqual(workers=2) as batch, MathEqual(workers=1) as single:
        many = batch.verify_many(BATCH)
        assert len(batch.worker_pids) == 2  # the slow pairs went to both workers at once
        one_by_one = [single.verify(pair[0], pair[1]) for pair in BATCH]
    assert [(v.reward, v.status, v.reason) for v in many] == [
        (v.reward, v.status, v.reason) for v in one_by_one
    ]
    assert [v.reward for v in many] == [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, None]


def test_verify_many_names_a_malformed_pair_before_deciding_any() -> None:
    with MathEqual() as verifier:
        with pytest.raises(ValueError, match=r"pairs\[1\] must be \(completion, reference\)"):
            verifier.verify_many([("1", "1"), "just text"])
        assert verifier.worker_pids == []


def test_rows_grade_a_batch_through_verify_many() -> None:
    with MathEqual(workers=2) as verifier:
        rows = wai.rows(
            [f"q{i}" for i in range(4)],
            ["$\\sqrt{12}$", "$\\{2,1\\}$", "$(x-1)^2$", "#### 7"],
            verifier,
            references=["2\\sqrt{3}", "\\{1,2\\}", "x^2+2x+1", "7"],
        )
        assert len(verifier.worker_pids) == 2
    assert [r["reward"] for r in rows] == [1.0, 1.0, 0.0, 1.0]


def test_requests_naming_a_slot_share_that_slots_worker() -> None:
    from whileai_verifiers._workers import WorkerPool

    pool = WorkerPool("whileai_verifiers._mathworker", 2)
    try:
        payload = {"answer": "$\\sqrt{12}$", "references": ["2\\sqrt{3}"], "options": {}}
        with concurrent.futures.ThreadPoolExecutor(4) as threads:
            replies = list(threads.map(lambda _: pool.request(payload, 30.0, slot=1), range(4)))
        assert all(r["equal"] for r in replies)
        assert len(pool.running) == 1  # four requests at once, one slot: one worker
        with pytest.raises(ValueError, match=r"slot must be in 0\.\.1, got 2"):
            pool.request(payload, 30.0, slot=2)
    finally:
        pool.close()
    assert pool.running == []
