"""A small OpenAI-compatible server that misbehaves on purpose, for tests and benchmarks.

It is a raw ASGI app (:class:`FaultApp`) served by uvicorn on loopback, in a background thread
(:class:`FaultServer`, a context manager) or in its own process (``python -m
whileai_openai.testing --latency 0.05``, which prints its URL). Each
``POST /v1/chat/completions`` takes the next :class:`Reply` from a script (``server.push(...)``)
or, when the script is empty, the default: an echo of the last user message with usage and,
when asked, per-token logprobs. ``GET /v1/models`` lists the model. Every request is recorded,
with the most requests ever in flight at once::

    with FaultServer() as server:
        server.push(Reply.rate_limited(retry_after="1"), Reply.error(500), Reply.cut())
        backend = registry.resolve("backend", server.url, max_retries=3)
        ...
        assert server.max_in_flight <= 4
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import Any

import attrs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DEFAULT_MODEL = "fault-server-model"
#: the logprob the echo reply gives each of its tokens (so a sum is easy to check)
ECHO_TOKEN_LOGPROB = -0.5

REPLY_KINDS = ("ok", "canned", "rate_limited", "error", "cut", "malformed", "empty")


class _CutConnection(Exception):
    """Raised inside the app after the headers went out: uvicorn then drops the connection."""


@attrs.frozen
class Reply:
    """One scripted answer. Build it with the class methods."""

    kind: str = attrs.field(validator=attrs.validators.in_(REPLY_KINDS))
    status: int = 200
    #: seconds to wait before answering (a slow server)
    delay_s: float = 0.0
    retry_after: str | None = None
    #: for "ok": the reply text (None echoes the last user message), tool calls, finish reason
    text: str | None = None
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    finish_reason: str | None = None
    #: for "canned": the exact JSON body to send
    body: Any = None

    @classmethod
    def ok(
        cls,
        text: str | None = None,
        *,
        tool_calls: Iterable[Mapping[str, Any]] = (),
        finish_reason: str | None = None,
        delay_s: float = 0.0,
    ) -> Reply:
        """A normal answer. Tool calls are ``{"name", "arguments"}`` (arguments a dict, or a
        string sent verbatim) and go out in OpenAI's format."""
        return cls(
            "ok",
            text=text,
            tool_calls=tuple(tool_calls),
            finish_reason=finish_reason,
            delay_s=delay_s,
        )

    @classmethod
    def slow(cls, seconds: float, text: str | None = None) -> Reply:
        return cls.ok(text, delay_s=seconds)

    @classmethod
    def canned(cls, body: Any, *, status: int = 200) -> Reply:
        """Exactly this JSON body (a recorded OpenAI or vLLM answer, say)."""
        return cls("canned", status=status, body=body)

    @classmethod
    def rate_limited(cls, retry_after: str | float | None = None) -> Reply:
        """HTTP 429, with ``Retry-After`` in seconds (a number) or as an HTTP date (a string)."""
        return cls(
            "rate_limited",
            status=429,
            retry_after=None if retry_after is None else str(retry_after),
        )

    @classmethod
    def error(cls, status: int = 500, retry_after: str | float | None = None) -> Reply:
        return cls(
            "error", status=status, retry_after=None if retry_after is None else str(retry_after)
        )

    @classmethod
    def cut(cls) -> Reply:
        """Send the headers, then close the connection without the body."""
        return cls("cut")

    @classmethod
    def malformed(cls) -> Reply:
        """HTTP 200 with a body that is not JSON."""
        return cls("malformed")

    @classmethod
    def empty(cls) -> Reply:
        """HTTP 200 with ``"choices": []``."""
        return cls("empty")


@attrs.frozen
class Recorded:
    """A request the server received."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


class FaultApp:
    """The ASGI app. Thread-safe: the script and the records are shared with the test thread."""

    def __init__(self, *, model: str = DEFAULT_MODEL, latency_s: float = 0.0) -> None:
        self.model = model
        #: delay of every default (unscripted) reply
        self.latency_s = latency_s
        self._lock = threading.Lock()
        self._script: collections.deque[Reply] = collections.deque()
        self._requests: list[Recorded] = []
        self._in_flight = 0
        self._max_in_flight = 0
        # reset() starts a new generation: requests still running from before it (a slow
        # reply whose client gave up) no longer count as in flight
        self._generation = 0
        self.record = True

    # -- control from the test ------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._lock:
            return len(self._script)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self._generation += 1
            self._in_flight = 0
            self._max_in_flight = 0

    # -- ASGI -----------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        method, path = scope["method"], scope["path"]
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        with self._lock:
            if self.record:
                self._requests.append(Recorded(method, path, headers, body))
            generation = self._generation
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            reply = None
            answers = path.endswith(("/chat/completions", "/embeddings"))
            if method == "POST" and answers and self._script:
                reply = self._script.popleft()
        try:
            if method == "GET" and path.endswith("/models"):
                await _send_json(
                    send,
                    200,
                    {
                        "object": "list",
                        "data": [{"id": self.model, "object": "model", "owned_by": "whileai"}],
                    },
                )
            elif method == "POST" and path.endswith("/chat/completions"):
                await self._answer(send, reply or Reply.ok(delay_s=self.latency_s), body)
            elif method == "POST" and path.endswith("/embeddings"):
                if reply is not None:
                    await self._answer(send, reply, body)
                else:
                    await _send_json(send, 200, _embeddings(self.model, body))
            else:
                await _send_json(send, 404, {"error": {"message": f"no route {method} {path}"}})
        finally:
            with self._lock:
                if generation == self._generation:
                    self._in_flight -= 1

    async def _answer(self, send: Send, reply: Reply, request: Any) -> None:
        if reply.delay_s > 0:
            await asyncio.sleep(reply.delay_s)
        extra = [(b"retry-after", reply.retry_after.encode())] if reply.retry_after else []
        if reply.kind in ("rate_limited", "error"):
            message = "rate limit reached" if reply.status == 429 else "the server failed"
            await _send_json(send, reply.status, {"error": {"message": message}}, extra)
        elif reply.kind == "cut":
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", b"4096"),
                    ],
                }
            )
            raise _CutConnection("connection cut on purpose by the fault server")
        elif reply.kind == "malformed":
            await _send_raw(send, 200, b'{"choices": [{"message": {"content": "half', [])
        elif reply.kind == "empty":
            await _send_json(
                send,
                200,
                {
                    "id": "chatcmpl-empty",
                    "object": "chat.completion",
                    "model": self.model,
                    "choices": [],
                },
            )
        elif reply.kind == "canned":
            await _send_json(send, reply.status, reply.body)
        else:
            await _send_json(send, 200, self._completion(reply, request))

    def _completion(self, reply: Reply, request: Any) -> dict[str, Any]:
        request = request if isinstance(request, Mapping) else {}
        messages = request.get("messages") or []
        users = [
            m.get("content") for m in messages if isinstance(m, Mapping) and m.get("role") == "user"
        ]
        text = reply.text if reply.text is not None else f"echo: {users[-1] if users else ''}"
        tokens = text.split() or [""]
        limit = request.get("max_tokens") or request.get("max_completion_tokens")
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        if reply.finish_reason is None and isinstance(limit, int) and len(tokens) > limit:
            tokens, finish = tokens[:limit], "length"
            text = " ".join(tokens)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if reply.tool_calls:
            message["content"] = reply.text
            message["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": call["arguments"]
                        if isinstance(call.get("arguments"), str)
                        else json.dumps(call.get("arguments", {})),
                    },
                }
                for i, call in enumerate(reply.tool_calls)
            ]
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": finish,
            "logprobs": None,
        }
        if request.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": t, "logprob": ECHO_TOKEN_LOGPROB, "top_logprobs": []} for t in tokens
                ]
            }
        prompt_tokens = sum(
            len(str(m.get("content") or "").split()) for m in messages if isinstance(m, Mapping)
        )
        return {
            "id": "chatcmpl-fault-server",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(tokens),
                "total_tokens": prompt_tokens + len(tokens),
            },
        }


def _embeddings(model: str, body: Any) -> dict[str, Any]:
    """Deterministic 8-number embeddings, one per input text: the first bytes of its
    SHA-256, so equal texts embed equally and different ones apart."""
    texts = body.get("input") if isinstance(body, dict) else None
    if isinstance(texts, str):
        texts = [texts]
    data = []
    for i, text in enumerate(texts or []):
        digest = hashlib.sha256(str(text).encode("utf-8")).digest()
        data.append(
            {"object": "embedding", "index": i, "embedding": [b / 255 - 0.5 for b in digest[:8]]}
        )
    return {"object": "list", "model": model, "data": data}


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _send_json(
    send: Send, status: int, body: Any, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    await _send_raw(send, status, json.dumps(body).encode(), headers)


async def _send_raw(
    send: Send, status: int, payload: bytes, headers: Sequence[tuple[bytes, bytes]]
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def free_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening-ready TCP socket bound to ``port`` on ``host`` (0: a free one, no race).

    Made with ``IPPROTO_TCP`` spelled out: asyncio turns Nagle off only on sockets whose
    ``proto`` says TCP, and a reply sent as headers then body would otherwise wait out the
    client's 40 ms delayed ACK on every request (uvloop sets TCP_NODELAY regardless).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    return sock


class FaultServer:
    """A :class:`FaultApp` served by uvicorn on loopback in a background thread."""

    def __init__(
        self,
        app: FaultApp | None = None,
        *,
        host: str = "127.0.0.1",
        startup_timeout_s: float = 10.0,
    ) -> None:
        self.app = app or FaultApp()
        self.host = host
        self.startup_timeout_s = startup_timeout_s
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """The API root, as a spec: ``http://127.0.0.1:<port>/v1``."""
        if not self.port:
            raise RuntimeError("the fault server is not running; use it as a context manager")
        return f"http://{self.host}:{self.port}/v1"

    def push(self, *replies: Reply) -> None:
        self.app.push(*replies)

    @property
    def requests(self) -> list[Recorded]:
        return self.app.requests

    @property
    def max_in_flight(self) -> int:
        return self.app.max_in_flight

    def start(self) -> FaultServer:
        import uvicorn  # a test-support dependency, imported only when a server starts

        sock = free_socket(self.host)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="critical",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name=f"fault-server-{self.port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the fault server did not start on port {self.port}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> None:
    """Serve a fault app in this process until killed (benchmarks run it beside the client)."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args(argv)
    app = FaultApp(model=args.model, latency_s=args.latency)
    app.record = False  # a long benchmark would otherwise keep every request in memory
    sock = free_socket(args.host, args.port)
    print(f"http://{args.host}:{sock.getsockname()[1]}/v1", flush=True)
    # Idle connections stay open as long as a client's pool keeps them (uvicorn's default of
    # 5 s drops them under a client that is busy elsewhere, and the next request on one fails).
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=4096,
        timeout_keep_alive=300,
    )
    uvicorn.Server(config).run(sockets=[sock])
