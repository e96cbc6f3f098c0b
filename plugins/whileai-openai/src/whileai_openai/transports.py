"""How a backend moves bytes: one HTTP exchange, over httptools, aiohttp or httpx.

All three give the backend the same thing (status, Retry-After, body) and fail the same way
(:class:`TransportFailure` with kind ``timeout`` or ``connection``), so retries, counters and
error kinds do not depend on the client underneath. Each belongs to one event loop.

Why three: client CPU per request decides how close a run with hundreds of requests in flight
gets to the server's own speed. Measured here (a 50 ms stub, 256 in flight, a whole backend
call): about 80 us on ``httptools`` (:mod:`whileai_openai.http1`, keep-alive connections
parsed by llhttp), about 160 us on aiohttp, and about 900 us on httpx even with its connections
spread over small pools (one pool of 64 cost 6.6 ms: httpcore scans its connections on every
request). ``auto``, the default, is aiohttp: a well-kept client with TLS, proxies,
compression and interim-response handling of its own, whose CPU per call is irrelevant at model
latencies. ``httptools`` is an opt-in for a local high-throughput server (no proxies, no
compression, no redirects); httpx stays for environments that standardise on it. Every one
must pass tests/test_interim_responses.py: a 1xx interim head is skipped, and bytes no request
asked for drop their connection, so no request is ever handed another's answer.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Protocol

import aiohttp
import aiohttp.helpers
import attrs
import httpx
import yarl

NAMES = ("auto", "httptools", "aiohttp", "httpx")
#: Header bytes an answer may carry: aiohttp refuses a longer header line by itself
#: (8190 bytes); httptools and httpx are held to the same by this client.
MAX_HEADER_BYTES = 8 * 1024
#: Connections per httpx pool (see the module docstring for why pools are small).
HTTPX_CONNECTIONS_PER_POOL = 4


@attrs.frozen
class Exchange:
    """What the backend needs from an HTTP answer."""

    status: int
    retry_after: str | None
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class TransportFailure(Exception):
    """No HTTP answer: ``kind`` is ``timeout`` or ``connection``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class Transport(Protocol):
    #: how many pools requests are spread over; ``send``'s ``pool`` is below this
    pools: int

    async def send(self, method: str, url: str, body: bytes | None, pool: int) -> Exchange: ...

    async def aclose(self) -> None: ...


@attrs.frozen
class Settings:
    headers: Mapping[str, str]
    concurrency: int
    timeout: float
    connect_timeout: float
    #: a TLS context for an https endpoint, None for plain http
    tls: ssl.SSLContext | None
    #: the endpoint, so the transport can look up its proxy once
    base_url: str = ""


def make_transport(name: str, settings: Settings) -> Transport:
    if name == "auto":
        name = "aiohttp"
    if name == "httptools":
        routed = env_proxy(settings.base_url)
        if routed is not None:
            raise ValueError(
                f"transport='httptools' does not speak proxies, and the environment routes "
                f"{settings.base_url} through {_without_credentials(routed[0])}; use "
                "transport='auto' (the default) or 'aiohttp'"
            )
        from whileai_openai.http1 import Http1Transport  # it imports this module's records

        return Http1Transport(
            settings.base_url,
            settings.headers,
            timeout=settings.timeout,
            connect_timeout=settings.connect_timeout,
            tls=settings.tls,
        )
    if name == "aiohttp":
        return AiohttpTransport(settings)
    if name == "httpx":
        return HttpxTransport(settings)
    raise ValueError(f"transport must be one of {NAMES}, got {name!r}")


def _without_credentials(url: str) -> str:
    parts = yarl.URL(url)
    return str(parts.with_user(None)) if parts.user or parts.password else url


def env_proxy(base_url: str) -> tuple[str, aiohttp.BasicAuth | None] | None:
    """The proxy the environment (``HTTPS_PROXY``, ``NO_PROXY``, ...) routes ``base_url``
    through, with its credentials; None when it goes direct."""
    if not base_url:
        return None
    try:
        proxy, auth = aiohttp.helpers.get_env_proxy_for_url(yarl.URL(base_url))
    except LookupError:
        return None
    return str(proxy), auth


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class AiohttpTransport:
    """One aiohttp session whose connector holds ``concurrency`` connections."""

    pools = 1

    def __init__(self, settings: Settings) -> None:
        connector = aiohttp.TCPConnector(
            limit=settings.concurrency,
            limit_per_host=0,
            ssl=settings.tls if settings.tls is not None else False,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=dict(settings.headers),
            timeout=aiohttp.ClientTimeout(
                total=settings.timeout, sock_connect=settings.connect_timeout
            ),
            # Not trust_env: aiohttp would then look up proxies and .netrc in a worker thread
            # on every request. The environment's proxy is looked up once, below.
            trust_env=False,
        )
        self._proxy: str | None = None
        self._proxy_auth: aiohttp.BasicAuth | None = None
        routed = env_proxy(settings.base_url)
        if routed is not None:
            self._proxy, self._proxy_auth = routed

    async def send(self, method: str, url: str, body: bytes | None, pool: int) -> Exchange:
        try:
            async with self._session.request(
                method,
                url,
                data=body,
                allow_redirects=False,
                proxy=self._proxy,
                proxy_auth=self._proxy_auth,
            ) as response:
                content = await response.read()
                return Exchange(response.status, response.headers.get("Retry-After"), content)
        except TimeoutError as exc:  # aiohttp's timeouts all derive from it
            raise TransportFailure("timeout", _describe(exc)) from None
        except aiohttp.ClientError as exc:
            raise TransportFailure("connection", _describe(exc)) from None

    async def aclose(self) -> None:
        await self._session.close()


class HttpxTransport:
    """``httpx.AsyncClient``s whose small pools together hold ``concurrency`` connections."""

    def __init__(self, settings: Settings) -> None:
        self.pools = -(-settings.concurrency // HTTPX_CONNECTIONS_PER_POOL)
        per_pool = -(-settings.concurrency // self.pools)
        timeout = httpx.Timeout(
            settings.timeout, connect=min(settings.connect_timeout, settings.timeout)
        )
        self._clients = [
            httpx.AsyncClient(
                headers=dict(settings.headers),
                timeout=timeout,
                verify=settings.tls if settings.tls is not None else False,
                limits=httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool),
            )
            for _ in range(self.pools)
        ]
        # Parsed once: httpx otherwise parses the URL on every request.
        self._urls: dict[str, httpx.URL] = {}

    async def send(self, method: str, url: str, body: bytes | None, pool: int) -> Exchange:
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = self._urls[url] = httpx.URL(url)
        try:
            response = await self._clients[pool].request(method, parsed, content=body)
        except httpx.TimeoutException as exc:
            raise TransportFailure("timeout", _describe(exc)) from None
        except httpx.TransportError as exc:
            raise TransportFailure("connection", _describe(exc)) from None
        await self._drop_poisoned(pool)
        size = sum(len(k) + len(v) + 4 for k, v in response.headers.raw)
        if size > MAX_HEADER_BYTES:
            raise TransportFailure(
                "connection", f"the answer's headers exceed {MAX_HEADER_BYTES} bytes"
            )
        return Exchange(response.status_code, response.headers.get("retry-after"), response.content)

    async def _drop_poisoned(self, pool: int) -> None:
        """Close every idle connection of ``pool`` holding bytes no request asked for (a
        stray extra response), which h11 would otherwise read as the next request's answer.
        This reads httpcore's connection pool; tests/test_interim_responses.py fails if a
        new httpcore moves what it reads."""
        connections = getattr(
            getattr(self._clients[pool]._transport, "_pool", None), "connections", ()
        )
        for connection in list(connections):
            inner = getattr(connection, "_connection", None)
            state = getattr(inner, "_h11_state", None)
            if state is None or inner is None or not inner.is_idle():
                continue
            if state.trailing_data[0]:
                await inner.aclose()

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
