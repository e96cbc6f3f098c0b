"""No transport ever hands one request another's answer: interim 1xx responses (100 Continue,
103 Early Hints) are skipped, and a stray extra response is never read as the next request's
answer. A raw asyncio server on loopback sends exactly the bytes each case needs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from whileai_openai.transports import NAMES, Settings, TransportFailure, make_transport

TRANSPORTS = [name for name in NAMES if name != "auto"]


def answer(body: object, status: str = "200 OK", extra: str = "") -> bytes:
    data = json.dumps(body).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
    return head.encode() + b"Content-Length: %d\r\n\r\n" % len(data) + data


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
EARLY_HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"


async def serve(replies: Callable[[int], bytes]) -> tuple[asyncio.Server, str]:
    """A server answering the n-th request it reads (over any connection) with
    ``replies(n)``, all bytes in one write."""
    count = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                if length:
                    await reader.readexactly(length)
                count += 1
                writer.write(replies(count))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1"


async def exchange_bodies(name: str, replies: Callable[[int], bytes], n: int) -> list[object]:
    server, url = await serve(replies)
    transport = make_transport(
        name,
        Settings(
            headers={}, concurrency=1, timeout=5.0, connect_timeout=2.0, tls=None, base_url=url
        ),
    )
    out: list[object] = []
    try:
        for i in range(n):
            try:
                got = await transport.send("POST", f"{url}/chat/completions", b'{"i": %d}' % i, 0)
                out.append((got.status, json.loads(got.content or b"null")))
            except TransportFailure as exc:
                out.append(("failed", exc.kind))
            await asyncio.sleep(0.05)  # let a stray response reach the idle connection
    finally:
        await transport.aclose()
        server.close()
        await server.wait_closed()
    return out


@pytest.mark.parametrize("name", TRANSPORTS)
def test_interim_responses_are_skipped_and_the_final_answer_is_the_requests_own(name: str) -> None:
    def replies(n: int) -> bytes:
        interim = CONTINUE + EARLY_HINTS if n == 1 else EARLY_HINTS
        return interim + answer({"n": n})

    got = asyncio.run(exchange_bodies(name, replies, 3))
    assert got == [(200, {"n": 1}), (200, {"n": 2}), (200, {"n": 3})]


@pytest.mark.parametrize("name", TRANSPORTS)
def test_a_stray_extra_response_never_becomes_the_next_requests_answer(name: str) -> None:
    def replies(n: int) -> bytes:
        stray = answer({"n": "stray"}) if n == 1 else b""
        return answer({"n": n}) + stray

    got = asyncio.run(exchange_bodies(name, replies, 3))
    assert got[0] == (200, {"n": 1})
    assert all(body != (200, {"n": "stray"}) for body in got), got
    # the poisoned connection is dropped: every later request gets its own answer
    assert got[1:] == [(200, {"n": 2}), (200, {"n": 3})]


def gzipped(body: object) -> bytes:
    import gzip

    data = gzip.compress(json.dumps(body).encode())
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
    return head + b"Content-Length: %d\r\n\r\n" % len(data) + data


@pytest.mark.parametrize("name", TRANSPORTS)
def test_an_uninvited_gzip_body_is_decoded(name: str) -> None:
    got = asyncio.run(exchange_bodies(name, lambda n: gzipped({"n": n}), 2))
    assert got == [(200, {"n": 1}), (200, {"n": 2})]


@pytest.mark.parametrize("name", TRANSPORTS)
def test_oversized_response_headers_are_refused_not_read(name: str) -> None:
    huge = "X-Padding: " + "a" * 20_000 + "\r\n"
    got = asyncio.run(exchange_bodies(name, lambda n: answer({"n": n}, extra=huge), 1))
    assert got == [("failed", "connection")]


@pytest.mark.parametrize("name", TRANSPORTS)
def test_a_redirect_is_never_read_as_a_completion(name: str) -> None:
    from whileai.backends import BackendError
    from whileai_openai.backend import OpenAICompatibleBackend

    completion = {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "moved"}}],
    }

    async def go() -> None:
        server, url = await serve(
            lambda n: answer(completion, "302 Found", extra="Location: http://elsewhere/\r\n")
        )
        backend = OpenAICompatibleBackend(
            name="redirected", base_url=url, model="m", transport=name
        )
        try:
            await backend.complete([{"role": "user", "content": "hi"}])
        finally:
            await backend.aclose()
            server.close()
            await server.wait_closed()

    with pytest.raises(BackendError, match="answered HTTP 302, not a completion"):
        asyncio.run(go())


@pytest.mark.parametrize("name", TRANSPORTS)
def test_a_base_url_with_a_space_is_percent_encoded(name: str) -> None:
    seen: list[bytes] = []

    async def go() -> object:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            seen.append(head.split(b"\r\n", 1)[0])
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            writer.write(answer({"ok": True}))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}/my models/v1"
        transport = make_transport(
            name,
            Settings(
                headers={}, concurrency=1, timeout=5.0, connect_timeout=2.0, tls=None, base_url=url
            ),
        )
        try:
            got = await transport.send("POST", f"{url}/chat/completions", b"{}", 0)
            return json.loads(got.content)
        finally:
            await transport.aclose()
            server.close()
            await server.wait_closed()

    assert asyncio.run(go()) == {"ok": True}
    assert seen == [b"POST /my%20models/v1/chat/completions HTTP/1.1"]
