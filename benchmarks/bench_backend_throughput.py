"""Throughput of whileai's OpenAI-compatible backend against a server with a fixed latency.

A stub OpenAI-compatible server (whileai_openai's fault server, uvicorn on loopback, in its own
process so it does not share the client's event loop) answers every chat completion after 50 ms.
At 64 and 256 concurrent rollouts, it compares:

- whileai: the backend a bare-URL spec resolves to, ``concurrency=`` set to the level, on its
  default transport (aiohttp) and, for information, on each other transport it ships
  (``httpx``, and ``httptools``, the opt-in for local servers);
- the official ``openai`` client: ``AsyncOpenAI`` with a semaphore at the same level, on its
  aiohttp transport (``DefaultAioHttpClient``, the ``openai[aiohttp]`` extra: its best
  documented configuration for concurrency) and on its default httpx transport (for
  information). The target: whileai's default ahead of openai on aiohttp at 64 and 256;
- the ideal: concurrency / latency requests per second (for information: on this 2-core
  machine the stub and the client share the CPU, and the bare client below shows the ceiling);
- and, for reference, what this machine allows: a bare keep-alive HTTP/1.1 client on asyncio
  streams (no pool, no retries, no parsing beyond Content-Length), one connection per slot.
  When it falls short of the ideal, the machine (CPU shared with the stub) is the limit.

Each client is driven two ways, both with ``asyncio.gather``:

- as rollouts (the target's line): ``level`` coroutines, each making its calls one after
  another as an agent's turns do, the way the engine's rollouts call a backend;
- as a burst (for information): every request of the batch started at once, the client (or its
  semaphore) queueing them. Python pays for thousands of queued tasks before the first answer
  is read, so this line sits below the first on any client.

Every client must return the echo of each request before its speed counts.

    python3 dev.py bench bench_backend_throughput [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Awaitable, Callable

import attrs
import httpx
from _harness import ratio_line

LATENCY_S = 0.05
LEVELS = (64, 256)
MODEL = "bench-model"


@attrs.frozen
class Timed:
    answers: list[str]
    seconds: float


def start_stub() -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable, "-m", "whileai_openai.testing",
        "--latency", str(LATENCY_S), "--model", MODEL,
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            stop(process)
            raise RuntimeError("the stub server did not start")
        time.sleep(0.05)


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


def prompts(n: int) -> list[str]:
    return [f"q{i}" for i in range(n)]


Call = Callable[[str], Awaitable[str]]


async def as_rollouts(call: Call, concurrency: int, items: list[str]) -> list[str]:
    """``concurrency`` rollouts, each taking the next question when its last call returns."""
    answers = [""] * len(items)
    queue = iter(enumerate(items))

    async def rollout() -> None:
        for index, question in queue:
            answers[index] = await call(question)

    await asyncio.gather(*(rollout() for _ in range(concurrency)))
    return answers


async def as_burst(call: Call, concurrency: int, items: list[str]) -> list[str]:
    """Every call started at once; the client bounds what is in flight."""
    return list(await asyncio.gather(*(call(q) for q in items)))


Drive = Callable[[Call, int, list[str]], Awaitable[list[str]]]
Runner = Callable[[str, int, list[str], Drive], Awaitable[Timed]]


def run_whileai(transport: str) -> Runner:
    async def run(url: str, concurrency: int, questions: list[str], drive: Drive) -> Timed:
        return await _run_whileai(url, concurrency, questions, drive, transport)

    return run


async def _run_whileai(
    url: str, concurrency: int, questions: list[str], drive: Drive, transport: str
) -> Timed:
    from whileai.registry import Registry

    backend = Registry.load().resolve(
        "backend",
        url,
        model=MODEL,
        concurrency=concurrency,
        max_retries=2,
        timeout=120.0,
        transport=transport,
    )

    async def call(question: str) -> str:
        reply = await backend.complete([{"role": "user", "content": question}])
        return str(reply.text)

    try:
        return await timed_batches(call, drive, concurrency, questions)
    finally:
        await backend.aclose()


def run_openai(on_aiohttp: bool) -> Runner:
    async def run(url: str, concurrency: int, questions: list[str], drive: Drive) -> Timed:
        return await _run_openai(url, concurrency, questions, drive, on_aiohttp)

    return run


async def _run_openai(
    url: str, concurrency: int, questions: list[str], drive: Drive, on_aiohttp: bool
) -> Timed:
    from openai import AsyncOpenAI, DefaultAioHttpClient

    # A generous timeout: its default 5 s connect timeout fails when 256 connections open at
    # once on a busy machine, and a failed run measures nothing.
    client = AsyncOpenAI(
        base_url=url,
        api_key="not-needed",
        max_retries=2,
        timeout=120.0,
        http_client=DefaultAioHttpClient(timeout=120.0) if on_aiohttp else None,
    )
    gate = asyncio.Semaphore(concurrency)

    async def call(question: str) -> str:
        async with gate:
            reply = await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": question}],
                temperature=1.0,
                max_tokens=1024,
            )
        return reply.choices[0].message.content or ""

    try:
        return await timed_batches(call, drive, concurrency, questions)
    finally:
        await client.close()


async def run_bare(url: str, concurrency: int, questions: list[str], drive: Drive) -> Timed:
    """The machine's ceiling: the least a client can do per request over HTTP/1.1."""
    parsed = urllib.parse.urlsplit(url)
    host, port, path = parsed.hostname or "", parsed.port or 80, parsed.path
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def call(question: str) -> str:
        reader, writer = idle.pop() if idle else await asyncio.open_connection(host, port)
        body = json.dumps(
            {"model": MODEL, "messages": [{"role": "user", "content": question}]}
        ).encode()
        writer.write(
            f"POST {path}/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        reply = json.loads(await reader.readexactly(length))
        idle.append((reader, writer))
        return str(reply["choices"][0]["message"]["content"])

    try:
        # The burst drive would open a connection per queued request: bounded like the others.
        gate = asyncio.Semaphore(concurrency)

        async def bounded(question: str) -> str:
            async with gate:
                return await call(question)

        return await timed_batches(bounded, drive, concurrency, questions)
    finally:
        for _, writer in idle:
            writer.close()


async def timed_batches(call: Call, drive: Drive, concurrency: int, questions: list[str]) -> Timed:
    """A warm-up batch (connections opened, code paths imported), then the timed one, both on
    this event loop, so no client is timed building itself."""
    await drive(call, concurrency, prompts(concurrency))
    start = time.perf_counter()
    answers = await drive(call, concurrency, questions)
    return Timed(answers, time.perf_counter() - start)


def measure(
    label: str,
    runner: Runner,
    url: str,
    concurrency: int,
    n: int,
    drive: Drive,
) -> float:
    questions = prompts(n)
    result = asyncio.run(runner(url, concurrency, questions, drive))
    if result.answers != [f"echo: {q}" for q in questions]:
        raise SystemExit(f"{label} returned wrong answers; its speed does not count")
    return n / result.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--rounds", type=int, default=None, help="requests = rounds x level")
    args = parser.parse_args()
    rounds = args.rounds or (4 if args.quick else 30)
    process, url = start_stub()
    try:
        print(f"stub: {url}, {LATENCY_S * 1000:.0f} ms per request, {rounds} rounds per level")
        for level in LEVELS:
            n = level * rounds
            ideal = level / LATENCY_S
            ours = measure("whileai", run_whileai("auto"), url, level, n, as_rollouts)
            peer = measure("openai+aiohttp", run_openai(True), url, level, n, as_rollouts)
            httpx_peer = measure("openai", run_openai(False), url, level, n, as_rollouts)
            bare = measure("bare asyncio", run_bare, url, level, n, as_rollouts)
            print(f"-- {level} concurrent rollouts, {n} requests, ideal {ideal:,.0f}/s")
            print(
                ratio_line(
                    f"vs openai+aiohttp @{level}",
                    ours,
                    peer,
                    "openai.AsyncOpenAI(http_client=DefaultAioHttpClient())",
                    target=1.0,
                )
            )
            print(
                "   (information) "
                + ratio_line(
                    f"vs openai default @{level}", ours, httpx_peer, "openai.AsyncOpenAI (httpx)"
                ).strip()
            )
            for transport in ("httpx", "httptools"):
                other = measure(
                    f"whileai {transport}", run_whileai(transport), url, level, n, as_rollouts
                )
                print(
                    "   (information) "
                    + ratio_line(
                        f"whileai transport={transport} @{level}",
                        other,
                        peer,
                        "openai.AsyncOpenAI(http_client=DefaultAioHttpClient())",
                    ).strip()
                )
            # the ideal is for information: the machine's own ceiling (below) sits under it
            print("   (information) " + ratio_line(f"vs ideal @{level}", ours, ideal, "ideal"))
            print(
                f"   openai client reaches {peer / ideal:.0%} of ideal on aiohttp, "
                f"{httpx_peer / ideal:.0%} on httpx"
            )
            print(
                f"   this machine's ceiling (bare asyncio client): {bare:,.1f}/s = "
                f"{bare / ideal:.0%} of ideal; whileai reaches {ours / bare:.0%} of it"
            )
            burst = {
                label: measure(label, runner, url, level, n, as_burst)
                for label, runner in (
                    ("whileai", run_whileai("auto")),
                    ("openai+aiohttp", run_openai(True)),
                    ("bare asyncio", run_bare),
                )
            }
            print(
                f"   as a burst (all {n} started at once): "
                + ", ".join(f"{k} {v:,.0f}/s = {v / ideal:.0%}" for k, v in burst.items())
            )
    finally:
        stop(process)


if __name__ == "__main__":
    main()
