"""A lean HTTP/1.1 client for one endpoint: keep-alive connections on asyncio, answers parsed by
``httptools`` (llhttp, the parser Node.js and uvicorn use).

Why it exists: at hundreds of requests in flight the client's CPU per request sets how close a
run gets to the server's own speed. Measured here against a 50 ms stub at 256 in flight, a
backend call costs about 80 us of client CPU on this transport against about 160 us on aiohttp
(whose request and response objects, tracing hooks and cookie handling are most of that) and
about 900 us on httpx. Parsing and chunked decoding are llhttp's; this module only keeps the
connections.

What it does not do, and who does: proxies (the ``auto`` choice in
:func:`whileai_openai.transports.make_transport` hands a proxied endpoint to aiohttp), redirects
(the backend never follows them), compression (no ``Accept-Encoding`` is sent, so answers come
as they are), HTTP/2.
"""

from __future__ import annotations

import asyncio
import gzip
import ssl
import urllib.parse
import zlib
from collections.abc import Mapping

import httptools

from whileai_openai.transports import MAX_HEADER_BYTES, Exchange, TransportFailure


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one exchange on it at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[Exchange] | None = None
        self.chunks: list[bytes] = []
        self.retry_after: str | None = None
        self.keep_alive = False
        # an answer with neither Content-Length nor chunked encoding ends when the server
        # closes the connection
        self.framed = False
        self.headers_done = False
        #: bytes of the current answer seen: a connection lost before any is safe to retry on
        self.received = 0
        self.closed = False
        #: the message being parsed is an interim 1xx response, not the answer
        self.interim = False
        #: bytes of header lines seen for the current message, capped as aiohttp and httpx do
        self.header_bytes = 0
        #: the answer's Content-Encoding (none is asked for; a server may send one anyway)
        self.encoding = ""

    # -- asyncio ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:
            # bytes no request asked for: whatever they are, they must never become the next
            # request's answer, so the connection is dropped
            self.close()
            return
        self.received += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(TransportFailure("connection", f"unreadable HTTP answer: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.headers_done and not self.framed and self.waiter is not None:
            self._finish()  # a close-delimited body is complete now
            return
        why = f": {exc}" if exc else ""
        if self.received:
            detail = f"the server closed the connection before the answer was complete{why}"
        else:
            detail = f"the server closed the connection without answering{why}"
        self._fail(TransportFailure("connection", detail))

    # -- httptools callbacks ---------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_bytes += len(name) + len(value) + 4
        if self.header_bytes > MAX_HEADER_BYTES:
            self._fail(
                TransportFailure(
                    "connection", f"the answer's headers exceed {MAX_HEADER_BYTES} bytes"
                )
            )
            self.close()
            return
        lowered = name.lower()
        if lowered == b"content-encoding":
            self.encoding = value.decode("latin-1").strip().lower()
        if lowered == b"retry-after":
            self.retry_after = value.decode("latin-1").strip()
        elif lowered == b"content-length" or (
            lowered == b"transfer-encoding" and b"chunked" in value.lower()
        ):
            self.framed = True

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        # 100 Continue, 103 Early Hints: interim heads before the answer (101 switches
        # protocols, which this client never asks for, so it is not skipped)
        self.interim = 100 <= status < 200 and status != 101
        if self.interim:
            self.retry_after = None
            self.framed = False
            self.header_bytes = 0
            self.encoding = ""
            return
        self.headers_done = True
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            self.chunks = []
            return
        if self.waiter is None:
            # a second answer to one request (or one nobody asked for): drop the connection
            self.close()
            return
        self._finish()

    # -- the exchange ----------------------------------------------------------------------
    def begin(self, request: bytes, waiter: asyncio.Future[Exchange]) -> None:
        self.waiter = waiter
        self.chunks = []
        self.retry_after = None
        self.keep_alive = False
        self.framed = False
        self.headers_done = False
        self.interim = False
        self.header_bytes = 0
        self.encoding = ""
        self.received = 0
        assert self.transport is not None
        self.transport.write(request)

    def _finish(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            status = self.parser.get_status_code()
            try:
                body = _decoded(b"".join(self.chunks), self.encoding)
            except (OSError, zlib.error) as exc:
                waiter.set_exception(
                    TransportFailure("connection", f"unreadable {self.encoding} body: {exc}")
                )
            else:
                waiter.set_result(Exchange(status, self.retry_after, body))
        self.chunks = []

    def _fail(self, failure: TransportFailure) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(failure)

    @property
    def reusable(self) -> bool:
        return self.keep_alive and not self.closed and self.waiter is None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _decoded(body: bytes, encoding: str) -> bytes:
    """``body`` without its Content-Encoding (gzip, deflate); as it is for none."""
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip"):
        return gzip.decompress(body)
    if encoding == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)  # raw deflate, as some servers send
    raise OSError(f"Content-Encoding {encoding!r} is not one this transport decodes")


def _header_block(headers: Mapping[str, str]) -> bytes:
    lines = []
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0") or not name or ":" in name:
            # a header that would end the head early is a request smuggled into ours
            raise ValueError(f"header {name!r} contains a line break, NUL or a bad name")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode("latin-1")


class Http1Transport:
    """Keep-alive HTTP/1.1 connections to one endpoint, reused last-in first-out.

    The backend's slots bound how many exchanges run at once, so at most ``concurrency``
    connections are ever open.
    """

    pools = 1

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        connect_timeout: float,
        tls: ssl.SSLContext | None,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http(s) URL with a host, got {base_url!r}")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._tls = tls if parts.scheme == "https" else None
        if parts.scheme == "https" and self._tls is None:
            self._tls = ssl.create_default_context()
        self._origin = f"{parts.scheme}://{parts.netloc}"
        host_header = parts.netloc.rpartition("@")[2]
        self._head_tail = _header_block({"Host": host_header, **headers})
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._idle: list[_Connection] = []
        self._targets: dict[str, bytes] = {}

    def _target(self, method: str, url: str) -> bytes:
        line = self._targets.get(url)
        if line is None:
            if not url.startswith(self._origin):
                raise ValueError(f"{url!r} is not on this transport's endpoint {self._origin!r}")
            parts = urllib.parse.urlsplit(url)
            # a space (or anything outside ASCII) in the path would split the request line
            path = urllib.parse.quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
            path += f"?{parts.query}" if parts.query else ""
            line = self._targets[url] = path.encode("ascii")
        return method.encode("ascii") + b" " + line + b" HTTP/1.1\r\n"

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, connection = await loop.create_connection(
                    _Connection,
                    self._host,
                    self._port,
                    ssl=self._tls,
                    server_hostname=self._host if self._tls else None,
                )
        except TimeoutError:
            raise TransportFailure(
                "timeout", f"no connection to {self._origin} within {self._connect_timeout:g} s"
            ) from None
        except (OSError, ssl.SSLError) as exc:
            raise TransportFailure("connection", f"{type(exc).__name__}: {exc}") from None
        return connection

    def _take_idle(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable:
                return connection
        return None

    async def send(self, method: str, url: str, body: bytes | None, pool: int) -> Exchange:
        request = self._target(method, url) + self._head_tail
        if body is not None:
            request += b"Content-Length: %d\r\n\r\n" % len(body) + body
        else:
            request += b"\r\n"
        loop = asyncio.get_running_loop()
        connection = self._take_idle()
        reused = connection is not None
        try:
            async with asyncio.timeout(self._timeout):
                while True:
                    if connection is None:
                        connection = await self._connect()
                    waiter: asyncio.Future[Exchange] = loop.create_future()
                    connection.begin(request, waiter)
                    try:
                        answer = await waiter
                    except TransportFailure:
                        # An idle connection the server closed as we wrote: it never saw the
                        # request, so send it once more on a new one. Anything else is a fault.
                        if reused and connection.received == 0:
                            connection, reused = None, False
                            continue
                        raise
                    break
        except TimeoutError:
            if connection is not None:
                connection.close()
            raise TransportFailure(
                "timeout", f"no complete answer within {self._timeout:g} s"
            ) from None
        except BaseException:
            # cancelled or failed mid-exchange: what the connection holds next is unknown
            if connection is not None:
                connection.close()
            raise
        if connection.reusable:
            self._idle.append(connection)
        else:
            connection.close()
        return answer

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
        # let the loop run the transports' close callbacks before it may be closed itself
        await asyncio.sleep(0)
