"""What the backend does when the server misbehaves: served by the fault server over real HTTP,
never by patched functions. Retries are counted, Retry-After is obeyed, each failed call raises
BackendError with a kind, and the other calls carry on."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from whileai.backends import BackendError, Completion
from whileai.registry import Registry
from whileai_openai.backend import OpenAICompatibleBackend
from whileai_openai.retry import RetryPolicy
from whileai_openai.testing import FaultServer, Reply
from whileai_openai.testing.fault_server import DEFAULT_MODEL

HELLO = [{"role": "user", "content": "hello"}]
#: Both ways the backend can move bytes must classify faults the same way.
TRANSPORTS = pytest.mark.parametrize("transport", ["httptools", "aiohttp", "httpx"])


def run(backend: OpenAICompatibleBackend, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run ``make()`` on a fresh event loop and close the backend's connections on it."""

    async def go() -> Any:
        try:
            return await make()
        finally:
            await backend.aclose()

    return asyncio.run(go())


def backend_for(
    registry: Registry, server: FaultServer, retry: RetryPolicy, **options: Any
) -> OpenAICompatibleBackend:
    options.setdefault("model", DEFAULT_MODEL)  # so the only requests are the chat ones
    backend = registry.resolve("backend", server.url, retry=retry, jitter_seed=0, **options)
    assert isinstance(backend, OpenAICompatibleBackend)
    return backend


def test_rate_limit_and_server_errors_are_retried_and_counted(
    registry: Registry, fault_server: FaultServer, fast_retry: RetryPolicy
) -> None:
    fault_server.push(Reply.rate_limited(retry_after=0.2), Reply.error(500), Reply.error(503))
    backend = backend_for(registry, fault_server, fast_retry)

    reply: Completion = run(backend, lambda: backend.complete(HELLO))

    assert reply.text == "echo: hello"
    assert reply.retries == 3
    assert len(fault_server.requests) == 4
    stats = backend.stats
    assert (stats.calls, stats.succeeded, stats.failed) == (1, 1, 0)
    assert (stats.requests, stats.retries, stats.waits, stats.rate_limited) == (4, 3, 3, 1)
    assert stats.errors == {"rate_limited": 1, "http_500": 1, "http_503": 1}
    # the run can say it waited: the Retry-After alone was 0.2 s
    assert reply.waited_s >= 0.2
    assert stats.waited_s >= reply.waited_s
    assert "3 retries" in stats.summary() and "1 rate-limit answer;" in stats.summary()


@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_retry_after_is_a_floor_on_the_wait(
    registry: Registry, fault_server: FaultServer, fast_retry: RetryPolicy, form: str
) -> None:
    if form == "seconds":
        header: str | float = 1
        floor = 1.0
    else:
        # An HTTP date has whole seconds: three seconds ahead, truncated, is more than two
        # seconds away when sent, so at least one second away by the time the answer is read.
        header = email.utils.formatdate(time.time() + 3, usegmt=True)
        floor = 1.0
    fault_server.push(Reply.rate_limited(retry_after=header))
    backend = backend_for(registry, fault_server, fast_retry)

    reply: Completion = run(backend, lambda: backend.complete(HELLO))

    assert reply.retries == 1
    assert reply.waited_s >= floor
    assert backend.stats.waited_s >= floor
    # without the header the fast policy would have waited at most 0.05 s
    assert backend.stats.waits == 1


def test_a_retry_after_beyond_the_cap_fails_the_call_saying_so(
    registry: Registry, fault_server: FaultServer
) -> None:
    fault_server.push(Reply.rate_limited(retry_after=3600))
    backend = backend_for(registry, fault_server, RetryPolicy(max_retry_after_s=30))
    with pytest.raises(BackendError) as caught:
        run(backend, lambda: backend.complete(HELLO))
    assert caught.value.kind == "rate_limited"
    assert "3600" in str(caught.value) and "max_retry_after_s=30" in str(caught.value)
    assert backend.stats.waited_s == 0
    assert backend.stats.failures == {"rate_limited": 1}


@pytest.mark.parametrize(
    ("reply", "kind", "requests"),
    [
        (Reply.malformed(), "malformed", 1),
        (Reply.empty(), "empty", 1),
        (Reply.error(400), "http_400", 1),
        (Reply.cut(), "connection", 4),
        (Reply.error(500), "http_500", 4),
        (Reply.rate_limited(retry_after=0), "rate_limited", 4),
        (Reply.canned({"object": "chat.completion"}), "malformed", 1),
    ],
    ids=["malformed", "empty", "http_400", "cut", "http_500", "rate_limited", "no_choices"],
)
@TRANSPORTS
def test_each_failure_raises_backend_error_with_its_kind(
    registry: Registry,
    fault_server: FaultServer,
    fast_retry: RetryPolicy,
    reply: Reply,
    kind: str,
    requests: int,
    transport: str,
) -> None:
    # a broken answer is not retried (it is a bug to see); transient ones are, up to the cap
    fault_server.push(*[reply] * 4)
    backend = backend_for(registry, fault_server, fast_retry, transport=transport)
    with pytest.raises(BackendError) as caught:
        run(backend, lambda: backend.complete(HELLO))
    error = caught.value
    assert error.kind == kind
    assert error.retries == requests - 1
    assert backend.name in str(error)
    assert len(fault_server.requests) == requests
    assert backend.stats.failures == {kind: 1}
    assert backend.stats.errors == {kind: requests}


@TRANSPORTS
def test_a_slow_server_is_a_timeout(
    registry: Registry, fault_server: FaultServer, transport: str
) -> None:
    fault_server.push(Reply.slow(2.0), Reply.slow(2.0))
    backend = backend_for(
        registry,
        fault_server,
        RetryPolicy(max_retries=1, base_delay_s=0.01),
        timeout=0.3,
        transport=transport,
    )
    with pytest.raises(BackendError) as caught:
        run(backend, lambda: backend.complete(HELLO))
    assert caught.value.kind == "timeout"
    assert caught.value.retries == 1
    assert "timed out" in str(caught.value)


def test_one_failing_call_does_not_stop_the_others(
    registry: Registry, fault_server: FaultServer
) -> None:
    # the first request to arrive gets a broken body; the other seven are answered normally
    fault_server.push(Reply.malformed())
    backend = backend_for(registry, fault_server, RetryPolicy(max_retries=0))

    async def many() -> list[Any]:
        calls = [backend.complete([{"role": "user", "content": f"q{i}"}]) for i in range(8)]
        return await asyncio.gather(*calls, return_exceptions=True)

    results = run(backend, many)
    errors = [r for r in results if isinstance(r, BaseException)]
    answers = [r for r in results if isinstance(r, Completion)]
    assert len(errors) == 1 and isinstance(errors[0], BackendError)
    assert errors[0].kind == "malformed"
    assert len(answers) == 7 and all(a.text.startswith("echo: q") for a in answers)
    assert (backend.stats.succeeded, backend.stats.failed) == (7, 1)


@TRANSPORTS
def test_concurrency_bounds_requests_in_flight(
    registry: Registry, fault_server: FaultServer, fast_retry: RetryPolicy, transport: str
) -> None:
    fault_server.app.latency_s = 0.05
    backend = backend_for(registry, fault_server, fast_retry, concurrency=4, transport=transport)

    async def many() -> list[Completion]:
        return await asyncio.gather(
            *[backend.complete([{"role": "user", "content": f"q{i}"}]) for i in range(24)]
        )

    answers = run(backend, many)
    assert sorted(a.text for a in answers) == sorted(f"echo: q{i}" for i in range(24))
    # bounded, and the bound was actually used
    assert fault_server.max_in_flight == 4


def test_a_rate_limit_pauses_every_caller_of_the_backend(
    registry: Registry, fault_server: FaultServer, fast_retry: RetryPolicy
) -> None:
    # One 429 with Retry-After 0.5 s, then slow answers: the callers that start while the
    # first waits must wait out the same quota window rather than hammer the server.
    fault_server.push(Reply.rate_limited(retry_after=0.5))
    backend = backend_for(registry, fault_server, fast_retry)

    async def staggered() -> list[Completion]:
        first = asyncio.create_task(backend.complete(HELLO))
        while backend.stats.rate_limited == 0:  # let the first call hit the limit
            await asyncio.sleep(0.005)
        rest = [asyncio.create_task(backend.complete(HELLO)) for _ in range(3)]
        return [await first, *await asyncio.gather(*rest)]

    first, *rest = run(backend, staggered)
    assert first.retries == 1 and first.waited_s >= 0.5
    assert all(r.retries == 0 and r.waited_s > 0 for r in rest)
    assert backend.stats.rate_limited == 1
    assert len(fault_server.requests) == 5


def test_a_backend_serves_successive_event_loops(
    registry: Registry, fault_server: FaultServer, fast_retry: RetryPolicy
) -> None:
    backend = backend_for(registry, fault_server, fast_retry)
    assert run(backend, lambda: backend.complete(HELLO)).text == "echo: hello"
    assert run(backend, lambda: backend.complete(HELLO)).text == "echo: hello"
    assert backend.stats.succeeded == 2


@pytest.mark.parametrize("transport", ["auto", "aiohttp", "httpx"])
def test_the_environment_proxy_is_used(
    registry: Registry,
    fault_server: FaultServer,
    fast_retry: RetryPolicy,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    # The endpoint's host does not resolve; only the proxy (the fault server) can answer.
    proxy = fault_server.url.removesuffix("/v1")
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    backend = registry.resolve(
        "backend",
        f"vllm:{DEFAULT_MODEL}@http://upstream.invalid:8000/v1",
        environ={},
        retry=fast_retry,
        transport=transport,
    )
    reply: Completion = run(backend, lambda: backend.complete(HELLO))
    assert reply.text == "echo: hello"
    assert fault_server.requests[-1].headers["host"] == "upstream.invalid:8000"


def test_httptools_asked_for_by_name_refuses_a_proxied_endpoint(
    registry: Registry, fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It speaks no proxy protocol: going around the proxy the environment names would be a
    # silent change of route, so it says so instead.
    monkeypatch.setenv("HTTP_PROXY", fault_server.url.removesuffix("/v1"))
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    backend = registry.resolve(
        "backend",
        f"vllm:{DEFAULT_MODEL}@http://upstream.invalid:8000/v1",
        environ={},
        transport="httptools",
    )
    with pytest.raises(ValueError, match=r"transport='httptools' does not speak proxies.*auto"):
        run(backend, lambda: backend.complete(HELLO))


def test_the_fault_server_socket_turns_nagle_off_under_any_event_loop() -> None:
    # Without it, asyncio (unlike uvloop) leaves Nagle on for a socket whose proto is 0, and
    # every reply's body waits out the client's delayed ACK: 40 ms added to each request.
    import socket

    from whileai_openai.testing.fault_server import free_socket

    with free_socket() as sock:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
