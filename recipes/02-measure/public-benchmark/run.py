"""Measure a model on a public benchmark, offline: 200 GSM8K test questions.

The embedded model (``local:smollm2``) answers every question under two prompt variants, three
sampled passes each (different seeds, temperature 0.7); ``wai.evaluate`` asks the questions and
MathEqual grades each answer against the GSM8K reference. Then the measurements a change of prompt needs before
anyone believes it:

- ``wai.pass_at`` for each variant,
- ``wai.eval_variance`` over the three passes of the plain prompt: how far the number moves
  when nothing changes,
- ``wai.holdout_size`` from those rows: how many tasks a gain of ``--effect`` needs,
- ``wai.compare`` of the step-by-step prompt against the plain one, paired by question, with
  the noise floor handed in.

Run it from the repository root::

    .venv/bin/python recipes/02-measure/public-benchmark/run.py            # all 200, ~30 min on 2 idle cores
    .venv/bin/python recipes/02-measure/public-benchmark/run.py --limit 20

The questions and their licence sit beside this file (the first 200 lines of the GSM8K test
split, MIT), so nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

import whileai as wai
from whileai.backends import Backend, resolve_backend

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "gsm8k_test_200.jsonl"

#: The two prompt variants compared: the question as asked, and the question with an
#: instruction to reason first and write the answer the way GSM8K references end.
VARIANTS = {
    "plain": "{question}",
    "step-by-step": (
        "{question}\n\nThink step by step. Then write the final answer on its own line as "
        "#### <number>"
    ),
}
#: Sampled, not greedy: eval_variance measures how much the number moves between passes.
TEMPERATURE = 0.7
SEEDS = (1, 2, 3)


@attrs.frozen
class Question:
    task_id: str
    question: str
    #: the number after "####" in the GSM8K answer
    gold: str


@attrs.frozen
class Pass:
    """One variant answered once, every question, under one seed."""

    variant: str
    seed: int
    rows: list[dict[str, Any]]
    seconds: float
    output_tokens: int


def load_questions(limit: int, path: Path = QUESTIONS) -> list[Question]:
    """The first ``limit`` questions, each with its gold number and a stable task id."""
    questions = []
    with path.open(encoding="utf-8") as lines:
        for index, line in enumerate(lines):
            if index == limit:
                break
            item = json.loads(line)
            answer = item["answer"]
            if "####" not in answer:
                raise ValueError(f"{path.name} line {index + 1}: the answer has no '#### <number>'")
            gold = answer.rsplit("####", 1)[1].strip()
            questions.append(Question(f"gsm8k-test-{index:04d}", item["question"], gold))
    return questions


def run_pass(
    backend: Backend,
    questions: Sequence[Question],
    variant: str,
    seed: int,
    *,
    max_tokens: int,
    concurrency: int,
) -> Pass:
    """Every question answered once under ``seed`` and graded by MathEqual. ``wai.evaluate``
    gives each answer its own seed, derived from the pass seed and the question, so a pass is
    reproducible and its questions do not share one random stream."""
    started = time.perf_counter()
    scored = wai.evaluate(
        backend,
        [VARIANTS[variant].format(question=q.question) for q in questions],
        references=[q.gold for q in questions],
        task_ids=[q.task_id for q in questions],
        judge=wai.verify.MathEqual(),
        repeats=1,
        sampling={"temperature": TEMPERATURE, "max_tokens": max_tokens},
        concurrency=concurrency,
        seed=seed,
    )
    seconds = time.perf_counter() - started
    rows = list(scored.rows)
    for row in rows:
        # measured on every answer, so compare and eval_variance report them beside reward
        row["markers"] = {
            "output_tokens": (row.get("usage") or {}).get("output_tokens") or 0,
            "truncated": float(bool(row.get("truncated"))),
        }
    tokens = sum(int(row["markers"]["output_tokens"]) for row in rows)
    return Pass(variant, seed, rows, seconds, tokens)


def section(title: str) -> None:
    print(f"\n== {title} ==")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--limit", type=int, default=200, help="answer the first N questions (1-200; default 200)"
    )
    parser.add_argument("--max-tokens", type=int, default=256, help="reply cap (default 256)")
    parser.add_argument(
        "--concurrency", type=int, default=8, help="calls in flight at once (default 8)"
    )
    parser.add_argument(
        "--effect", type=float, default=0.10, help="gain holdout_size sizes for (default 0.10)"
    )
    parser.add_argument(
        "--model", default="local:smollm2", help="backend spec (default local:smollm2, offline)"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.limit <= 200:
        parser.error(f"--limit must be between 1 and 200, got {args.limit}")
    if args.max_tokens < 1:
        parser.error(f"--max-tokens must be positive, got {args.max_tokens}")
    if args.concurrency < 1:
        parser.error(f"--concurrency must be positive, got {args.concurrency}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    questions = load_questions(args.limit)
    backend = resolve_backend(args.model)
    print(
        f"GSM8K test, first {len(questions)} questions, answered by {backend.name}; "
        f"temperature {TEMPERATURE}, max_tokens {args.max_tokens}, seeds "
        f"{', '.join(map(str, SEEDS))}, {args.concurrency} calls in flight"
    )
    passes: dict[str, list[Pass]] = {variant: [] for variant in VARIANTS}
    for variant in VARIANTS:
        for seed in SEEDS:
            done = run_pass(
                backend,
                questions,
                variant,
                seed,
                max_tokens=args.max_tokens,
                concurrency=args.concurrency,
            )
            passes[variant].append(done)
            solved = sum(1 for row in done.rows if row["reward"] == 1)
            failed = sum(1 for row in done.rows if row.get("error"))
            print(
                f"  {variant:>12} seed {seed}: {solved}/{len(done.rows)} correct, "
                f"{done.output_tokens} tokens in {done.seconds:.1f} s "
                f"({done.output_tokens / done.seconds:.0f} tokens/s)"
                + (f", {failed} model calls failed (no reward)" if failed else ""),
                flush=True,
            )

    plain = [row for p in passes["plain"] for row in p.rows]
    steps = [row for p in passes["step-by-step"] for row in p.rows]

    for variant, rows in (("plain", plain), ("step-by-step", steps)):
        section(f"pass_at: {variant} prompt, {len(SEEDS)} samples per question")
        print(wai.pass_at(rows))

    section(f"eval_variance: the plain prompt, {len(SEEDS)} passes")
    floor = wai.eval_variance(*(p.rows for p in passes["plain"]))
    print(floor)

    section(f"holdout_size: questions needed to detect {args.effect:+.2f} over the plain prompt")
    print(wai.holdout_size(args.effect, k=len(SEEDS), before=plain))

    section("compare: step-by-step against plain, paired by question")
    # Three run means can agree by chance on a score this low (run_std 0); the tasks' own
    # spread across the passes is then the noise to hold the delta against.
    run_std = floor["run_std"] or floor["task_run_std"]
    print(wai.compare(plain, steps, run_std=run_std, run_std_runs=floor["n_runs"]))

    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
