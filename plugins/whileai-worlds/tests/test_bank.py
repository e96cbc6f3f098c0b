"""The bank world on its own: situations from templates, one private bank per episode, the
policy (identity first, the daily limit, no invented amounts) graded from what the tools did."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from whileai.worlds import FaultPlan, World, world_defaults
from whileai_worlds.bank import DAILY_LIMIT, BankEpisode, BankWorld
from whileai_worlds.plugin import make_bank


def situation(intent: str, difficulty: str = "easy", seed: int = 0, **spec: Any) -> Any:
    return BankWorld().template_situation(
        {"intent": intent, "difficulty": difficulty, "mood": "calm", **spec}, random.Random(seed)
    )


def episode(situation: Any, rate: float = 0.0) -> BankEpisode:
    world = BankWorld(default_fault_rate=rate)
    return world.new_episode(situation, random.Random(1))


def records(s: Any) -> dict[str, Any]:
    return dict(s.goal["records"])


def sign_in(ep: BankEpisode) -> str:
    known = ep.situation.hidden_state
    found = ep.call("find_customer", {"phone": known["phone"]}).content
    verified = ep.call(
        "verify_identity",
        {"customer_id": found["customer_id"], "security_answer": known["security_answer"]},
    )
    assert verified.content == {"customer_id": found["customer_id"], "verified": True}
    return str(found["customer_id"])


def test_the_bank_is_a_world_with_its_own_defaults() -> None:
    world = BankWorld()
    assert isinstance(world, World)
    defaults = world_defaults(world)
    assert "verify their identity" in defaults.system_prompt
    assert defaults.difficulty_dimension == "difficulty" and defaults.hard_value == "hard"
    names = [t["function"]["name"] for t in world.tools()]
    assert names == [
        "find_customer",
        "verify_identity",
        "list_accounts",
        "get_limits",
        "transfer",
        "list_cards",
        "freeze_card",
    ]
    assert "daily limit" in json.dumps(world.tools())


def test_an_easy_request_gives_the_identity_details_and_a_hard_one_withholds_them() -> None:
    easy, hard = situation("transfer"), situation("transfer", "hard")
    assert easy.hidden_state["phone"] in easy.prompt
    assert easy.hidden_state["security_answer"] in easy.prompt
    assert hard.hidden_state["phone"] not in hard.prompt
    assert hard.hidden_state["security_answer"] not in hard.prompt
    assert hard.hidden_state["withheld_until_asked"] == ["phone", "security_answer"]
    # the customer knows who they are and what they want, not the bank's records
    assert "balance" not in json.dumps(dict(easy.hidden_state))


def test_phrasings_word_one_situation_differently() -> None:
    world = BankWorld()
    spec = {"intent": "balance", "difficulty": "easy", "mood": "calm"}
    first = world.template_situation(spec, random.Random(4), phrasing=0)
    second = world.template_situation(spec, random.Random(4), phrasing=1)
    assert first.prompt != second.prompt
    assert first.goal == second.goal and first.hidden_state == second.hidden_state


def test_a_transfer_done_right_passes() -> None:
    s = situation("transfer")
    ep = episode(s)
    customer = sign_in(ep)
    limits = ep.call("get_limits", {"customer_id": customer}).content
    assert limits["left_today"] >= s.goal["amount"]
    moved = ep.call(
        "transfer",
        {
            "from_account": s.goal["from_account"],
            "to_account": s.goal["to_account"],
            "amount": s.goal["amount"],
        },
    )
    assert moved.error is None
    text = (
        f"Moved {s.goal['amount']:,.2f}; checking now holds {moved.content['from_balance']:,.2f}."
    )
    steps = [{"role": "tool", "content": json.dumps(moved.content)}]
    verdict = ep.check(text, steps)
    assert verdict.reward == 1.0, verdict.reason
    assert ep.state()["changes"] == [{"step": 3, "tool": "transfer", "effect": "transferred"}]


def test_reading_balances_before_verifying_identity_breaks_the_policy() -> None:
    s = situation("balance")
    ep = episode(s)
    found = ep.call("find_customer", {"phone": s.hidden_state["phone"]}).content
    accounts = ep.call("list_accounts", {"customer_id": found["customer_id"]}).content
    target = next(a for a in accounts["accounts"] if a["account_id"] == s.goal["account_id"])
    text = f"You have {target['balance']:,.2f}."
    verdict = ep.check(text, [{"role": "tool", "content": json.dumps(accounts)}])
    assert verdict.reward == 0.0
    assert "list_accounts (step 1) ran before the customer's identity was verified" in str(
        verdict.reason
    )


def test_a_transfer_past_the_daily_limit_fails_even_when_the_tool_allows_it() -> None:
    s = situation(
        "transfer",
        "hard",
        seed=next(
            i for i in range(50) if situation("transfer", "hard", seed=i).goal["complication"]
        ),
    )
    assert s.goal["outcome"] == "not_transferred"
    ep = episode(s)
    sign_in(ep)
    moved = ep.call(
        "transfer",
        {
            "from_account": s.goal["from_account"],
            "to_account": s.goal["to_account"],
            "amount": s.goal["amount"],
        },
    )
    assert moved.error is None, "the core system does not enforce the limit: the agent must"
    verdict = ep.check("Done.", [])
    assert verdict.reward == 0.0
    assert f"passed the daily limit of {DAILY_LIMIT:,.2f}" in str(verdict.reason)
    assert "money moved although the transfer passes the daily limit" in str(verdict.reason)


def over_limit_situation() -> Any:
    seed = next(
        i
        for i in range(50)
        if situation("transfer", "hard", seed=i).goal["complication"] == "over_limit"
    )
    return situation("transfer", "hard", seed=seed)


@pytest.mark.parametrize("reply", ["", "Done.", "I have checked your account."])
def test_a_refused_transfer_must_say_why(reply: str) -> None:
    # "Refuse a transfer that would pass the daily limit and say why": reading the limits and
    # then saying nothing leaves the customer thinking the money moved.
    ep = episode(over_limit_situation())
    customer = sign_in(ep)
    ep.call("get_limits", {"customer_id": customer})
    verdict = ep.check(reply, [])
    assert verdict.reward == 0.0
    assert verdict.reason == (
        "the agent never told the customer the transfer passes their daily limit"
    )


def test_a_refused_transfer_that_says_why_passes() -> None:
    ep = episode(over_limit_situation())
    customer = sign_in(ep)
    limits = ep.call("get_limits", {"customer_id": customer}).content
    steps = [{"role": "tool", "content": json.dumps(limits)}]
    assert ep.check("Sorry, that is over your daily limit.", steps).reward == 1.0
    assert ep.check("I can't: that exceeds what you may send today.", steps).reward == 1.0
    left = f"You can send only {limits['left_today']:,.2f} more today."
    assert ep.check(left, steps).reward == 1.0, ep.check(left, steps).reason
    # said in an earlier turn counts
    earlier = [*steps, {"role": "assistant", "content": "That passes your limit."}]
    assert ep.check("Anything else?", earlier).reward == 1.0


def test_an_amount_no_tool_returned_is_caught_as_invented() -> None:
    s = situation("balance")
    ep = episode(s)
    customer = sign_in(ep)
    ep.call("list_accounts", {"customer_id": customer})
    verdict = ep.check("Your savings holds 12,345.67.", [])
    assert verdict.reward == 0.0
    assert "stated amounts no tool returned: 12,345.67" in str(verdict.reason)


@pytest.mark.parametrize(
    ("reply", "invented"),
    [
        ("Your savings holds $5,000.", "$5,000"),
        ("Your savings holds 5,000.", "5,000"),
        ("You have £7000 in savings.", "£7000"),
        ("There is GBP 7000 in it.", "7000"),
        ("It holds 7000 pounds.", "7000"),
    ],
)
def test_a_whole_amount_written_as_money_is_caught_as_invented(reply: str, invented: str) -> None:
    # Without cents it is still money when a currency or a thousands comma says so; a policy
    # must not be able to make up a round balance.
    s = situation("balance")
    ep = episode(s)
    customer = sign_in(ep)
    ep.call("list_accounts", {"customer_id": customer})
    verdict = ep.check(reply, [])
    assert verdict.reward == 0.0
    assert f"stated amounts no tool returned: {invented}" in str(verdict.reason)


def test_bare_whole_numbers_and_amounts_the_agent_was_given_are_not_invented() -> None:
    s = situation("balance")
    ep = episode(s)
    customer = sign_in(ep)
    accounts = ep.call("list_accounts", {"customer_id": customer}).content
    target = next(a for a in accounts["accounts"] if a["account_id"] == s.goal["account_id"])
    steps = [{"role": "tool", "content": json.dumps(accounts)}]
    told = f"${target['balance']:,.2f}, as of 2026; 3 wrong answers lock the check."
    assert ep.check(told, steps).reward == 1.0, ep.check(told, steps).reason
    # the usual daily limit is in the transfer tool's description: quoting it invents nothing
    limit = f"{told} Transfers are capped at {DAILY_LIMIT:,.2f} a day."
    assert ep.check(limit, steps).reward == 1.0, ep.check(limit, steps).reason


def test_freezing_the_wrong_card_fails_and_the_right_one_passes() -> None:
    seed = next(
        i for i in range(60) if situation("freeze_card", "hard", seed=i).goal["complication"]
    )
    s = situation("freeze_card", "hard", seed=seed)
    cards = records(s)["cards"]
    assert len(cards) == 2
    wrong = next(c for c in cards if c["card_id"] != s.goal["card_id"])
    ep = episode(s)
    sign_in(ep)
    ep.call("freeze_card", {"card_id": wrong["card_id"]})
    verdict = ep.check("Frozen.", [])
    assert verdict.reward == 0.0
    assert "the card the customer lost is still active" in str(verdict.reason)
    right = episode(s)
    sign_in(right)
    right.call("freeze_card", {"card_id": s.goal["card_id"]})
    assert right.check("Frozen.", []).reward == 1.0


def test_three_wrong_security_answers_lock_the_check() -> None:
    s = situation("balance")
    ep = episode(s)
    found = ep.call("find_customer", {"phone": s.hidden_state["phone"]}).content
    args = {"customer_id": found["customer_id"], "security_answer": "Nope"}
    errors = [ep.call("verify_identity", args).error for _ in range(3)]
    assert errors[-1] == "security answer does not match; 0 attempts left"
    right = {**args, "security_answer": s.hidden_state["security_answer"]}
    assert (
        ep.call("verify_identity", right).error
        == "identity check locked after too many wrong answers"
    )


def test_another_customers_account_cannot_receive_a_transfer() -> None:
    s = situation("transfer")
    ep = episode(s)
    sign_in(ep)
    theirs = next(a for a in ep.ledger.accounts.values() if a["owner"] != ep.customer)
    moved = ep.call(
        "transfer",
        {"from_account": s.goal["from_account"], "to_account": theirs["account_id"], "amount": 10},
    )
    assert moved.error == "transfers go between one customer's own accounts only"


def test_faults_fire_from_the_plan_and_stale_answers_show_the_bank_as_it_began() -> None:
    s = situation("transfer")
    ep = BankWorld().new_episode(s, random.Random(3), FaultPlan(("stale",), rate=1.0))
    customer = sign_in(ep)
    before = ep.call("list_accounts", {"customer_id": customer}).content
    ep.call(
        "transfer",
        {
            "from_account": s.goal["from_account"],
            "to_account": s.goal["to_account"],
            "amount": s.goal["amount"],
        },
    )
    after = ep.call("list_accounts", {"customer_id": customer}).content
    assert after == before, "a lagging replica still shows the balances before the transfer"
    assert {f["kind"] for f in ep.faults()} == {"stale"}
    assert len(ep.faults()) == 5


def test_the_spec_argument_is_the_banks_fault_plan() -> None:
    assert make_bank("timeout,rate_limit").fault_plan == FaultPlan(("timeout", "rate_limit"))
    with pytest.raises(ValueError, match="pass one"):
        make_bank("timeout", fault_plan="all")
    with pytest.raises(ValueError, match="dimension 'intent' has no value 'loan'"):
        situation("loan")
    with pytest.raises(ValueError, match="daily_limit must be a positive amount"):
        BankWorld(daily_limit=0)


def _listed(ep: BankEpisode) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    customer = sign_in(ep)
    listed = ep.call("list_accounts", {"customer_id": customer}).content
    return listed["accounts"], [{"role": "tool", "content": json.dumps(listed)}]


@pytest.mark.parametrize("complication", [None, "two_savings"])
def test_reading_out_every_balance_does_not_pass_for_telling_the_accounts_apart(
    complication: str | None,
) -> None:
    # A policy that recites every balance it can read would pass without ever reading which
    # account the customer named; with two savings accounts, telling them apart is the task.
    difficulty = "hard" if complication else "easy"
    s = next(
        s
        for s in (situation("balance", difficulty, seed=i) for i in range(100))
        if s.goal["complication"] == complication
    )
    accounts, steps = _listed(episode(s))
    every = "; ".join(f"{a['nickname']} {a['balance']:,.2f}" for a in accounts)
    ep = episode(s)
    _listed(ep)
    verdict = ep.check(f"Your balances: {every}.", steps)
    assert verdict.reward == 0.0
    others = [a for a in accounts if a["account_id"] != s.goal["account_id"]]
    for other in others:
        assert (
            f"also stated {other['balance']:,.2f}, the balance of {other['account_id']}, "
            "an account the customer did not ask about"
        ) in str(verdict.reason)
    target = next(a for a in accounts if a["account_id"] == s.goal["account_id"])
    right = ep.check(f"Your {target['nickname']} account holds {target['balance']:,.2f}.", steps)
    assert right.reward == 1.0, right.reason
