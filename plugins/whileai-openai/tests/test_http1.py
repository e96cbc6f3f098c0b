"""The httptools transport against a server that writes raw bytes: how answers are framed,
when connections are kept, reused or dropped, and how each way of failing is reported."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from whileai_openai.http1 import Http1Transport
from whileai_openai.transports import TransportFailure

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head, await reader.readexactly(length)


def answer(body: bytes, *extra: bytes, status: bytes = b"200 OK") -> bytes:
    headers = b"".join(h + b"\r\n" for h in extra)
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Length: %d\r\n" % len(body) + headers + b"\r\n" + body
    )


class Served:
    """A loopback server running ``handler`` per connection, counting connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.heads: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> Served:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    def transport(self, **options: Any) -> Http1Transport:
        options.setdefault("timeout", 5.0)
        options.setdefault("connect_timeout", 5.0)
        options.setdefault("tls", None)
        return Http1Transport(self.url, {"Authorization": "Bearer k"}, **options)


def keep_answering(reply: Callable[[bytes], bytes]) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            _head, body = await read_request(reader)
            writer.write(reply(body))
            await writer.drain()

    return handler


def test_keep_alive_connections_are_reused_and_the_request_is_well_formed() -> None:
    async def go() -> None:
        heads: list[bytes] = []

        def reply(body: bytes) -> bytes:
            return answer(b"echo " + body)

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while True:
                head, body = await read_request(reader)
                heads.append(head)
                writer.write(reply(body))
                await writer.drain()

        async with Served(handler) as served:
            transport = served.transport()
            for i in range(5):
                got = await transport.send("POST", served.url + "/chat", b"%d" % i, 0)
                assert (got.status, got.content) == (200, b"echo %d" % i)
            await transport.aclose()
            host = served.url.split("/")[2]
        assert served.connections == 1
        first = heads[0].decode()
        assert first.startswith("POST /v1/chat HTTP/1.1\r\n")
        assert f"Host: {host}\r\n" in first
        assert "Authorization: Bearer k\r\n" in first and "Content-Length: 1\r\n" in first

    asyncio.run(go())


def test_a_chunked_answer_is_joined_and_retry_after_is_read() -> None:
    chunked = (
        b"HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\nRetry-After: 7\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    )

    async def go() -> None:
        async with Served(keep_answering(lambda _body: chunked)) as served:
            transport = served.transport()
            got = await transport.send("POST", served.url + "/x", b"{}", 0)
            again = await transport.send("GET", served.url + "/models", None, 0)
            await transport.aclose()
        assert (got.status, got.retry_after, got.content) == (429, "7", b"hello world")
        assert again.content == b"hello world"
        assert served.connections == 1

    asyncio.run(go())


def test_an_answer_framed_by_closing_the_connection_is_complete_at_the_close() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"a": 1}')
        await writer.drain()

    async def go() -> None:
        async with Served(handler) as served:
            transport = served.transport()
            first = await transport.send("POST", served.url + "/x", b"{}", 0)
            second = await transport.send("POST", served.url + "/x", b"{}", 0)
            await transport.aclose()
        assert first.content == second.content == b'{"a": 1}'
        assert served.connections == 2  # "Connection: close" is honoured

    asyncio.run(go())


def test_an_idle_connection_the_server_dropped_is_replaced_without_an_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # answers one request with keep-alive, then hangs up: the client learns only later
        _, body = await read_request(reader)
        writer.write(answer(body))
        await writer.drain()

    async def go() -> None:
        async with Served(handler) as served:
            transport = served.transport()
            assert (await transport.send("POST", served.url + "/x", b"1", 0)).content == b"1"
            await asyncio.sleep(0.05)
            assert (await transport.send("POST", served.url + "/x", b"2", 0)).content == b"2"
            await transport.aclose()
        assert served.connections == 2

    asyncio.run(go())


def test_an_answer_cut_midway_is_a_connection_failure_not_a_short_body() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial')
        await writer.drain()

    async def go() -> None:
        async with Served(handler) as served:
            transport = served.transport()
            with pytest.raises(TransportFailure, match="before the answer was complete") as err:
                await transport.send("POST", served.url + "/x", b"{}", 0)
            await transport.aclose()
        assert err.value.kind == "connection"

    asyncio.run(go())


def test_a_fresh_connection_closed_without_an_answer_is_not_resent() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)  # and hang up

    async def go() -> None:
        async with Served(handler) as served:
            transport = served.transport()
            with pytest.raises(TransportFailure, match="without answering"):
                await transport.send("POST", served.url + "/x", b"{}", 0)
            await transport.aclose()
        # a POST the server may have acted on is the backend's to retry, with its counters
        assert served.connections == 1

    asyncio.run(go())


def test_garbage_instead_of_http_is_a_connection_failure() -> None:
    async def go() -> None:
        async with Served(keep_answering(lambda _b: b"SSH-2.0-OpenSSH\r\n\r\n")) as served:
            transport = served.transport()
            with pytest.raises(TransportFailure, match="unreadable HTTP answer"):
                await transport.send("POST", served.url + "/x", b"{}", 0)
            await transport.aclose()

    asyncio.run(go())


def test_a_slow_answer_times_out_and_its_connection_is_not_reused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            _, body = await read_request(reader)
            if body == b"slow":
                await asyncio.sleep(1)
            writer.write(answer(body))
            await writer.drain()

    async def go() -> None:
        async with Served(handler) as served:
            transport = served.transport(timeout=0.2)
            with pytest.raises(TransportFailure, match=r"within 0\.2 s") as err:
                await transport.send("POST", served.url + "/x", b"slow", 0)
            assert err.value.kind == "timeout"
            # the late answer to "slow" must not be read as the answer to "fast"
            assert (await transport.send("POST", served.url + "/x", b"fast", 0)).content == b"fast"
            await transport.aclose()
        assert served.connections == 2

    asyncio.run(go())


def test_a_cancelled_exchange_drops_its_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            _, body = await read_request(reader)
            if body == b"slow":
                await asyncio.sleep(0.3)
            writer.write(answer(body))
            await writer.drain()

    async def go() -> None:
        async with Served(handler) as served:
            transport = served.transport()
            task = asyncio.create_task(transport.send("POST", served.url + "/x", b"slow", 0))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await transport.send("POST", served.url + "/x", b"next", 0)).content == b"next"
            await transport.aclose()
        assert served.connections == 2

    asyncio.run(go())


def test_nobody_listening_is_a_connection_failure() -> None:
    async def go() -> None:
        async with Served(keep_answering(answer)) as served:
            url = served.url
        transport = Http1Transport(url, {}, timeout=2.0, connect_timeout=2.0, tls=None)
        with pytest.raises(TransportFailure) as err:
            await transport.send("GET", url + "/models", None, 0)
        assert err.value.kind == "connection"

    asyncio.run(go())


@pytest.mark.parametrize(
    "headers",
    [{"Authorization": "Bearer k\r\nX-Evil: 1"}, {"X-A\nB": "v"}, {"": "v"}, {"A:B": "v"}],
)
def test_a_header_that_would_break_the_request_head_is_refused(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="line break, NUL or a bad name"):
        Http1Transport("http://127.0.0.1:9/v1", headers, timeout=1, connect_timeout=1, tls=None)


def test_only_http_urls_with_a_host_are_accepted() -> None:
    with pytest.raises(ValueError, match="base_url must be an http"):
        Http1Transport("ftp://example.org/v1", {}, timeout=1, connect_timeout=1, tls=None)
