"""The embedded model answering through the backend interface, the way the engine calls it.

These run the real SmolLM2-135M model with short replies, so the file takes seconds.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from whileai.backends import Backend, BackendError, Completion, resolve_backend
from whileai.registry import Registry
from whileai_local.backend import LocalBackend
from whileai_local.contexts import ContextKey, context_pool
from whileai_local.model_file import smollm2_file

ORDER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "Look up an order by its id",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}
SHOP_SYSTEM = {"role": "system", "content": "You are a helpful shop assistant."}
ASK_SUM = [{"role": "user", "content": "What is 2 + 3?"}]
ASK_STORY = [{"role": "user", "content": "Tell me a short story about a cat."}]


@pytest.fixture(scope="module")
def backend() -> Backend:
    return resolve_backend("local:smollm2", registry=Registry.load())


def complete(backend: Backend, messages: Any, **kwargs: Any) -> Completion:
    return asyncio.run(backend.complete(messages, **kwargs))


def test_the_spec_resolves_through_the_registry_to_the_embedded_model(backend: Backend) -> None:
    assert isinstance(backend, LocalBackend)
    assert backend.name == "local:smollm2"
    assert backend.model_file.path == smollm2_file()
    entry, argument = Registry.load().lookup("backend", "local:smollm2")
    assert (entry.name, argument) == ("local", "smollm2")
    assert entry.distribution == "whileai-local"


def test_an_answer_reports_text_usage_and_the_resolved_sampling(backend: Backend) -> None:
    reply = complete(backend, ASK_SUM, sampling={"temperature": 0, "max_tokens": 20})
    assert "5" in reply.text
    assert reply.model == "SmolLM2-135M-Instruct"
    assert reply.sampling == {"temperature": 0.0, "max_tokens": 20, "model": reply.model}
    assert reply.finish_reason == "stop"
    assert reply.input_tokens is not None and reply.input_tokens > 5
    assert reply.output_tokens is not None and 0 < reply.output_tokens <= 20
    assert reply.logprob is None and reply.n_tokens is None


def test_a_reply_cut_at_the_token_cap_is_truncated(backend: Backend) -> None:
    reply = complete(backend, ASK_STORY, sampling={"temperature": 0, "max_tokens": 4})
    assert reply.finish_reason == "truncated"
    assert reply.truncated
    assert reply.output_tokens == 4


def test_temperature_zero_is_deterministic(backend: Backend) -> None:
    sampling = {"temperature": 0, "max_tokens": 24}
    first = complete(backend, ASK_STORY, sampling=sampling)
    complete(backend, ASK_SUM, sampling=sampling)  # something else ran on the context between
    again = complete(backend, ASK_STORY, sampling=sampling)
    assert first.text == again.text


def test_a_fixed_seed_reproduces_a_sampled_reply_and_other_seeds_vary(backend: Backend) -> None:
    def story(seed: int) -> str:
        sampling = {"temperature": 0.7, "max_tokens": 24, "seed": seed}
        return complete(backend, ASK_STORY, sampling=sampling).text

    assert story(11) == story(11)
    assert len({story(seed) for seed in (1, 2, 3, 4)}) > 1


def test_unseeded_sampled_replies_vary(backend: Backend) -> None:
    sampling = {"temperature": 0.7, "max_tokens": 24}
    texts = {complete(backend, ASK_STORY, sampling=sampling).text for _ in range(4)}
    assert len(texts) > 1


def test_logprobs_sum_the_generated_tokens(backend: Backend) -> None:
    sampling = {"temperature": 0, "max_tokens": 16}
    plain = complete(backend, ASK_SUM, sampling=sampling)
    scored = complete(backend, ASK_SUM, sampling=sampling, logprobs=True)
    assert scored.text == plain.text
    assert scored.n_tokens == scored.output_tokens
    assert scored.logprob is not None and scored.logprob < 0
    # a log-probability per token: the mean cannot be below log(1/vocabulary size)
    assert scored.logprob / scored.n_tokens > -11


def test_a_question_about_an_order_calls_the_order_tool(backend: Backend) -> None:
    messages = [SHOP_SYSTEM, {"role": "user", "content": "Where is my order A1234?"}]
    reply = complete(backend, messages, tools=[ORDER_TOOL], sampling={"temperature": 0})
    assert reply.finish_reason == "tool_calls"
    assert [(call.name, dict(call.arguments)) for call in reply.tool_calls] == [
        ("get_order", {"order_id": "A1234"})
    ]
    assert reply.tool_calls[0].id
    assert reply.output_tokens is not None and reply.output_tokens > 0


def test_a_tool_call_reports_the_logprobs_of_every_token_it_chose(backend: Backend) -> None:
    messages = [SHOP_SYSTEM, {"role": "user", "content": "Where is my order A1234?"}]
    sampling = {"temperature": 0, "max_tokens": 40}
    reply = complete(backend, messages, tools=[ORDER_TOOL], sampling=sampling, logprobs=True)
    assert reply.tool_calls[0].name == "get_order"
    # the tool's name and its arguments, every step the model took this turn
    assert reply.n_tokens == reply.output_tokens
    assert reply.n_tokens is not None and reply.n_tokens > len('{"order_id": "A1234"}') // 4
    assert reply.logprob is not None and reply.logprob < 0


def test_tool_arguments_cut_at_the_token_cap_are_truncated_and_kept_raw(backend: Backend) -> None:
    note_tool = {
        "type": "function",
        "function": {
            "name": "write_note",
            "description": "Save a note for the customer",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    }
    messages = [
        SHOP_SYSTEM,
        {"role": "user", "content": "Save a note with the full history of Rome, in detail."},
    ]
    sampling = {"temperature": 0.7, "max_tokens": 8, "seed": 1}
    reply = complete(backend, messages, tools=[note_tool], sampling=sampling)
    assert reply.finish_reason == "truncated"
    (call,) = reply.tool_calls
    assert call.name == "write_note"
    assert call.arguments == {}
    assert call.raw_arguments is not None and call.raw_arguments.startswith("{")


def test_a_model_offered_tools_may_answer_in_text(backend: Backend) -> None:
    messages = [{"role": "user", "content": "Hi there! How are you today?"}]
    sampling = {"temperature": 0, "max_tokens": 24}
    reply = complete(backend, messages, tools=[ORDER_TOOL], sampling=sampling)
    assert reply.tool_calls == ()
    assert reply.text.strip()


def test_a_tool_result_goes_back_to_the_model(backend: Backend) -> None:
    messages = [
        SHOP_SYSTEM,
        {"role": "user", "content": "Where is my order A1234?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id": "A1234"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
    ]
    reply = complete(backend, messages, sampling={"temperature": 0, "max_tokens": 32})
    assert reply.text.strip()
    assert reply.finish_reason in {"stop", "truncated"}


def test_a_json_schema_constrains_the_reply(backend: Backend) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    messages = [{"role": "user", "content": "Invent a person: give a name and an age."}]
    for response_format in (
        {"type": "json_object", "schema": schema},
        {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}},
    ):
        reply = complete(
            backend,
            messages,
            sampling={"temperature": 0.7, "max_tokens": 48, "seed": 3},
            response_format=response_format,
        )
        jsonschema.validate(json.loads(reply.text), schema)


def test_rollouts_interleave_while_the_model_generates(backend: Backend) -> None:
    async def main() -> tuple[int, list[Completion]]:
        ticks = 0
        calls = [
            backend.complete(ASK_STORY, sampling={"temperature": 0.7, "max_tokens": 12, "seed": i})
            for i in range(4)
        ]
        pending = asyncio.ensure_future(asyncio.gather(*calls))
        while not pending.done():
            ticks += 1
            await asyncio.sleep(0.001)
        return ticks, await pending

    ticks, replies = asyncio.run(main())
    # the event loop kept running other work while the four generations were under way
    assert ticks > 1
    assert all(reply.output_tokens for reply in replies)
    key = ContextKey(smollm2_file(), False, None, 4096)
    pool = context_pool(key)
    # loaded once per process: every call so far shared at most one context per slot
    assert 1 <= pool.loaded <= pool.size


def test_a_second_backend_shares_the_loaded_model(backend: Backend) -> None:
    other = resolve_backend("local:smollm2", registry=Registry.load())
    assert other is not backend
    complete(other, ASK_SUM, sampling={"temperature": 0, "max_tokens": 4})
    pool = context_pool(ContextKey(smollm2_file(), False, None, 4096))
    assert pool.loaded <= pool.size


def test_a_path_to_a_gguf_file_is_a_spec_too() -> None:
    spec = f"local:{smollm2_file()}"
    backend = resolve_backend(spec, registry=Registry.load())
    reply = complete(backend, ASK_SUM, sampling={"temperature": 0, "max_tokens": 8})
    assert reply.model == "SmolLM2-135M-Instruct.Q4_1"
    assert reply.text


def test_a_conversation_longer_than_the_context_is_a_backend_error() -> None:
    backend = resolve_backend("local:smollm2", registry=Registry.load(), n_ctx=256)
    messages = [{"role": "user", "content": "word " * 400}]
    with pytest.raises(BackendError, match="256-token context") as caught:
        complete(backend, messages, sampling={"max_tokens": 4})
    assert caught.value.kind == "context_length"


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("local:/nowhere/model.gguf", FileNotFoundError, "no such model file"),
        ("local:gpt-4o", ValueError, "'smollm2' or a path to a .gguf"),
    ],
)
def test_a_spec_naming_no_model_says_so(spec: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        resolve_backend(spec, registry=Registry.load())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sampling": {"temperature": -1}}, "sampling.temperature"),
        ({"sampling": {"max_tokens": 0}}, "sampling.max_tokens"),
        ({"sampling": {"temprature": 0.5}}, "unknown keys"),
        ({"response_format": {"type": "xml"}}, "response_format type"),
        ({"response_format": {"type": "json_schema"}}, "json_schema"),
        ({"tools": [{"name": "get_order"}]}, r"tools\[0\]"),
    ],
)
def test_bad_arguments_are_named(backend: Backend, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        complete(backend, ASK_SUM, **kwargs)


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([], "messages is empty"),
        ([{"role": "robot", "content": "hi"}], r"messages\[0\]: role"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], r"messages\[0\].*text only"),
        ("What is 2 + 3?", "messages must be a list"),
    ],
)
def test_bad_messages_are_named(backend: Backend, messages: Any, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        complete(backend, messages)


def test_a_schema_llama_cpp_cannot_compile_is_an_error_not_any_json(backend: Backend) -> None:
    response_format = {"type": "json_object", "schema": {"type": "object", "$ref": "#/nowhere"}}
    with pytest.raises(ValueError, match="cannot be turned into a grammar"):
        complete(backend, ASK_SUM, response_format=response_format)


def test_loading_contexts_side_by_side_leaves_stdout_working() -> None:
    # llama-cpp-python silences model loading by redirecting the process's stdout; two loads
    # racing in two threads once left stdout on /dev/null for good.
    script = """
import asyncio
from whileai.backends import resolve_backend

backend = resolve_backend("local:smollm2", contexts=4)
print("before", flush=True)

async def main():
    question = [{"role": "user", "content": "What is 2 + 3?"}]
    sampling = {"temperature": 0, "max_tokens": 2}
    await asyncio.gather(*(backend.complete(question, sampling=sampling) for _ in range(8)))

asyncio.run(main())
print("after", flush=True)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["before", "after"]
