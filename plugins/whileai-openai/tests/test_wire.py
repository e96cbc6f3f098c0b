"""The OpenAI wire format both ways: what the backend sends (tools, response_format, logprobs,
sampling) as the server records it, and how it reads tool calls, finish reasons and logprobs
from answers in OpenAI's format."""

from __future__ import annotations

import asyncio
from typing import Any

from whileai.backends import Completion, ToolCall
from whileai.registry import Registry
from whileai_openai.testing import FaultServer, Reply
from whileai_openai.testing.fault_server import DEFAULT_MODEL, ECHO_TOKEN_LOGPROB

GET_ORDER = {
    "name": "get_order",
    "description": "Look up an order",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
}


def ask(backend: Any, messages: list[Any], **kwargs: Any) -> Completion:
    async def go() -> Completion:
        async with backend:
            reply: Completion = await backend.complete(messages, **kwargs)
            return reply

    return asyncio.run(go())


def test_request_carries_tools_sampling_logprobs_and_response_format(
    registry: Registry, fault_server: FaultServer
) -> None:
    backend = registry.resolve("backend", f"vllm:{DEFAULT_MODEL}@{fault_server.url}", environ={})
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    reply = ask(
        backend,
        [{"role": "user", "content": "one two"}],
        tools=[GET_ORDER],
        sampling={"temperature": 0.3, "max_tokens": 50, "top_p": 0.9, "seed": 4, "stop": ["\n"]},
        logprobs=True,
        response_format=fmt,
    )
    sent = fault_server.requests[-1].body
    assert sent["tools"] == [{"type": "function", "function": GET_ORDER}]
    assert sent["response_format"] == fmt
    assert (sent["temperature"], sent["max_tokens"], sent["top_p"], sent["seed"]) == (
        0.3, 50, 0.9, 4,
    )  # fmt: skip
    assert sent["stop"] == ["\n"]
    assert sent["logprobs"] is True and sent["top_logprobs"] == 0
    # the echo has three tokens, each with logprob -0.5
    assert (reply.n_tokens, reply.logprob) == (3, 3 * ECHO_TOKEN_LOGPROB)
    assert reply.sampling == {"temperature": 0.3, "max_tokens": 50, "model": DEFAULT_MODEL}
    assert (reply.input_tokens, reply.output_tokens) == (2, 3)


def test_backend_defaults_fill_what_the_call_leaves_out(
    registry: Registry, fault_server: FaultServer
) -> None:
    backend = registry.resolve(
        "backend", fault_server.url, model=DEFAULT_MODEL, temperature=0.0, max_tokens=2
    )
    reply = ask(backend, [{"role": "user", "content": "a b c d"}])
    assert reply.sampling == {"temperature": 0.0, "max_tokens": 2, "model": DEFAULT_MODEL}
    # the echo server cut the reply at two tokens and said "length": a truncated turn
    assert reply.finish_reason == "truncated"
    assert "logprobs" not in fault_server.requests[-1].body
    assert reply.logprob is None and reply.n_tokens is None


def test_tool_calls_are_parsed_and_broken_arguments_kept_verbatim(
    registry: Registry, fault_server: FaultServer
) -> None:
    fault_server.push(
        Reply.ok(
            tool_calls=[
                {"name": "get_order", "arguments": {"order_id": "A1234"}},
                {"name": "refund", "arguments": '{"order_id": "A12'},
            ]
        )
    )
    backend = registry.resolve("backend", fault_server.url, model=DEFAULT_MODEL)
    reply = ask(backend, [{"role": "user", "content": "where is A1234?"}], tools=[GET_ORDER])
    assert reply.finish_reason == "tool_calls"
    good, broken = reply.tool_calls
    assert (good.name, dict(good.arguments), good.raw_arguments) == (
        "get_order", {"order_id": "A1234"}, None,
    )  # fmt: skip
    assert (broken.name, dict(broken.arguments), broken.raw_arguments) == (
        "refund", {}, '{"order_id": "A12',
    )  # fmt: skip


def test_a_tool_call_goes_back_to_the_server_in_openai_format(
    registry: Registry, fault_server: FaultServer
) -> None:
    call = ToolCall(id="call_7", name="get_order", arguments={"order_id": "A1"})
    messages = [
        {"role": "user", "content": "where is A1?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_7", "content": '{"status": "shipped"}'},
    ]
    backend = registry.resolve("backend", fault_server.url, model=DEFAULT_MODEL)
    ask(backend, messages, tools=[GET_ORDER])
    sent = fault_server.requests[-1].body["messages"]
    assert sent[1]["tool_calls"] == [
        {
            "id": "call_7",
            "type": "function",
            "function": {"name": "get_order", "arguments": '{"order_id": "A1"}'},
        }
    ]
    assert sent[2] == messages[2]


def test_a_recorded_openai_answer_reads_fully(
    registry: Registry, fault_server: FaultServer
) -> None:
    # the shape OpenAI and vLLM return, logprobs included
    fault_server.push(
        Reply.canned(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Paris"},
                        "finish_reason": "stop",
                        "logprobs": {
                            "content": [
                                {"token": "Par", "logprob": -0.25, "top_logprobs": []},
                                {"token": "is", "logprob": -0.5, "top_logprobs": []},
                            ]
                        },
                    }
                ],
                "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14},
            }
        )
    )
    backend = registry.resolve("backend", fault_server.url, model="gpt-4o-mini")
    reply = ask(backend, [{"role": "user", "content": "Capital of France?"}], logprobs=True)
    assert reply.text == "Paris"
    # the model as the server reports it, not as asked
    assert reply.model == "gpt-4o-mini-2024-07-18"
    assert reply.sampling["model"] == "gpt-4o-mini-2024-07-18"
    assert (reply.logprob, reply.n_tokens) == (-0.75, 2)
    assert (reply.input_tokens, reply.output_tokens) == (12, 2)


def test_json_schema_mode_rephrases_for_servers_that_take_json_object(
    registry: Registry, fault_server: FaultServer
) -> None:
    schema = {"type": "object"}
    backend = registry.resolve(
        "backend", fault_server.url, model=DEFAULT_MODEL, json_schema_mode="json_object"
    )
    ask(
        backend,
        [{"role": "user", "content": "json please"}],
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    )
    assert fault_server.requests[-1].body["response_format"] == {
        "type": "json_object",
        "schema": schema,
    }


def test_prompt_tokens_the_server_served_from_its_cache_are_read(
    registry: Registry, fault_server: FaultServer
) -> None:
    fault_server.push(
        Reply.canned(
            {
                "id": "chatcmpl-2",
                "object": "chat.completion",
                "model": "gpt-4o-2024-08-06",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": 2048,
                    "completion_tokens": 3,
                    "prompt_tokens_details": {"cached_tokens": 1920},
                },
            }
        )
    )
    backend = registry.resolve("backend", fault_server.url, model="gpt-4o")
    reply = ask(backend, [{"role": "user", "content": "again"}])
    assert (reply.input_tokens, reply.cached_input_tokens) == (2048, 1920)
    assert backend.stats.cached_input_tokens == 1920
