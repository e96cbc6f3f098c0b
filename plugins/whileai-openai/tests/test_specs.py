"""Which spec makes which backend, and where its URL, model and key come from."""

from __future__ import annotations

import asyncio

import pytest

from whileai.backends import Backend, Completion, default_spec, resolve_backend
from whileai.registry import Registry
from whileai_openai.backend import OpenAICompatibleBackend
from whileai_openai.specs import OPENAI_DEFAULT_BASE_URL, normalize_base_url
from whileai_openai.testing import FaultServer
from whileai_openai.testing.fault_server import DEFAULT_MODEL


def test_the_three_providers_are_registered_by_this_distribution(registry: Registry) -> None:
    for name in ("openai", "vllm", "url"):
        entry, _ = registry.lookup("backend", f"{name}:x" if name != "url" else "http://h/v1")
        assert entry.distribution == "whileai-openai"


def test_openai_spec_reads_its_key_and_base_url_from_the_environment(registry: Registry) -> None:
    backend = registry.resolve("backend", "openai:gpt-4o-mini", environ={"OPENAI_API_KEY": "k"})
    assert isinstance(backend, Backend)
    assert (backend.name, backend.model) == ("openai:gpt-4o-mini", "gpt-4o-mini")
    assert backend.base_url == OPENAI_DEFAULT_BASE_URL
    # OpenAI's newer models take only max_completion_tokens
    assert backend.max_tokens_field == "max_completion_tokens"

    proxied = registry.resolve(
        "backend", "openai:gpt-4o", environ={"OPENAI_BASE_URL": "http://proxy.local:9000/v1"}
    )
    assert proxied.base_url == "http://proxy.local:9000/v1"


def test_openai_spec_without_a_key_says_which_variable_to_set(registry: Registry) -> None:
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        registry.resolve("backend", "openai:gpt-4o", environ={})
    with pytest.raises(ValueError, match="needs a model name"):
        registry.resolve("backend", "openai:", environ={"OPENAI_API_KEY": "k"})


def test_vllm_spec_carries_model_and_url(registry: Registry) -> None:
    backend = registry.resolve(
        "backend", "vllm:Qwen/Qwen2.5-7B-Instruct@http://gpu-box:8000", environ={}
    )
    assert backend.model == "Qwen/Qwen2.5-7B-Instruct"
    assert backend.base_url == "http://gpu-box:8000/v1"
    assert backend.name == "vllm:Qwen/Qwen2.5-7B-Instruct@http://gpu-box:8000/v1"


def test_vllm_spec_without_url_uses_whileai_base_url_or_says_how(registry: Registry) -> None:
    backend = registry.resolve(
        "backend", "vllm:microsoft/phi-4", environ={"WHILEAI_BASE_URL": "https://api.example/v1"}
    )
    assert backend.base_url == "https://api.example/v1"
    with pytest.raises(ValueError, match="WHILEAI_BASE_URL"):
        registry.resolve("backend", "vllm:microsoft/phi-4", environ={})


def test_the_hosted_defaults_resolve_to_this_backend(registry: Registry) -> None:
    env = {"WHILEAI_BASE_URL": "https://api.example/v1", "WHILEAI_API_KEY": "k"}
    spec, why = default_spec("judge", env)
    backend = resolve_backend(spec, role="judge", registry=registry, environ=env)
    assert isinstance(backend, OpenAICompatibleBackend)
    assert backend.model == "microsoft/phi-4"
    assert "WHILEAI_BASE_URL" in why


@pytest.mark.parametrize(
    ("given", "root"),
    [
        ("http://localhost:8000", "http://localhost:8000/v1"),
        ("http://localhost:8000/", "http://localhost:8000/v1"),
        ("http://localhost:8000/v1/", "http://localhost:8000/v1"),
        ("http://localhost:8000/v1/chat/completions", "http://localhost:8000/v1"),
        ("https://gw.example/openai/v1", "https://gw.example/openai/v1"),
    ],
)
def test_a_url_is_normalised_to_the_api_root(given: str, root: str) -> None:
    assert normalize_base_url(given) == root


def test_bad_urls_and_options_are_named(registry: Registry) -> None:
    with pytest.raises(ValueError, match="must not carry credentials"):
        registry.resolve("backend", "http://user:secret@host/v1")
    with pytest.raises(ValueError, match="concurrency"):
        registry.resolve("backend", "http://host/v1", concurrency=0)
    with pytest.raises(ValueError, match="json_schema_mode"):
        registry.resolve("backend", "http://host/v1", json_schema_mode="grammar")


def test_a_bare_url_asks_the_server_for_its_model(
    registry: Registry, fault_server: FaultServer
) -> None:
    backend = registry.resolve("backend", fault_server.url)
    assert backend.model is None

    async def ask() -> str:
        async with backend:
            reply: Completion = await backend.complete([{"role": "user", "content": "hi"}])
            return reply.model

    assert asyncio.run(ask()) == DEFAULT_MODEL
    assert [r.path for r in fault_server.requests] == ["/v1/models", "/v1/chat/completions"]
    assert fault_server.requests[1].body["model"] == DEFAULT_MODEL
