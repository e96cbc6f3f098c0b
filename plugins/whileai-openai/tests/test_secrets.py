"""An API key reaches the server and nowhere else: not in errors, tracebacks, logs, reprs or
the counters a report carries."""

from __future__ import annotations

import asyncio
import logging
import traceback

import pytest

from whileai.backends import BackendError
from whileai.registry import Registry
from whileai_openai.retry import RetryPolicy
from whileai_openai.testing import FaultServer, Reply

PLANTED = "sk-planted-7f3a9c1e5b"


def test_the_key_is_sent_but_never_shown(
    registry: Registry,
    fault_server: FaultServer,
    fast_retry: RetryPolicy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    env = {"WHILEAI_API_KEY": PLANTED}
    backend = registry.resolve(
        "backend", f"vllm:m@{fault_server.url}", environ=env, retry=fast_retry
    )
    # a server that echoes the key in its error body must not leak it either
    fault_server.push(
        Reply.canned({"error": {"message": f"bad key {PLANTED}"}}, status=401),
        Reply.rate_limited(retry_after=0),
        *[Reply.error(500)] * 4,
        Reply.malformed(),
        Reply.empty(),
        *[Reply.cut()] * 4,
    )
    shown: list[str] = [repr(backend), str(backend), str(backend.stats.as_dict())]

    async def calls() -> None:
        async with backend:
            for _ in range(5):
                try:
                    await backend.complete([{"role": "user", "content": "hi"}])
                except BackendError as error:
                    shown.extend([str(error), repr(error), error.kind])
                    shown.append("".join(traceback.format_exception(error)))

    asyncio.run(calls())

    assert fault_server.requests[0].headers["authorization"] == f"Bearer {PLANTED}"
    assert backend.stats.failed == 5
    shown.extend([repr(backend), str(backend.stats.as_dict()), backend.stats.summary()])
    shown.extend(record.getMessage() for record in caplog.records)
    shown.append(caplog.text)
    assert all(PLANTED not in text for text in shown)
    assert any("bad key ***" in text for text in shown)
    assert "api_key='***'" in repr(backend)
