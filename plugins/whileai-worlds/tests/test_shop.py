"""The shop world as the engine and a researcher use it: resolved by name, one fresh shop per
rollout, faults at the configured rate, and checks that grade what the agent did."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from whileai.registry import Registry
from whileai.schema.export import NEVER_EXPORTED
from whileai.worlds import FAULT_KINDS, Episode, FaultPlan, Situation, World
from whileai_worlds.shop import DEFAULT_FAULT_RATE, ShopWorld

NO_FAULTS = FaultPlan(rate=0.0)


@pytest.fixture(scope="module")
def world() -> World:
    return Registry.load().resolve("world", "shop")  # type: ignore[no-any-return]


def situation(world: World, seed: int = 0, phrasing: int = 0, **spec: Any) -> Situation:
    return world.template_situation(spec, random.Random(seed), phrasing)


def episode(world: World, sit: Situation, plan: FaultPlan = NO_FAULTS, seed: int = 0) -> Episode:
    return world.new_episode(sit, random.Random(seed), plan)


def test_shop_resolves_by_name_and_satisfies_the_world_contract(world: World) -> None:
    assert isinstance(world, World)
    assert world.name == "shop"
    names = [t["function"]["name"] for t in world.tools()]
    assert names == ["get_account", "list_orders", "get_order", "refund_order", "update_address"]
    assert all(t["type"] == "function" for t in world.tools())
    # the policy in the descriptions follows the world's refund window
    assert "30 days" in json.dumps(world.tools())
    assert "7 days" in json.dumps(ShopWorld(refund_window_days=7).tools())
    # each call's list is its own
    listed = world.tools()
    listed.clear()
    assert len(world.tools()) == 5
    assert world.dimensions() == {
        "intent": ["refund", "track", "address_change"],
        "difficulty": ["easy", "hard"],
        "tone": ["polite", "curt", "angry"],
    }
    assert world.default_fault_rate == DEFAULT_FAULT_RATE == 0.1
    assert isinstance(episode(world, situation(world, intent="track")), Episode)


def test_template_situations_are_deterministic_per_seed(world: World) -> None:
    spec = {"intent": "refund", "difficulty": "easy", "tone": "curt"}
    assert world.template_situation(spec, random.Random(7)) == world.template_situation(
        spec, random.Random(7)
    )
    assert (
        world.template_situation(spec, random.Random(7)).prompt
        != world.template_situation(spec, random.Random(8)).prompt
    )


def test_phrasings_word_one_situation_differently(world: World) -> None:
    spec = {"intent": "address_change", "difficulty": "easy", "tone": "polite"}
    phrasings = [situation(world, 3, p, **spec) for p in range(6)]
    assert len({s.prompt for s in phrasings}) == 6
    assert len({json.dumps(dict(s.hidden_state), sort_keys=True) for s in phrasings}) == 1
    # easy: the user gives the order id, the email and the new address up front
    first = phrasings[0]
    for key in ("order_id", "email", "new_address"):
        assert str(first.hidden_state[key]) in first.prompt


def test_hard_situations_withhold_the_order_and_email(world: World) -> None:
    for seed in range(10):
        sit = situation(world, seed, intent="refund", difficulty="hard")
        assert sit.hidden_state["order_id"] not in sit.prompt
        assert sit.hidden_state["email"] not in sit.prompt
        assert sit.hidden_state["item"] in sit.prompt
        assert sit.hidden_state["withheld_until_asked"] == ["order_id", "email"]


def test_unspecified_dimensions_are_drawn_and_bad_values_are_named(world: World) -> None:
    drawn = {situation(world, s).dimensions["intent"] for s in range(30)}
    assert drawn == {"refund", "track", "address_change"}
    with pytest.raises(ValueError, match="dimension 'intent' has no value 'cancel'"):
        situation(world, intent="cancel")


def test_episodes_are_independent(world: World) -> None:
    sit = situation(world, 1, intent="refund", difficulty="easy")
    order_id = sit.hidden_state["order_id"]
    first = episode(world, sit)
    first.call("refund_order", {"order_id": order_id, "reason": "broken"})
    second = episode(world, sit)
    assert second.call("get_order", {"order_id": order_id}).content["refunded"] is False
    assert first.state()["orders"][order_id]["refunded"] is True
    assert second.state()["changes"] == []
    # every rollout of one situation sees the same shop
    assert second.state()["orders"] == episode(world, sit).state()["orders"]


def test_a_state_taken_is_not_changed_by_later_calls(world: World) -> None:
    sit = situation(world, 1, intent="refund", difficulty="easy")
    order_id = sit.hidden_state["order_id"]
    ep = episode(world, sit)
    before = ep.state()
    ep.call("refund_order", {"order_id": order_id, "reason": "broken"})
    before["orders"][order_id]["status"] = "edited by a reader"
    assert before["orders"][order_id]["refunded"] is False
    assert ep.state()["orders"][order_id]["refunded"] is True
    assert ep.state()["orders"][order_id]["status"] != "edited by a reader"


def test_state_names_nothing_privileged(world: World) -> None:
    sit = situation(world, 2, intent="address_change", difficulty="hard")
    ep = episode(world, sit)
    ep.call("list_orders", {"email": sit.hidden_state["email"]})
    text = json.dumps(ep.state())
    assert not any(f'"{key}"' in text for key in NEVER_EXPORTED)
    assert "new_address" not in text and "goal" not in text


def refund_correctly(ep: Episode, sit: Situation) -> None:
    ep.call("list_orders", {"email": sit.hidden_state["email"]})
    ep.call("get_order", {"order_id": sit.hidden_state["order_id"]})
    ep.call("refund_order", {"order_id": sit.hidden_state["order_id"], "reason": "arrived broken"})


def test_check_passes_the_right_refund_exactly_once(world: World) -> None:
    sit = situation(world, 4, intent="refund", difficulty="easy")
    ep = episode(world, sit)
    refund_correctly(ep, sit)
    verdict = ep.check("Your refund is on its way.", [])
    assert (verdict.reward, verdict.status) == (1.0, "ok")
    assert "refunded exactly once" in str(verdict.reason)
    # a second refund is refused by the shop, so the order stays refunded once
    again = ep.call("refund_order", {"order_id": sit.hidden_state["order_id"], "reason": "x"})
    assert again.error == f"order {sit.hidden_state['order_id']} is already refunded"
    assert ep.check("", []).reward == 1.0


def test_check_fails_when_nothing_was_refunded(world: World) -> None:
    sit = situation(world, 4, intent="refund", difficulty="easy")
    ep = episode(world, sit)
    ep.call("get_order", {"order_id": sit.hidden_state["order_id"]})
    verdict = ep.check("I have refunded you.", [])
    assert verdict.reward == 0.0
    assert verdict.reason == f"order {sit.hidden_state['order_id']} was refunded 0 times, not once"


def test_check_fails_a_refund_of_another_customers_order(world: World) -> None:
    sit = situation(world, 5, intent="refund", difficulty="easy")
    ep = episode(world, sit)
    orders = ep.state()["orders"]
    stranger = next(
        o["order_id"]
        for o in orders.values()
        if o["email"] != sit.hidden_state["email"] and o["status"] == "delivered"
    )
    refund_correctly(ep, sit)
    ep.call("refund_order", {"order_id": stranger, "reason": "broken"})
    verdict = ep.check("Done.", [])
    assert verdict.reward == 0.0
    assert verdict.reason == f"refunded order {stranger}, which belongs to another customer"


def test_check_fails_a_refund_of_the_customers_other_order(world: World) -> None:
    sit = situation(world, 6, intent="refund", difficulty="hard")
    ep = episode(world, sit)
    other = next(
        o["order_id"]
        for o in ep.state()["orders"].values()
        if o["email"] == sit.hidden_state["email"] and o["order_id"] != sit.hidden_state["order_id"]
    )
    ep.call("refund_order", {"order_id": other, "reason": "broken"})
    verdict = ep.check("Done.", [])
    assert verdict.reward == 0.0
    assert f"refunded order {other}, which is not the order the customer meant" in str(
        verdict.reason
    )


def past_window_situation(world: World) -> Situation:
    for seed in range(100):
        sit = situation(world, seed, intent="refund", difficulty="hard")
        if sit.goal["complication"] == "past_window":
            return sit
    raise AssertionError("no past-window situation in 100 seeds")


def test_check_fails_a_refund_outside_the_window_and_passes_a_refusal(world: World) -> None:
    sit = past_window_situation(world)
    assert sit.goal["outcome"] == "not_refunded"
    order_id = sit.hidden_state["order_id"]

    refused = episode(world, sit)
    order = refused.call("get_order", {"order_id": order_id}).content
    assert order["refund_window_ends"] < order["today"]
    assert refused.check("Sorry, that order is past the 30-day window.", []).reward == 1.0

    refunded = episode(world, sit)
    refunded.call("get_order", {"order_id": order_id})
    refunded.call("refund_order", {"order_id": order_id, "reason": "broken"})
    verdict = refunded.check("Refunded.", [])
    assert verdict.reward == 0.0
    days = sit.hidden_state["days_ago"]
    assert verdict.reason == (
        f"refunded order {order_id} {days} days after delivery, outside the 30-day refund window"
    )

    assert episode(world, sit).check("I can't help.", []).reward == 0.0  # never looked it up


@pytest.mark.parametrize(
    "reply", ["", "All done.", "I have looked into it.", "Your order A1234 is delivered."]
)
def test_a_refused_refund_must_say_why(world: World, reply: str) -> None:
    # The goal is "not refunded, and the agent says so": looking the order up and then
    # saying nothing about the window leaves the customer waiting for money that never comes.
    sit = past_window_situation(world)
    ep = episode(world, sit)
    ep.call("get_order", {"order_id": sit.hidden_state["order_id"]})
    verdict = ep.check(reply, [])
    assert verdict.reward == 0.0
    assert "never told the customer the order is past the 30-day refund window" in str(
        verdict.reason
    )


@pytest.mark.parametrize(
    "reply",
    [
        "That order is outside our refund window.",
        "It was delivered more than 30 days ago, so I can't refund it.",
        "Refunds are only possible within a 30-day period.",
        "I'm sorry, it is no longer eligible for a refund.",
        "Our refund policy does not cover this order.",
        "I'm sorry, the deadline for refunds on this order has passed.",
    ],
)
def test_a_refused_refund_that_says_why_passes(world: World, reply: str) -> None:
    sit = past_window_situation(world)
    ep = episode(world, sit)
    ep.call("get_order", {"order_id": sit.hidden_state["order_id"]})
    assert ep.check(reply, []).reward == 1.0
    # how long ago, or on what day, it was delivered is the reason too
    order = ep.call("get_order", {"order_id": sit.hidden_state["order_id"]}).content
    days = sit.hidden_state["days_ago"]
    assert ep.check(f"It was delivered {days} days ago, so I can't.", []).reward == 1.0
    assert ep.check(f"It was delivered on {order['delivered']}.", []).reward == 1.0
    # the day the window ended, as the order gives it, is a reason too
    ends = ep.call("get_order", {"order_id": sit.hidden_state["order_id"]}).content
    assert ep.check(f"The refund period ended on {ends['refund_window_ends']}.", []).reward == 1.0


def test_check_tracking_needs_the_tracking_number_said(world: World) -> None:
    sit = situation(world, 8, intent="track", difficulty="easy")
    ep = episode(world, sit)
    tracking = ep.call("get_order", {"order_id": sit.hidden_state["order_id"]}).content["tracking"]
    assert ep.check(f"It has shipped; tracking number {tracking}.", []).reward == 1.0
    in_steps = [{"role": "assistant", "content": f"Tracking: {tracking}"}]
    assert ep.check("Anything else?", in_steps).reward == 1.0
    verdict = ep.check("It has shipped.", [])
    assert verdict.reward == 0.0
    assert verdict.reason == f"the agent never told the customer tracking number {tracking}"


def test_check_address_change(world: World) -> None:
    sit = situation(world, 9, intent="address_change", difficulty="easy")
    order_id, new = sit.hidden_state["order_id"], sit.hidden_state["new_address"]
    ep = episode(world, sit)
    assert ep.check("", []).reward == 0.0
    result = ep.call("update_address", {"order_id": order_id, "address": new.upper()})
    assert result.error is None
    assert ep.check("Updated.", []).reward == 1.0
    assert ep.state()["changes"] == [
        {"step": 0, "tool": "update_address", "order_id": order_id, "effect": "address_updated"}
    ]


def test_shipped_orders_keep_their_address(world: World) -> None:
    for seed in range(100):
        sit = situation(world, seed, intent="address_change", difficulty="hard")
        if sit.goal["complication"] == "already_shipped":
            break
    ep = episode(world, sit)
    order_id = sit.hidden_state["order_id"]
    result = ep.call("update_address", {"order_id": order_id, "address": "1 Elm Street, Leeds"})
    assert result.error == f"order {order_id} has already shipped; its address can no longer change"
    assert ep.check("It has already shipped, sorry.", []).reward == 1.0
    assert ep.check("It is on its way, so I can't change it.", []).reward == 1.0
    assert ep.check("It is already with the courier, sorry.", []).reward == 1.0
    # refusing without the reason, or with none at all, does not pass
    for reply in ("", "Sorry, I can't do that.", "All done."):
        verdict = ep.check(reply, [])
        assert verdict.reward == 0.0, reply
        assert verdict.reason == "the agent never told the customer the order has already shipped"


def test_bad_calls_are_error_results_not_raises(world: World) -> None:
    ep = episode(world, situation(world, 10))
    assert str(ep.call("cancel_order", {}).error).startswith("unknown tool 'cancel_order'")
    assert (
        ep.call("get_order", {}).error
        == "argument 'order_id' is required and must be a non-empty string"
    )
    assert ep.call("get_order", {"order_id": "Z1"}).error == "no order Z1"
    assert ep.call("list_orders", {"email": "nobody@example.com"}).error == (
        "no account with email nobody@example.com"
    )


# -- faults ------------------------------------------------------------------------------


def count_faults(world: World, plan: FaultPlan, calls: int, seed: int) -> list[dict[str, Any]]:
    sit = situation(world, 11, intent="track", difficulty="easy")
    ep = episode(world, sit, plan, seed)
    for _ in range(calls):
        ep.call("get_order", {"order_id": sit.hidden_state["order_id"]})
    return ep.faults()


@pytest.mark.parametrize("rate", [0.05, 0.3])
def test_faults_fire_at_the_plans_rate(world: World, rate: float) -> None:
    n = 4000
    fired = len(count_faults(world, FaultPlan(rate=rate), n, seed=12))
    sd = math.sqrt(n * rate * (1 - rate))
    assert abs(fired - n * rate) < 4 * sd  # four binomial sds: a false alarm once in ~16,000


def test_a_plan_without_a_rate_fires_at_the_worlds_default(world: World) -> None:
    n = 4000
    fired = count_faults(world, FaultPlan(kinds=("error",)), n, seed=13)
    rate = world.default_fault_rate
    assert abs(len(fired) - n * rate) < 4 * math.sqrt(n * rate * (1 - rate))
    assert {f["kind"] for f in fired} == {"error"}
    assert [f["step"] for f in fired] == sorted({f["step"] for f in fired})
    assert all(f["tool"] == "get_order" for f in fired)


def test_every_kind_of_a_plan_fires(world: World) -> None:
    fired = count_faults(world, FaultPlan(rate=0.5), 600, seed=14)
    counts = {kind: sum(f["kind"] == kind for f in fired) for kind in FAULT_KINDS}
    assert all(c > 20 for c in counts.values()), counts


def test_the_world_option_and_spec_set_its_own_plan() -> None:
    registry = Registry.load()
    spec_world = registry.resolve("world", "shop:timeout,rate_limit", default_fault_rate=1.0)
    option_world = registry.resolve("world", "shop", fault_plan={"kinds": ["stale"], "rate": 1.0})
    for w, kinds in ((spec_world, {"timeout", "rate_limit"}), (option_world, {"stale"})):
        sit = situation(w, 15, intent="track")
        ep = w.new_episode(sit, random.Random(0))
        for _ in range(40):
            ep.call("get_account", {"email": sit.hidden_state["email"]})
        assert {f["kind"] for f in ep.faults()} == kinds
    with pytest.raises(ValueError, match="unknown fault kinds"):
        registry.resolve("world", "shop:meteor")
    with pytest.raises(ValueError, match="default_fault_rate must lie in"):
        ShopWorld(default_fault_rate=1.5)


def only(kind: str) -> FaultPlan:
    return FaultPlan(kinds=(kind,), rate=1.0)


@pytest.mark.parametrize(
    ("kind", "error_key"),
    [("timeout", "timeout"), ("error", "internal_error"), ("rate_limit", "rate_limited")],
)
def test_loud_faults_fail_the_call_and_change_nothing(
    world: World, kind: str, error_key: str
) -> None:
    sit = situation(world, 16, intent="refund", difficulty="easy")
    ep = episode(world, sit, only(kind))
    order_id = sit.hidden_state["order_id"]
    result = ep.call("refund_order", {"order_id": order_id, "reason": "broken"})
    assert result.fault == kind
    assert result.content["error"] == error_key
    assert result.error is not None and result.error.startswith(kind)
    assert ep.state()["orders"][order_id]["refunded"] is False
    assert ep.faults() == [{"step": 0, "tool": "refund_order", "kind": kind}]
    if kind == "rate_limit":
        assert result.content["retry_after_s"] > 0


def test_stale_answers_lag_silently(world: World) -> None:
    sit = situation(world, 17, intent="refund", difficulty="easy")
    order_id = sit.hidden_state["order_id"]
    ep = episode(world, sit, only("stale"))
    stale = ep.call("get_order", {"order_id": order_id})
    assert (stale.fault, stale.error) == ("stale", None)
    assert stale.content["status"] == "shipped"  # it was delivered
    assert stale.content["delivered"] is None
    # a write goes through but answers with the old record
    write = ep.call("refund_order", {"order_id": order_id, "reason": "broken"})
    assert write.content["refunded"] is False
    assert ep.state()["orders"][order_id]["refunded"] is True


def test_partial_answers_lose_fields_and_list_items(world: World) -> None:
    sit = situation(world, 18, intent="refund", difficulty="easy")
    clean = episode(world, sit)
    ep = episode(world, sit, only("partial"))
    full = clean.call("get_order", {"order_id": sit.hidden_state["order_id"]}).content
    part = ep.call("get_order", {"order_id": sit.hidden_state["order_id"]})
    assert part.fault == "partial" and part.error is None
    assert set(part.content) < set(full)
    assert part.content["order_id"] == full["order_id"]
    listed = ep.call("list_orders", {"email": sit.hidden_state["email"]}).content
    assert (
        0
        < len(listed["orders"])
        < len(clean.call("list_orders", {"email": sit.hidden_state["email"]}).content["orders"])
    )


def test_malformed_answers_do_not_parse(world: World) -> None:
    sit = situation(world, 19, intent="track", difficulty="easy")
    result = episode(world, sit, only("malformed")).call(
        "get_order", {"order_id": sit.hidden_state["order_id"]}
    )
    assert result.fault == "malformed" and isinstance(result.content, str)
    assert result.content.startswith("{")
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.content)


def test_faults_are_reproducible_from_the_episode_rng(world: World) -> None:
    plan = FaultPlan(rate=0.3)
    assert count_faults(world, plan, 200, seed=20) == count_faults(world, plan, 200, seed=20)
    assert count_faults(world, plan, 200, seed=20) != count_faults(world, plan, 200, seed=21)


def test_the_engine_may_pass_its_step_index(world: World) -> None:
    sit = situation(world, 22, intent="track")
    ep = world.new_episode(sit, random.Random(0), only("timeout"))
    ep.call("get_order", {"order_id": sit.hidden_state["order_id"]}, step=5)  # type: ignore[call-arg]
    assert ep.faults() == [{"step": 5, "tool": "get_order", "kind": "timeout"}]


def test_a_hard_track_situation_has_a_second_order_in_transit(world: World) -> None:
    for seed in range(100):
        sit = situation(world, seed, intent="track", difficulty="hard")
        if sit.goal["complication"] == "two_in_transit":
            break
    assert "complication" not in sit.hidden_state  # the grader's label, not the user's
    ep = episode(world, sit)
    listed = ep.call("list_orders", {"email": sit.hidden_state["email"]}).content["orders"]
    in_transit = [o for o in listed if o["status"] == "shipped"]
    assert len(in_transit) == 2
    assert sit.hidden_state["order_id"] in {o["order_id"] for o in in_transit}


def test_every_rollout_of_a_situation_gets_the_same_shop_and_a_copy_of_its_own() -> None:
    world = ShopWorld()
    sit = situation(world, seed=4, intent="refund")
    first = episode(world, sit)
    order_id = str(sit.hidden_state["order_id"])
    before = json.dumps(first.state(), sort_keys=True)
    first.call("refund_order", {"order_id": order_id, "reason": "damaged"})
    assert json.dumps(first.state(), sort_keys=True) != before  # the refund changed its shop
    second = episode(world, sit)
    # the next rollout sees the shop as the situation drew it, not as the first one left it
    assert json.dumps(second.state(), sort_keys=True) == before
    other = episode(world, situation(world, seed=5, intent="refund"))
    assert json.dumps(other.state(), sort_keys=True) != before


def test_reading_out_every_tracking_number_does_not_pass_for_telling_the_orders_apart(
    world: World,
) -> None:
    # A policy that looks up every order it can reach and recites every tracking number would
    # pass a tracking situation without ever working out which order the customer meant; in a
    # two-in-transit situation, telling them apart is the whole task.
    sit = next(
        s
        for s in (situation(world, seed, intent="track", difficulty="hard") for seed in range(100))
        if s.goal["complication"] == "two_in_transit"
    )
    ep = episode(world, sit)
    listed = ep.call("list_orders", {"email": sit.hidden_state["email"]}).content["orders"]
    views = [ep.call("get_order", {"order_id": o["order_id"]}).content for o in listed]
    every = ", ".join(f"{v['order_id']}: {v['tracking']}" for v in views if v["tracking"])
    verdict = ep.check(f"Your tracking numbers: {every}.", [])
    assert verdict.reward == 0.0
    other = next(
        v
        for v in views
        if v["status"] == "shipped" and v["order_id"] != sit.hidden_state["order_id"]
    )
    assert (
        f"also told tracking number {other['tracking']} of order {other['order_id']}, "
        "not the order the customer asked about"
    ) in str(verdict.reason)
    target = next(v for v in views if v["order_id"] == sit.hidden_state["order_id"])
    assert ep.check(f"Tracking number {target['tracking']}.", []).reward == 1.0


def test_telling_another_customers_tracking_number_fails_whatever_was_asked(
    world: World,
) -> None:
    sit = situation(world, 3, intent="refund", difficulty="easy")
    ep = episode(world, sit)
    order_id = sit.hidden_state["order_id"]
    ep.call("get_order", {"order_id": order_id})
    ep.call("refund_order", {"order_id": order_id, "reason": "broken"})
    assert ep.check("Refunded.", []).reward == 1.0
    # another customer holds the same item; their order's tracking number is theirs alone
    theirs = next(
        o for o in ep.orders.values() if o["email"] != sit.hidden_state["email"] and o["tracking"]
    )
    ep.call("get_order", {"order_id": theirs["order_id"]})
    verdict = ep.check(f"Refunded. By the way, {theirs['tracking']} is on its way.", [])
    assert verdict.reward == 0.0
    assert (
        f"told tracking number {theirs['tracking']} of order {theirs['order_id']}, which "
        "belongs to another customer"
    ) in str(verdict.reason)
