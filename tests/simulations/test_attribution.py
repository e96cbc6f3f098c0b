"""Whose failure a failed rollout was, read off the row the way a reviewer would, and the
report's shares with intervals that cover."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import whileai as wai
from whileai.measure.proportions import clustered_share, wilson_interval
from whileai.simulations.attribution import failure_owner
from whileai.worlds import Situation

from .sim_doubles import BASE, registry

SITUATION = Situation(
    situation_id="s1",
    prompt="Where is my order A1234?",
    patience=3,
    hidden_state={"order_id": "A1234", "status": "shipped"},
    goal={"outcome": "tracking_told", "status": "shipped"},
)


def failed(steps: list[dict[str, Any]], **row: Any) -> dict[str, Any]:
    return {
        "prompt": SITUATION.prompt,
        "final_text": "Sorry.",
        "reward": 0.0,
        "judge_status": "ok",
        "steps": steps,
        "faults": [],
        **row,
    }


def lookup(i: int) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "name": "lookup_order", "arguments": {"order_id": "A1234"}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "name": "lookup_order", "content": "{}"},
    ]


def user(text: str, status: str = "continue") -> dict[str, Any]:
    return {"role": "user", "content": text, "user_status": status}


def owner(row: dict[str, Any]) -> str | None:
    found = failure_owner(row, SITUATION, SITUATION.patience)
    return None if found is None else found["owner"]


def test_a_tool_that_never_answered_makes_it_the_worlds_failure() -> None:
    row = failed(
        [*lookup(0), *lookup(1)],
        faults=[
            {"step": 1, "tool": "lookup_order", "kind": "timeout"},
            {"step": 3, "tool": "lookup_order", "kind": "rate_limit"},
        ],
    )
    found = failure_owner(row, SITUATION, 3)
    assert found is not None and found["owner"] == "world"
    assert "every call to lookup_order (2)" in found["reason"]
    # one call answered, or a fault that still answers (stale data): the agent had something
    assert owner(failed([*lookup(0), *lookup(1)], faults=[row["faults"][0]])) == "agent"
    stale = [{"step": 1, "tool": "lookup_order", "kind": "stale"}]
    assert owner(failed(lookup(0), faults=stale)) == "agent"


def test_a_user_who_leaves_early_contradicts_or_leaks_owns_the_failure() -> None:
    early = failed([*lookup(0), user("Forget it.", "gave_up")])
    assert owner(early) == "user"
    # leaving once patience ran out is the agent's failure to help in time
    late = failed([user("Hm."), user("Still no?"), user("Bye.", "gave_up")])
    assert owner(late) == "agent"
    contradicted = failed([*lookup(0), user("No, my order is B9876.")])
    found = failure_owner(contradicted, SITUATION, 3)
    assert found is not None and found["owner"] == "user"
    assert "order_id 'B9876'" in found["reason"]
    leaked = failed([user("The outcome should be tracking_told, right?")])
    assert owner(leaked) == "user"
    # a goal value the agent saw through its tools is no leak: "shipped" was in a tool result
    seen = failed(
        [
            {"role": "tool", "name": "lookup_order", "content": '{"status": "shipped"}'},
            user("So it is shipped?"),
        ]
    )
    assert owner(seen) == "agent"


def test_a_user_that_loops_on_a_phrase_owns_the_failure() -> None:
    # what a small model playing the customer wrote in a real bank run
    looping = "Sorry, " + "I'm sorry, " * 13 + "I'm"
    found = failure_owner(failed([*lookup(0), user(looping)]), SITUATION, 3)
    assert found == {
        "owner": "user",
        "reason": "the simulated user's follow-up 1 says \"Sorry, I'm\" 14 times in a row: "
        "the simulator broke down, which no customer does",
        "source": "rules",
    }
    # a customer who insists, or repeats a request once, is a customer: the agent's failure
    for said in (
        "No, no, no. I said A1234. Where is it?",
        "Where is my order A1234? " * 2,
        "please please please please please help, my order A1234 has not come and it was a gift "
        "for my daughter's birthday on Friday",
    ):
        assert owner(failed([*lookup(0), user(said)])) == "agent", said
    # a loop that is most of a longer turn still counts
    assert owner(failed([user("ok. " + "thank you " * 8 + "bye")])) == "user"


def test_only_failed_graded_rows_have_an_owner() -> None:
    assert owner(failed([], reward=1.0)) is None
    assert owner(failed([], judge_status="error", reward=None)) is None
    assert owner(failed([], error="BackendError: down")) is None
    assert owner(failed([])) == "agent"


def test_a_run_writes_an_owner_on_every_failed_row_and_reports_the_shares() -> None:
    data = wai.simulate(**BASE, registry=registry(), unique=12, repeats=4, seed=2, fault_rate=0.5)
    failed_rows = [r for r in data.rows if r["reward"] is not None and r["reward"] < 0.5]
    assert failed_rows, "a run with this seed has failures"
    assert all(r["failure_owner"]["owner"] in ("agent", "user", "world") for r in failed_rows)
    assert all("failure_owner" not in r for r in data.rows if r["reward"] == 1.0)
    shares = data.report()["failures"]
    assert shares["failed"] == len(failed_rows)
    assert sum(shares[o]["n"] for o in ("agent", "user", "world")) == len(failed_rows)
    for name in ("agent", "user", "world"):
        low, high = shares[name]["ci95"]
        assert low <= shares[name]["share"] <= high
    assert "failures by owner" in str(data.report())


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_one_flag_per_task_is_wilsons_interval(confidence: float) -> None:
    flags = [(i, i % 3 == 0) for i in range(20)]
    share, low, high = clustered_share(flags, confidence)
    assert share == pytest.approx(7 / 20)
    # Wilson's interval on the normal quantile
    assert (low, high) == pytest.approx(wilson_interval(7, 20, confidence), abs=1e-12)


#: flags of nine tasks of 1-4 rollouts; and of ten tasks of eight, one of which carries every
#: flag (heavy-tailed task shares: Student's quantile on fewer degrees of freedom)
SPREAD_FLAGS = [(t, (t * 7 + r) % 5 < 2 + t % 2) for t in range(9) for r in range(1 + t % 4)]
ONE_TASK_FLAGS = [(t, t == 0 and r < 5) for t in range(10) for r in range(8)]


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
@pytest.mark.parametrize("flags", [SPREAD_FLAGS, ONE_TASK_FLAGS], ids=["spread", "one-task"])
def test_the_clustered_interval_uses_scipy_stats_quantiles(
    confidence: float, flags: list[tuple[int, bool]]
) -> None:
    """The design-effect interval written out with scipy.stats' normal and Student quantiles
    and its excess kurtosis (the module reads the same quantiles from scipy.special, which
    does not import scipy.stats) gives the module's interval exactly."""
    from scipy import stats

    sizes: dict[int, int] = {}
    hits: dict[int, int] = {}
    for t, flag in flags:
        sizes[t] = sizes.get(t, 0) + 1
        hits[t] = hits.get(t, 0) + flag
    m = np.array(list(sizes.values()), dtype=float)
    y = np.array([hits[t] for t in sizes], dtype=float)
    n, k = m.sum(), len(m)
    p = y.sum() / n
    within = (y - y * y / m).sum() / (n - k)
    between = (m * (y / m - p) ** 2).sum() / (k - 1)
    m0 = (n - (m * m).sum() / n) / (k - 1)
    rho = min(max((between - within) / (between + (m0 - 1) * within), 0.0), 1.0)
    n_eff = n / (1 + (m0 - 1) * rho)
    # the tasks' shares' degrees of freedom: 2 / (2 / (k - 1) + g / k) for excess kurtosis g
    df = float(np.clip(2 / (2 / (k - 1) + max(stats.kurtosis(y / m), 0.0) / k), 1, k - 1))
    assert (df < k - 1) == (flags is ONE_TASK_FLAGS)
    assert stats.norm.ppf(0.5 + confidence / 2) != stats.t.ppf(0.5 + confidence / 2, df)
    z = stats.t.ppf(0.5 + confidence / 2, df)
    centre = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z / (1 + z * z / n_eff) * np.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff**2))
    share, low, high = clustered_share(flags, confidence)
    assert share == pytest.approx(p, abs=1e-15)
    assert low == pytest.approx(max(0.0, centre - half), abs=1e-12)
    assert high == pytest.approx(min(1.0, centre + half), abs=1e-12)


@pytest.mark.parametrize("tasks", [5, 10, 30])
@pytest.mark.parametrize("population", [(2.0, 3.0), (0.2, 1.0)])
def test_the_clustered_interval_covers_at_small_sizes(
    tasks: int, population: tuple[float, float]
) -> None:
    """Seeded coverage over tasks whose rates are drawn from Beta(2, 3), or the heavy-tailed
    Beta(1/5, 1) (an owner most tasks never fail by and a few often), 1, 3 or 8 rollouts
    each: a little conservative at 5 tasks, near 95% from 30. Before Student's quantile took
    fewer degrees of freedom for heavy-tailed task shares, Beta(1/5, 1) covered 91.3% at 10
    tasks of 8 rollouts (1,000 runs)."""
    a, b = population
    rng = np.random.default_rng(tasks)
    coverage = []
    for per_task in (1, 3, 8):
        covered = 0
        for _ in range(400):
            rates = rng.beta(a, b, tasks)
            flags = [
                (t, bool(rng.random() < rates[t])) for t in range(tasks) for _ in range(per_task)
            ]
            _, low, high = clustered_share(flags)
            covered += low <= a / (a + b) <= high
        coverage.append(covered / 400)
    assert all(0.92 <= c <= 1.0 for c in coverage), coverage


def test_owner_shares_count_one_situations_phrasings_together() -> None:
    from whileai.simulations.attribution import owner_shares
    from whileai.simulations.tally import RunTally

    # four situations of three phrasings, one failed rollout each: the agent owns every
    # failure of situations 0 and 1, the world every one of 2 and 3
    rows = [
        {
            "scenario_id": f"s{s}-p{p}",
            "prompt": "q",
            "final_text": "a",
            "reward": 0.0,
            "seed": 50 + s,
            "lineage": {"situation": s, "phrasing": p, "repeat": 0},
            "failure_owner": {"owner": "agent" if s < 2 else "world", "source": "rules"},
        }
        for s in range(4)
        for p in range(3)
    ]
    shares = owner_shares(rows)
    assert shares is not None
    by_situation = [(s, s < 2) for s in range(4) for _ in range(3)]
    assert shares["agent"]["share"] == 0.5
    assert shares["agent"]["ci95"] == pytest.approx(clustered_share(by_situation)[1:])
    # wider than twelve phrasings counted as twelve tasks
    assert shares["agent"]["ci95"][0] < wilson_interval(6, 12)[0]
    # the run's own report counts them the same way
    assert RunTally.of(rows).owner_shares() == shares
