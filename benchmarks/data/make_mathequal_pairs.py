"""Writes mathequal_pairs.jsonl, the labelled set bench_mathequal.py grades.

GSM8K part: answers of the GSM8K test split (../shared/data/gsm8k/test.jsonl, MIT, licence in
GSM8K-LICENSE beside this file): the first 60 questions plus every question whose answer has a
thousands separator, each answer written in many ways a model writes it. A form that states the
gold number is labelled equal; a form whose final answer is another number is labelled not
equal. The labels follow from how each form is built, and were read through by hand.

LaTeX part: hand-written pairs of equivalent and non-equivalent answers (fractions, roots,
polynomials, sets, intervals, percentages, units, boxed answers), and GSM8K numbers written as
LaTeX fractions.

    python benchmarks/data/make_mathequal_pairs.py /path/to/gsm8k/test.jsonl
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("mathequal_pairs.jsonl")

LATEX_EQUAL = [
    ("\\frac{3}{4}", "0.75"),
    ("\\frac{3}{4}", "$\\frac{6}{8}$"),
    ("\\frac{1}{2}", "The answer is $\\boxed{\\frac{1}{2}}$."),
    ("0.5", "\\boxed{\\frac{1}{2}}"),
    ("\\frac{7}{2}", "3.5"),
    ("-\\frac{1}{3}", "$-\\frac{1}{3}$"),
    ("\\dfrac{5}{6}", "$\\frac{5}{6}$"),
    ("\\frac{1}{6}", "$\\frac{2}{12}$"),
    ("\\sqrt{2}", "$\\sqrt{2}$"),
    ("\\frac{\\sqrt{2}}{2}", "$\\frac{1}{\\sqrt{2}}$"),
    ("2\\sqrt{3}", "$\\sqrt{12}$"),
    ("4\\sqrt{2}", "$\\sqrt{32}$"),
    ("x^2+2x+1", "$(x+1)^2$"),
    ("(x-2)(x+2)", "$x^2-4$"),
    ("\\{1,2\\}", "$\\{2,1\\}$"),
    ("\\{1,2,3\\}", "$\\{3, 2, 1\\}$"),
    ("[1,2)", "$[1,2)$"),
    ("(0,\\infty)", "$(0, \\infty)$"),
    ("[-1,1]", "The solution set is $[-1, 1]$."),
    ("\\frac{\\pi}{2}", "$\\pi/2$"),
    ("3\\pi", "$3\\pi$"),
    ("50\\%", "$50\\%$"),
    ("0.5", "$50\\%$"),
    ("10\\%", "0.1"),
    ("5", "$5\\text{ cm}$"),
    ("12", "\\boxed{12\\text{ inches}}"),
    ("2^{10}", "1024"),
    ("3", "$x = 3$"),
    ("\\frac{1}{4}", "Therefore the probability is $\\boxed{0.25}$."),
    ("-2", "$\\boxed{-2}$"),
    ("2\\pi r", "$2 r \\pi$"),
    ("\\frac{a+b}{2}", "$\\frac{b+a}{2}$"),
    ("1.5", "$\\frac{3}{2}$"),
    ("\\sqrt{16}", "4"),
    ("\\frac{10}{4}", "$\\frac{5}{2}$"),
]

LATEX_NOT_EQUAL = [
    ("\\frac{3}{4}", "0.8"),
    ("\\frac{3}{4}", "$\\frac{4}{3}$"),
    ("[1,2)", "$(1,2]$"),
    ("\\{1,2\\}", "$\\{1,3\\}$"),
    ("x^2+2x+1", "$(x-1)^2$"),
    ("\\sqrt{2}", "$\\sqrt{3}$"),
    ("2\\pi", "$\\pi$"),
    ("\\frac{1}{2}", "\\boxed{\\frac{1}{3}}"),
    ("(0,\\infty)", "$[0,\\infty)$"),
    ("-\\frac{1}{3}", "$\\frac{1}{3}$"),
    ("10\\%", "0.2"),
    ("5", "$6\\text{ cm}$"),
    ("2^{10}", "1000"),
    ("\\frac{\\sqrt{2}}{2}", "$\\sqrt{2}$"),
    ("(x-2)(x+2)", "$x^2+4$"),
    ("\\{1,2,3\\}", "$\\{1,2\\}$"),
    ("3", "$x = 4$"),
    ("\\frac{1}{4}", "Therefore the probability is $\\boxed{0.4}$."),
    ("-2", "$\\boxed{2}$"),
    ("1.5", "$\\frac{2}{3}$"),
]


def gold_number(answer: str) -> str:
    return answer.split("####")[-1].strip()


def solution_text(answer: str) -> str:
    """The GSM8K worked solution without its calculator annotations (<<9*2=18>>)."""
    return re.sub(r"<<[^>]*>>", "", answer)


def gsm8k_pairs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    chosen = items[:60] + [it for it in items[60:] if "," in gold_number(it["answer"])]
    pairs: list[dict[str, Any]] = []
    for index, item in enumerate(chosen):
        gold = gold_number(item["answer"])
        n = int(gold.replace(",", ""))
        half = n // 2
        equal = {
            "hashes": f"#### {n}",
            "answer_is": f"The answer is {n}.",
            "dollars": f"${n}.00",
            "bare": f"{n}",
            "point_zero": f"{n}.0",
            "thousands": f"{n:,}" if n >= 1000 else f"She ends up with {n} in total.\n#### {n}",
            "boxed": f"\\boxed{{{n}}}",
            "prose_last": f"So the total is {half} + {n - half} = {n}.",
            "solution": solution_text(item["answer"]),
            "answer_colon": f"Final answer: {n} dollars",
            "boxed_inline": f"Adding everything up gives $\\boxed{{{n}}}$.",
            "annotated_solution": item["answer"],
            "bold": f"**{n}**",
            "units": f"{n} cm",
        }
        if n >= 1000:
            equal["thousands_space"] = f"{n:,}".replace(",", " ")
        if n >= 1000 and n % 1000 == 0:
            equal["scientific"] = f"{n // 1000}e3"
        other = chosen[(index + 1) % len(chosen)]
        not_equal = {
            "hashes_plus_one": f"#### {n + 1}",
            "answer_is_times_ten": f"The answer is {n * 10}.",
            "half_more": f"{n}.5",
            "changed_mind": f"I first thought {n}, but it is {n + 2}.",
            "boxed_minus_one": f"\\boxed{{{n - 1}}}",
            "near_miss": f"The answer is {n}.0001",
        }
        if n != 0:
            not_equal["negated"] = f"#### -{n}"
        if gold_number(other["answer"]).replace(",", "") != str(n):
            not_equal["other_solution"] = solution_text(other["answer"])
        for form, text in equal.items():
            pairs.append(
                {
                    "kind": "gsm8k",
                    "form": form,
                    "reference": gold,
                    "completion": text,
                    "equal": True,
                }
            )
        for form, text in not_equal.items():
            pairs.append(
                {
                    "kind": "gsm8k",
                    "form": form,
                    "reference": gold,
                    "completion": text,
                    "equal": False,
                }
            )
        if index < 30:
            pairs.append(
                {
                    "kind": "latex",
                    "form": "fraction_of_gold",
                    "reference": gold,
                    "completion": f"$\\frac{{{2 * n}}}{{2}}$",
                    "equal": True,
                }
            )
            pairs.append(
                {
                    "kind": "latex",
                    "form": "half_of_gold",
                    "reference": gold,
                    "completion": f"$\\frac{{{n}}}{{2}}$",
                    "equal": n == 0,
                }
            )
    return pairs


def main(source: str) -> None:
    items = [json.loads(line) for line in Path(source).read_text(encoding="utf-8").splitlines()]
    pairs = gsm8k_pairs(items)
    for reference, completion in LATEX_EQUAL:
        pairs.append(
            {
                "kind": "latex",
                "form": "hand",
                "reference": reference,
                "completion": completion,
                "equal": True,
            }
        )
    for reference, completion in LATEX_NOT_EQUAL:
        pairs.append(
            {
                "kind": "latex",
                "form": "hand",
                "reference": reference,
                "completion": completion,
                "equal": False,
            }
        )
    with OUT.open("w", encoding="utf-8") as out:
        for pair in pairs:
            out.write(json.dumps(pair, ensure_ascii=False) + "\n")
    print(f"wrote {len(pairs)} pairs to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/gsm8k/test.jsonl")
