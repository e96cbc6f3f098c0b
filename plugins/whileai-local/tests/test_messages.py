"""How OpenAI-format conversations are shaped for llama.cpp's chat templates."""

from __future__ import annotations

from whileai_local.messages import TOOLS_SYSTEM_PROMPT, normalize

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_order", "arguments": {"order_id": "A1234"}},
}
CONVERSATION = [
    {"role": "user", "content": "Where is my order A1234?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
]


def test_a_tool_result_becomes_a_user_turn_naming_the_function() -> None:
    shaped = normalize(CONVERSATION, for_tools=False)
    assert shaped[-1] == {
        "role": "user",
        "content": 'functions.get_order returned:\n{"status": "shipped"}',
    }


def test_a_tool_call_is_written_into_the_assistant_text_for_the_plain_template() -> None:
    shaped = normalize(CONVERSATION, for_tools=False)
    assert shaped[1] == {
        "role": "assistant",
        "content": 'functions.get_order:\n{"order_id": "A1234"}',
    }


def test_with_tools_the_call_stays_structured_and_a_system_turn_carries_the_tool_list() -> None:
    shaped = normalize(CONVERSATION, for_tools=True)
    assert shaped[0] == {"role": "system", "content": TOOLS_SYSTEM_PROMPT}
    assert shaped[2]["tool_calls"][0]["function"] == {
        "name": "get_order",
        "arguments": '{"order_id": "A1234"}',
    }


def test_text_parts_are_joined() -> None:
    parts = [{"type": "text", "text": "What is "}, {"type": "text", "text": "2 + 3?"}]
    shaped = normalize([{"role": "user", "content": parts}], for_tools=False)
    assert shaped == [{"role": "user", "content": "What is 2 + 3?"}]
