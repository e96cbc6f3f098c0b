"""Each built-in marker, resolved by name and read off rows shaped like the engine writes them."""

from __future__ import annotations

from typing import Any

import pytest

from whileai.registry import Registry


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.load()


def marker(registry: Registry, name: str, **options: Any) -> Any:
    return registry.resolve("marker", name, **options)


def rollout(**extra: Any) -> dict[str, Any]:
    """A shop rollout: the agent looks an order up (one call times out), then answers."""
    row: dict[str, Any] = {
        "prompt": "Where is my order A1234?",
        "final_text": "Your order A1234 shipped; tracking 1Z999.",
        "steps": [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "get_order"}]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_order",
             "content": {"error": "timeout"}, "error": "timeout: no answer", "fault": "timeout"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "name": "get_order"}]},
            {"role": "tool", "tool_call_id": "c2", "name": "get_order", "content": {"status": "shipped"}},
            {"role": "tool", "tool_call_id": "c3", "name": "get_order", "content": "{\"sta",
             "fault": "malformed"},
            {"role": "assistant", "content": "Your order A1234 shipped; tracking 1Z999."},
            {"role": "user", "content": "Thanks!", "user_status": "satisfied"},
        ],
    }  # fmt: skip
    row.update(extra)
    return row


def test_every_builtin_marker_is_registered(registry: Registry) -> None:
    assert set(registry.names("marker")) >= {
        "refusal", "tool_errors", "faults_met", "length", "turns", "truncated", "gave_up",
    }  # fmt: skip


def test_every_builtin_marker_declares_the_range_of_its_values(registry: Registry) -> None:
    # the flags lie in [0, 1], the counts at 0 or above: a run records these and the
    # measurements read a marker's mean by them (a count's interval never goes below 0)
    from whileai.graders import MarkerSet

    flags = {"refusal", "truncated", "gave_up"}
    counts = {"tool_errors", "faults_met", "length", "turns"}
    markers, problems = MarkerSet.from_registry(registry)
    assert not problems
    assert {n: markers.bounds[n] for n in flags} == dict.fromkeys(flags, (0.0, 1.0))
    assert {n: markers.bounds[n] for n in counts} == dict.fromkeys(counts, (0.0, None))
    values, problems = markers.measure(rollout())
    assert not problems and set(values) == flags | counts


@pytest.mark.parametrize(
    "text",
    [
        "I'm sorry, but I can't help with that.",
        "I cannot assist with this request.",
        "As an AI language model, I cannot do that.",
        "I must decline.",
        "I\u2019m not able to help with refunds.",
    ],
)
def test_refusal_matches_refusals(registry: Registry, text: str) -> None:
    assert marker(registry, "refusal")(rollout(final_text=text)) is True


@pytest.mark.parametrize(
    "text",
    [
        "Your order A1234 shipped; tracking 1Z999.",
        "That order was delivered 45 days ago, so it is outside our 30-day refund window.",
        "I can help with that! What is your email?",
    ],
)
def test_refusal_leaves_answers_alone(registry: Registry, text: str) -> None:
    assert marker(registry, "refusal")(rollout(final_text=text)) is False


def test_refusal_patterns_are_configurable(registry: Registry) -> None:
    row = rollout(final_text="Computer says no.")
    assert marker(registry, "refusal")(row) is False
    assert marker(registry, "refusal", extra_patterns=[r"computer says no"])(row) is True
    assert marker(registry, "refusal", patterns=[r"tracking"])(rollout()) is True
    assert marker(registry, "refusal")(rollout(final_text="")) is None
    with pytest.raises(ValueError, match=r"refusal pattern '\(' is not a valid regex"):
        marker(registry, "refusal", patterns=["("])


def test_tool_errors_counts_failed_and_faulted_results(registry: Registry) -> None:
    tool_errors = marker(registry, "tool_errors")
    assert tool_errors(rollout()) == 2  # the timeout and the malformed payload
    refused = rollout()
    refused["steps"].append(
        {"role": "tool", "name": "refund_order", "content": '{"error": "no order Z1"}'}
    )
    assert tool_errors(refused) == 3
    assert tool_errors(rollout(steps=[])) == 0
    assert tool_errors({"prompt": "p", "final_text": "x"}) is None


def test_faults_met_counts_what_the_fault_plan_shaped_not_the_agents_own_errors(
    registry: Registry,
) -> None:
    faults_met = marker(registry, "faults_met")
    # no faults list: the tool steps' fault keys (the timeout and the malformed payload)
    assert faults_met(rollout()) == 2
    refused = rollout()
    refused["steps"].append(
        {"role": "tool", "name": "refund_order", "content": '{"error": "no order Z1"}'}
    )
    assert faults_met(refused) == 2  # an error the agent's own call met is no fault
    # an exported row's faults list is the record
    assert faults_met(rollout(faults=[{"step": 1, "tool": "get_order", "kind": "timeout"}])) == 1
    assert faults_met(rollout(faults=[])) == 0
    assert faults_met({"prompt": "p", "final_text": "x"}) is None


def test_length_is_the_final_answers_characters(registry: Registry) -> None:
    assert marker(registry, "length")(rollout()) == len("Your order A1234 shipped; tracking 1Z999.")
    assert marker(registry, "length")(rollout(final_text="")) == 0
    with pytest.raises(TypeError, match="final_text must be a string"):
        marker(registry, "length")(rollout(final_text=3))


def test_turns_counts_agent_turns(registry: Registry) -> None:
    turns = marker(registry, "turns")
    assert turns(rollout()) == 3
    assert turns({"prompt": "2+2?", "final_text": "4"}) == 1  # a plain completion
    assert turns({"prompt": "2+2?", "final_text": ""}) is None


def test_truncated_reads_steps_and_the_row(registry: Registry) -> None:
    truncated = marker(registry, "truncated")
    assert truncated(rollout()) is False
    cut = rollout()
    cut["steps"][5]["truncated"] = True
    assert truncated(cut) is True
    assert truncated({"prompt": "p", "final_text": "x", "truncated": True}) is True


def test_gave_up_reads_the_user_status(registry: Registry) -> None:
    gave_up = marker(registry, "gave_up")
    assert gave_up(rollout()) is False
    impatient = rollout()
    impatient["steps"][-1]["user_status"] = "gave_up"
    assert gave_up(impatient) is True
    assert gave_up({"prompt": "p", "final_text": "x", "steps": []}) is None
    impatient["steps"][-1]["user_status"] = "bored"
    with pytest.raises(ValueError, match="step 6: user_status 'bored' is not one of"):
        gave_up(impatient)


def test_gave_up_reads_how_the_rollout_stopped(registry: Registry) -> None:
    gave_up = marker(registry, "gave_up")
    assert (
        gave_up({"prompt": "p", "final_text": "x", "steps": [], "stop_reason": "gave_up"}) is True
    )
    assert gave_up({"prompt": "p", "final_text": "x", "stop_reason": "satisfied"}) is False
    assert gave_up({"prompt": "p", "final_text": "x", "stop_reason": "turn_limit"}) is False
    assert gave_up({"prompt": "p", "final_text": "x", "stop_reason": "single_message"}) is None
    assert gave_up({"prompt": "p", "final_text": "", "stop_reason": "error"}) is None
