"""Throughput of whileai's OpenAI-compatible backend against a server with a fixed latency.

A stub OpenAI-compatible server (whileai_openai's fault server, uvicorn on loopback, in its own
process so it does not share the client's event loop) answers every chat completion after 50 ms.
At 64 and 256 requests in flight, it compares:

- whileai: the backend a bare-URL spec resolves to, ``concurrency=`` set to the level, every
  request started at once with ``asyncio.gather`` (the backend bounds them itself);
- the official ``openai`` client: ``AsyncOpenAI`` driven by ``asyncio.gather`` with a semaphore
  at the same level;
- the ideal: concurrency / latency requests per second.

Both clients must return the echo of each request before their speed counts.

    python3 dev.py bench bench_backend_throughput [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
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


async def run_whileai(url: str, concurrency: int, questions: list[str]) -> Timed:
    from whileai.plugins import Registry

    backend = Registry.load().resolve(
        "backend", url, model=MODEL, concurrency=concurrency, max_retries=0
    )

    async def batch(items: list[str]) -> list[str]:
        replies = await asyncio.gather(
            *[backend.complete([{"role": "user", "content": q}]) for q in items]
        )
        return [r.text for r in replies]

    try:
        return await timed_batches(batch, concurrency, questions)
    finally:
        await backend.aclose()


async def run_openai(url: str, concurrency: int, questions: list[str]) -> Timed:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key="not-needed", max_retries=0)
    gate = asyncio.Semaphore(concurrency)

    async def one(question: str) -> str:
        async with gate:
            reply = await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": question}],
                temperature=1.0,
                max_tokens=1024,
            )
        return reply.choices[0].message.content or ""

    async def batch(items: list[str]) -> list[str]:
        return list(await asyncio.gather(*[one(q) for q in items]))

    try:
        return await timed_batches(batch, concurrency, questions)
    finally:
        await client.close()


async def timed_batches(
    batch: Callable[[list[str]], Awaitable[list[str]]], concurrency: int, questions: list[str]
) -> Timed:
    """A warm-up batch (connections opened, code paths imported), then the timed one, both on
    this event loop, so neither client is timed building itself."""
    await batch(prompts(concurrency))
    start = time.perf_counter()
    answers = await batch(questions)
    return Timed(answers, time.perf_counter() - start)


def measure(
    label: str,
    runner: Callable[[str, int, list[str]], Awaitable[Timed]],
    url: str,
    concurrency: int,
    n: int,
) -> float:
    questions = prompts(n)
    result = asyncio.run(runner(url, concurrency, questions))
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
            ours = measure("whileai", run_whileai, url, level, n)
            peer = measure("openai", run_openai, url, level, n)
            print(f"-- {level} in flight, {n} requests, ideal {ideal:,.0f}/s")
            print(ratio_line(f"vs openai @{level}", ours, peer, "openai.AsyncOpenAI", target=1.0))
            print(ratio_line(f"vs ideal  @{level}", ours, ideal, "ideal", target=0.9))
            print(f"   openai client reaches {peer / ideal:.0%} of ideal")
    finally:
        stop(process)


if __name__ == "__main__":
    main()
