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
    passes = re.findall(r"(plain|step-by-step) seed (\d): (\d)/4 correct", out)
    assert [(variant, seed) for variant, seed, _ in passes] == [
        ("plain", "1"),
        ("plain", "2"),
        ("plain", "3"),
        ("step-by-step", "1"),
        ("step-by-step", "2"),
        ("step-by-step", "3"),
    ]
    for title in (
        "== pass_at: plain prompt",
        "== pass_at: step-by-step prompt",
        "== eval_variance: the plain prompt, 3 passes ==",
        "== holdout_size: questions needed to detect +0.10",
        "== compare: step-by-step against plain, paired by question ==",
    ):
        assert title in out
    # pass@1 of the plain prompt is the share of its 12 graded answers that were right
    plain_correct = sum(int(solved) for variant, _, solved in passes if variant == "plain")
    plain_section = out.split("== pass_at: plain prompt")[1].split("==")[0]
    printed = float(re.search(r"pass@1\s+([0-9.]+)", plain_section).group(1))  # type: ignore[union-attr]
    assert printed == pytest.approx(plain_correct / 12, abs=0.0005)
    variance = out.split("== eval_variance")[1].split("==")[0]
    assert re.search(r"reward(\s+[0-9.]+){3}", variance)
    assert "output_tokens" in variance and "truncated" in variance
    assert "paired tasks needed" in out
    assert "tasks: 4 paired" in out


def test_a_limit_outside_the_shipped_questions_is_refused() -> None:
    done = run_recipe("--limit", "201")
    assert done.returncode == 2
    assert "--limit must be between 1 and 200" in done.stderr
