"""Two real runs in the shop, faults off and on, for the report's tests: the scripted support
agent and a pleased customer (the CLI tests' doubles), a bandit strategy so rows carry arms."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("whileai_worlds", reason="the report's runs play in the built-in shop world")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from cli_doubles import Doubles

import whileai as wai
from whileai.registry import Registry


def shop_run(folder: Path, fault_rate: float, seed: int = 3) -> Any:
    return wai.simulate(
        agent_model="support",
        user_model="customer",
        simulator="template",
        strategy="bandit",
        unique_situations=6,
        rollouts_per_request=4,
        fault_rate=fault_rate,
        max_turns=3,
        seed=seed,
        output=str(folder / "rows.jsonl"),
        registry=Registry.load(plugins=[Doubles()]),
        advanced={"world": "shop"},
    )


@pytest.fixture(scope="package")
def shop_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("report-runs")
    return {
        "off": shop_run(root / "off", 0.0),
        "on": shop_run(root / "on", 0.6),
        "root": root,
    }
