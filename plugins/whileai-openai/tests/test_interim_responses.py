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
