"""``embed(texts)`` on an OpenAI-compatible endpoint: the vectors a diversity search compares
situations by when ``advanced={"embedding_model": ...}`` names one (real HTTP, loopback)."""

from __future__ import annotations

import asyncio

import pytest

from whileai.backends import BackendError
from whileai.registry import Registry
from whileai_openai.testing.fault_server import FaultServer, Reply


def test_embed_returns_one_vector_per_text_in_order(
    fault_server: FaultServer, registry: Registry
) -> None:
    backend = registry.resolve("backend", fault_server.url)

    async def go() -> list[list[float]]:
        try:
            return await backend.embed(
                ["refund my teapot", "where is my parcel", "refund my teapot"]
            )
        finally:
            await backend.aclose()

    vectors = asyncio.run(go())
    assert len(vectors) == 3 and all(len(v) == 8 for v in vectors)
    assert vectors[0] == vectors[2] and vectors[0] != vectors[1]
    (request,) = [r for r in fault_server.requests if r.path.endswith("/embeddings")]
    assert request.body["input"] == ["refund my teapot", "where is my parcel", "refund my teapot"]
    assert request.body["model"] == fault_server.app.model


def test_an_unreadable_embeddings_answer_is_a_backend_error(
    fault_server: FaultServer, registry: Registry
) -> None:
    backend = registry.resolve("backend", fault_server.url)
    fault_server.push(
        Reply.canned({"data": [{"index": 0, "embedding": ["x"]}]}),
        Reply.canned({"data": []}),
    )

    async def go(texts: list[str]) -> list[list[float]]:
        try:
            return await backend.embed(texts)
        finally:
            await backend.aclose()

    assert asyncio.run(go([])) == []  # nothing to embed: no request at all
    with pytest.raises(BackendError, match="unreadable embeddings: a vector is not numbers"):
        asyncio.run(go(["a"]))
    with pytest.raises(BackendError, match="unreadable embeddings: expected 1 in 'data'"):
        asyncio.run(go(["a"]))
    assert len([r for r in fault_server.requests if r.path.endswith("/embeddings")]) == 2
