"""The public-benchmark recipe, run the way its README says, on a handful of questions."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "recipes" / "02-measure" / "public-benchmark"


def run_recipe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(RECIPE / "run.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def section(out: str, title: str) -> str:
    """The report printed under the ``== title ...`` line, up to the next section."""
    after = out.split(f"== {title}", 1)[1]
    return after.split("\n", 1)[1].split("\n== ", 1)[0]


def check_report(out: str, limit: int) -> None:
    passes = re.findall(rf"(plain|step-by-step) seed (\d): (\d+)/{limit} correct", out)
    assert [(variant, seed) for variant, seed, _ in passes] == [  # one line per pass
        ("plain", "1"),
        ("plain", "2"),
        ("plain", "3"),
        ("step-by-step", "1"),
        ("step-by-step", "2"),
        ("step-by-step", "3"),
    ], out
    # pass@1 of the plain prompt is the share of its graded answers that were right
    plain_correct = sum(int(solved) for variant, _, solved in passes if variant == "plain")
    plain = section(out, "pass_at: plain prompt")
    printed = re.search(r"pass@1\s+([0-9.]+)", plain)
    assert printed is not None, plain
    assert float(printed.group(1)) == pytest.approx(plain_correct / (3 * limit), abs=0.0005)
    assert re.search(r"pass@1\s+[0-9.]+", section(out, "pass_at: step-by-step prompt"))
    variance = section(out, "eval_variance: the plain prompt, 3 passes ==")
    assert re.search(r"reward(\s+[0-9.]+){3}", variance)
    assert "output_tokens" in variance and "truncated" in variance
    holdout = section(out, "holdout_size: questions needed to detect +0.10")
    assert re.search(r"paired tasks needed\s+\d+", holdout)
    compared = section(out, "compare: step-by-step against plain, paired by question ==")
    assert re.search(r"reward\*?\s+[0-9.]+\s+[0-9.]+\s+[+-][0-9.]+", compared)
    assert f"tasks: {limit} paired" in compared


def test_the_recipe_ships_its_questions_with_their_licence() -> None:
    lines = (RECIPE / "gsm8k_test_200.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 200
    assert all("####" in line for line in lines)
    assert "MIT License" in (RECIPE / "LICENSE").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_quick_run_prints_every_measurement() -> None:
    done = run_recipe("--limit", "4", "--max-tokens", "48")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "first 4 questions, answered by local:smollm2" in out
    check_report(out, 4)


def test_a_limit_outside_the_shipped_questions_is_refused() -> None:
    done = run_recipe("--limit", "201")
    assert done.returncode == 2
    assert "--limit must be between 1 and 200" in done.stderr
