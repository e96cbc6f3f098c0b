"""MathEqual against math-verify called directly, on the same labelled pairs.

    python3 dev.py bench bench_mathequal            # all 1,372 pairs
    python3 dev.py bench bench_mathequal --quick    # every 10th pair

The pairs (benchmarks/data/mathequal_pairs.jsonl, see make_mathequal_pairs.py there) are GSM8K
answers written in many forms and LaTeX equivalences and non-equivalences, each labelled equal
or not. For each side it prints agreement with the labels, then pairs per second, for the
GSM8K-style answers and for the LaTeX ones. math-verify is called as its README shows,
``verify(parse(gold), parse(answer))`` with its default (signal-based) timeouts, in the main
thread where those work; MathEqual runs with its defaults (a 5 s deadline enforced by worker
processes, which work in any thread). Both are warmed up on a pair outside the set first, so
neither pays its import or worker start-up inside the timing.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import ratio_line, timed

DATA = Path(__file__).resolve().parent / "data" / "mathequal_pairs.jsonl"
# GSM8K-style pairs are what the fast path is for: at least ten times math-verify called
# directly, at equal or better agreement with the labels.
TARGET_GSM8K_SPEEDUP = 10.0
# LaTeX pairs: at least three times math-verify, at equal or better agreement, grading the
# set as a batch (``verify_many``, what ``wai.rows`` does) with both sides warm (a second pass,
# as grading k completions per reference is). Exact rationals (``\frac{36}{2}`` against 18)
# are decided without it; the rest go through it with each reference parsed once per worker,
# the workers at once. The cold first pass, one pair at a time and batched, is printed for
# information.
TARGET_LATEX_SPEEDUP = 3.0


def load(quick: bool) -> list[dict[str, Any]]:
    pairs = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    return pairs[::10] if quick else pairs


def math_verify_direct() -> Callable[[str, str], bool | None]:
    from math_verify import parse, verify

    def judge(completion: str, reference: str) -> bool | None:
        return bool(verify(parse(f"${reference}$"), parse(completion)))

    return judge


def math_equal(**options: Any) -> tuple[Callable[[str, str], bool | None], Any]:
    from whileai_verifiers.mathequal import MathEqual

    verifier = MathEqual(**options)

    def judge(completion: str, reference: str) -> bool | None:
        verdict = verifier.verify(completion, reference)
        return None if verdict.reward is None else verdict.reward == 1.0

    return judge, verifier


def run(judge: Callable[[str, str], bool | None], pairs: list[dict[str, Any]]) -> list[Any]:
    return [judge(p["completion"], p["reference"]) for p in pairs]


def run_batch(verifier: Any, pairs: list[dict[str, Any]]) -> list[Any]:
    verdicts = verifier.verify_many([(p["completion"], p["reference"]) for p in pairs])
    return [None if v.reward is None else v.reward == 1.0 for v in verdicts]


def agreement(decisions: list[Any], pairs: list[dict[str, Any]]) -> float:
    right = sum(d is p["equal"] for d, p in zip(decisions, pairs, strict=True))
    return right / len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every 10th pair")
    parser.add_argument("--show", type=int, default=8, help="disagreements to list per side")
    args = parser.parse_args()
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    pairs = load(args.quick)
    ours, verifier = math_equal()
    in_process, _ = math_equal(timeout=None)
    peer = math_verify_direct()
    # Warm every path before timing: a pair only math-verify decides starts MathEqual's
    # workers (and loads math-verify's grammar everywhere), then one for each fast path.
    for judge in (ours, in_process, peer):
        judge("$\\sqrt{4}$", "2")
        judge("$\\frac{1}{3}$", "\\frac{2}{6}")
        judge("#### 7", "7")

    print(f"MathEqual vs math-verify: {len(pairs)} labelled pairs ({DATA.name})")
    for kind in ("gsm8k", "latex", "all"):
        subset = [p for p in pairs if kind in ("all", p["kind"])]
        ours_t = timed("MathEqual", functools.partial(run, ours, subset))
        peer_t = timed("math-verify", functools.partial(run, peer, subset))
        ours_agree = agreement(ours_t.result, subset)
        peer_agree = agreement(peer_t.result, subset)
        print(f"\n[{kind}] {len(subset)} pairs")
        print(
            f"  agreement with labels: MathEqual {ours_agree:.1%}  math-verify {peer_agree:.1%}"
            f"  ({'met' if ours_agree >= peer_agree else 'NOT met'}: at least as high)"
        )
        one_target = TARGET_GSM8K_SPEEDUP if kind == "gsm8k" else None
        print(
            "  "
            + ratio_line(
                "pairs, one at a time" + ("" if one_target else " (information)"),
                ours_t.rate(len(subset)),
                peer_t.rate(len(subset)),
                "math-verify",
                target=one_target,
            )
        )
        # a fresh verifier: its workers have parsed none of these references yet
        _, batch_verifier = math_equal()
        batch_verifier.verify("$\\sqrt{4}$", "2")
        batch_verifier.verify_many([("$\\sqrt{9}$", "3"), ("$\\sqrt{16}$", "4")])
        batch_t = timed(
            "MathEqual.verify_many", functools.partial(run_batch, batch_verifier, subset)
        )
        batch_agree = agreement(batch_t.result, subset)
        print(
            "  "
            + ratio_line(
                f"pairs, as a batch, cold (verify_many, agreement {batch_agree:.1%}) (information)",
                batch_t.rate(len(subset)),
                peer_t.rate(len(subset)),
                "math-verify",
            )
        )
        if kind == "latex":
            # The target's line: a second pass over the same pairs with both sides warm
            # (math-verify's parser and sympy caches in this process; MathEqual's workers and
            # the references they parsed), as grading k completions per reference is. The
            # first pass above pays each parser's first sight of every construct.
            peer_warm = timed("math-verify", functools.partial(run, peer, subset))
            batch_warm = timed(
                "MathEqual.verify_many", functools.partial(run_batch, batch_verifier, subset)
            )
            warm_agree = agreement(batch_warm.result, subset)
            peer_warm_agree = agreement(peer_warm.result, subset)
            print(
                "  "
                + ratio_line(
                    f"pairs, as a batch, both warm (agreement {warm_agree:.1%} vs "
                    f"{peer_warm_agree:.1%})",
                    batch_warm.rate(len(subset)),
                    peer_warm.rate(len(subset)),
                    "math-verify",
                    target=TARGET_LATEX_SPEEDUP if warm_agree >= peer_warm_agree else None,
                )
            )
        batch_verifier.close()
        if kind == "latex":
            # What the deadline costs: the slow path through a worker process against the same
            # path in this thread with no deadline, both with every cache warm (second pass).
            run(in_process, subset)
            warm = timed("MathEqual", functools.partial(run, ours, subset))
            bare = timed("MathEqual(timeout=None)", functools.partial(run, in_process, subset))
            line = ratio_line(
                "warm slow path, worker vs in-process",
                warm.rate(len(subset)),
                bare.rate(len(subset)),
                "in-process",
            )
            print("  " + line)
        if kind == "all":
            for name, decisions in (("MathEqual", ours_t.result), ("math-verify", peer_t.result)):
                wrong = [
                    (p, d) for p, d in zip(subset, decisions, strict=True) if d is not p["equal"]
                ]
                print(f"  {name} disagrees with the label on {len(wrong)}:")
                for p, d in wrong[: args.show]:
                    print(
                        f"    label {p['equal']!s:5} said {d!s:5} [{p['form']}] "
                        f"{p['reference']!r} vs {p['completion'][:60]!r}"
                    )
    verifier.close()


if __name__ == "__main__":
    main()
