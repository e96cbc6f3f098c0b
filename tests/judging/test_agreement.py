"""scored.agreement(): the judge against hand labels, or against a second scoring run; the same
numbers wai.judge_agreement gives, with the 50-row floor said out loud."""

from __future__ import annotations

from typing import Any

import pytest

import whileai as wai
from whileai.registry import Registry
from whileai.simulations.data import Simulation


def labelled(n: int) -> list[dict[str, Any]]:
    """``n`` rows: the completion says what the judge will answer, gold_reward the truth.

    Per 10 rows: judge and gold pass on 5, fail on 2; the judge passes 2 gold failures and
    fails 1 gold pass.
    """
    judge = [1, 1, 1, 1, 1, 0, 0, 1, 1, 0]
    gold = [1, 1, 1, 1, 1, 0, 0, 0, 0, 1]
    prompts = [f"question {i}" for i in range(n)]
    rows = wai.rows(prompts, [str(judge[i % 10]) for i in range(n)], None)
    for i, row in enumerate(rows):
        row["gold_reward"] = float(gold[i % 10])
    return rows


def says(prompt: str, completion: str) -> float:
    return float(completion)


def test_sixty_gold_rows_give_the_numbers_judge_agreement_gives() -> None:
    scored = wai.grade(labelled(60), says, registry=Registry.from_plugins())
    mine = scored.agreement()
    reference = wai.judge_agreement(scored.rows)

    assert mine.to_dict() == reference.to_dict()
    # by hand: 42 of 60 agree; 12 of 24 gold failures passed; 6 of 36 gold passes failed
    assert mine.n_gold == 60 and mine.floor_met
    assert mine.agreement.count == 42
    assert (mine.pass_when_gold_fail.count, mine.pass_when_gold_fail.n) == (12, 24)
    assert (mine.fail_when_gold_pass.count, mine.fail_when_gold_pass.n) == (6, 36)
    assert mine.confusion.as_table() == [[30, 12], [6, 12]]
    # Cohen's kappa from the table: po = 0.7, pe = (42*36 + 18*24) / 3600 = 0.54
    assert mine.kappa == pytest.approx((0.7 - 0.54) / (1 - 0.54))
    assert not any("floor not met" in note for note in mine.notes)


def test_below_fifty_gold_rows_the_report_says_the_floor_is_not_met() -> None:
    scored = wai.grade(labelled(20), says, registry=Registry.from_plugins())
    report = scored.agreement()
    assert report.n_gold == 20 and report.floor_met is False
    assert any("floor not met: 20 gold rows, 50 is the floor" in n for n in report.notes)
    assert "floor not met" in str(report)


def test_a_second_scoring_run_is_the_gold() -> None:
    rows = labelled(60)
    first = wai.grade(rows, says, registry=Registry.from_plugins())
    second = wai.run_judge(rows, lambda row: row["gold_reward"], version="hand-labels")

    report = first.agreement(second)
    assert report.gold_source.startswith("a second scoring run")
    assert report.to_dict() == wai.judge_agreement(first.rows, second.rows).to_dict()
    assert report.agreement.count == 42
    # the judge against itself agrees everywhere
    assert first.agreement(first).agreement.share == 1.0


def test_threshold_is_passed_through() -> None:
    rows = wai.rows(["a", "b"], ["0.6", "0.6"], None)
    for row, gold in zip(rows, (1.0, 0.0), strict=True):
        row["gold_reward"] = gold
    scored = wai.grade(rows, says, registry=Registry.from_plugins())
    assert scored.agreement(threshold=0.5).agreement.count == 1
    assert scored.agreement(threshold=0.7).agreement.count == 1
    assert scored.agreement(threshold=0.7).confusion.judge_fail_gold_pass == 1


def test_a_run_reads_its_judges_accuracy_the_same_way() -> None:
    graded = wai.grade(labelled(60), says, registry=Registry.from_plugins())
    sim = Simulation(
        trajectories=graded.trajectories,
        metadata={"run_id": "r"},
        system_prompts={},
        warnings=[],
        degraded=[],
        report_fields={"repeat_policy": "rl"},
    )
    assert sim.agreement().to_dict() == graded.agreement().to_dict()
