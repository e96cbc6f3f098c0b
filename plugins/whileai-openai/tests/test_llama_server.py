"""The backend against a real OpenAI-compatible server: llama.cpp's, serving SmolLM2 on
loopback. Whatever the 135M model says, the plumbing (text, usage, logprobs, truncation, tool
calls, constrained JSON) must come back through the backend a spec resolves to."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from whileai.backends import Completion, resolve_backend
from whileai.registry import Registry

ASK = [{"role": "user", "content": "Name one colour of the sky."}]


def complete(backend: object, *args: object, **kwargs: object) -> Completion:
    async def run() -> Completion:
        try:
            return await backend.complete(*args, **kwargs)  # type: ignore[attr-defined]
        finally:
            await backend.aclose()  # type: ignore[attr-defined]

    return asyncio.run(run())


def test_bare_url_answers_with_usage_logprobs_and_resolved_sampling(
    llama_server: str, registry: Registry, served_model: str
) -> None:
    backend = registry.resolve("backend", llama_server)
    reply = complete(backend, ASK, sampling={"temperature": 0.0, "max_tokens": 12}, logprobs=True)

    assert reply.text.strip()
    # the model as the server reports it: llama.cpp names it by the file it serves
    assert reply.model == served_model
    assert reply.sampling == {"temperature": 0.0, "max_tokens": 12, "model": reply.model}
    assert reply.input_tokens is not None and reply.input_tokens > 5
    assert reply.output_tokens is not None and 1 <= reply.output_tokens <= 12
    # one logprob per generated token, summed: a real log-probability is negative and finite
    assert reply.n_tokens == reply.output_tokens
    assert reply.logprob is not None and math.isfinite(reply.logprob) and reply.logprob < 0
    assert backend.stats.succeeded == 1
    assert backend.stats.output_tokens == reply.output_tokens


def test_vllm_spec_with_url_and_the_token_cap_marks_a_truncated_turn(
    llama_server: str, registry: Registry, served_model: str
) -> None:
    model = served_model
    backend = resolve_backend(f"vllm:{model}@{llama_server}", registry=registry)
    reply = complete(
        backend,
        [{"role": "user", "content": "Write a long story about a lighthouse keeper."}],
        sampling={"temperature": 0.0, "max_tokens": 4},
    )
    assert reply.finish_reason == "truncated"
    assert reply.truncated
    assert reply.output_tokens == 4
    assert backend.name == f"vllm:{model}@{llama_server}"


def test_same_seed_at_temperature_zero_gives_the_same_answer(
    llama_server: str, registry: Registry, served_model: str
) -> None:
    backend = registry.resolve("backend", llama_server)
    sampling = {"temperature": 0.0, "max_tokens": 10, "seed": 7}
    first = complete(backend, ASK, sampling=sampling, logprobs=True)
    second = complete(backend, ASK, sampling=sampling, logprobs=True)
    assert first.text == second.text
    assert first.logprob == pytest.approx(second.logprob, abs=1e-3)


def test_json_object_with_a_schema_comes_back_as_json_that_fits_it(
    llama_server: str, registry: Registry, served_model: str
) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    backend = registry.resolve("backend", llama_server)
    reply = complete(
        backend,
        [{"role": "user", "content": "Describe a person as JSON with a name and an age."}],
        sampling={"temperature": 0.0, "max_tokens": 60},
        response_format={"type": "json_object", "schema": schema},
    )
    data = json.loads(reply.text)
    assert isinstance(data["name"], str) and isinstance(data["age"], int)


def test_openai_json_schema_form_is_rephrased_for_llama_cpp_when_asked(
    llama_server: str, registry: Registry, served_model: str
) -> None:
    # llama.cpp's server rejects OpenAI's json_schema form; json_schema_mode="json_object"
    # sends the same schema the way it understands, so one writer prompt serves both.
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    backend = registry.resolve("backend", llama_server, json_schema_mode="json_object")
    reply = complete(
        backend,
        [{"role": "user", "content": "Name a city, as JSON."}],
        sampling={"temperature": 0.0, "max_tokens": 40},
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
    )
    assert isinstance(json.loads(reply.text)["city"], str)


def test_tool_call_from_the_real_server_is_parsed(llama_server: str, registry: Registry) -> None:
    get_order = {
        "name": "get_order",
        "description": "Look up an order by its id",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    }
    # tool_choice is a server option, not part of every call: it rides in extra_body
    backend = registry.resolve(
        "backend",
        llama_server,
        extra_body={"tool_choice": {"type": "function", "function": {"name": "get_order"}}},
    )
    reply = complete(
        backend,
        [{"role": "user", "content": "Where is my order A1234?"}],
        tools=[get_order],
        sampling={"temperature": 0.0, "max_tokens": 40},
    )
    assert reply.finish_reason == "tool_calls"
    assert [call.name for call in reply.tool_calls] == ["get_order"]
    call = reply.tool_calls[0]
    assert call.id
    # a 135M model may write broken arguments; then they are kept verbatim, never dropped
    if call.raw_arguments is None:
        assert isinstance(call.arguments.get("order_id"), str)
    else:
        assert call.raw_arguments.lstrip().startswith("{")
        assert call.arguments == {}


def test_bare_url_takes_the_model_the_server_lists(
    llama_server: str, registry: Registry, served_model: str
) -> None:
    backend = registry.resolve("backend", llama_server)
    assert backend.model is None
    assert asyncio.run(backend.resolve_model()) == served_model


def test_a_second_identical_evaluate_sends_the_server_no_request(
    llama_server: str, registry: Registry, tmp_path: object
) -> None:
    import whileai as wai

    backend = registry.resolve("backend", llama_server)

    def evaluate() -> object:
        return wai.evaluate(
            backend,
            ["Name one colour of the sky.", "Name one fruit."],
            judge=lambda prompt, completion: 1.0,
            repeats=2,
            sampling={"temperature": 0.0, "max_tokens": 8},
            concurrency=2,
            registry=registry,
            cache=tmp_path,
        )

    try:
        first = evaluate()
        sent = backend.stats.requests
        assert sent >= 4  # four answers (and the model listing a bare URL asks for)
        second = evaluate()
        assert backend.stats.requests == sent  # every answer came from the cache
    finally:
        asyncio.run(backend.aclose())
    assert [r["final_text"] for r in second.rows] == [r["final_text"] for r in first.rows]
    assert [r["usage"] for r in second.rows] == [r["usage"] for r in first.rows]
    assert second.report()["cache"]["hits"] == 4
    assert second.report()["cache"]["input_tokens_saved"] > 0
