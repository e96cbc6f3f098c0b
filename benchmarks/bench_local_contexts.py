"""The embedded backend's throughput: pooled single-threaded contexts against plain llama.cpp.

whileai's ``local:smollm2`` backend runs one llama.cpp context per core, each on one thread,
and interleaves rollouts across them from asyncio. The peer, set up the same way, is
llama-cpp-python with one ``Llama`` per core, each on one thread, the prompts shared out
among them from Python threads (llama.cpp lets go of the GIL while it computes): that line is
the comparison. For information, and labelled so, the script also prints what a user of
llama-cpp-python writes by default (one ``Llama`` with every core as its threads, answering
the prompts one after another), which is not the same configuration. Every side generates
greedily (temperature 0); the script says how many answers differ before it compares speed.
Both sides load their weights alike: where llama.cpp reports AMX, without its extra buffer
types, whose AMX matrix multiply crashes on some such machines (``peer_llama``).

    python3 dev.py bench bench_local_contexts            # 24 prompts x 64 tokens
    .venv/bin/python benchmarks/bench_local_contexts.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import ratio_line, timed

from whileai.backends import resolve_backend
from whileai_local.model_file import smollm2_file

QUESTION = (
    "A shop sells {n} apples on Monday and twice as many on Tuesday. "
    "How many apples does it sell on the two days together? Explain."
)


def prompts(count: int) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": QUESTION.format(n=n + 3)}] for n in range(count)]


def whileai_run(messages: list[list[dict[str, str]]], max_tokens: int, contexts: int) -> list[str]:
    backend = resolve_backend("local:smollm2", contexts=contexts)
    sampling = {"temperature": 0, "max_tokens": max_tokens}

    async def main() -> list[str]:
        replies = await asyncio.gather(*(backend.complete(m, sampling=sampling) for m in messages))
        return [reply.text for reply in replies]

    return asyncio.run(main())


def peer_llama(**options: Any) -> Any:
    """llama-cpp-python's ``Llama``, loaded as the backend loads its contexts: on a CPU where
    llama.cpp reports AMX, without extra buffer types (``whileai_local.contexts``); elsewhere
    plain ``Llama``."""
    from llama_cpp import Llama

    from whileai_local.contexts import llama_class, loads_extra_buffers

    return (Llama if loads_extra_buffers() else llama_class())(**options)


def llama_cpp_run(messages: list[list[dict[str, str]]], max_tokens: int) -> list[str]:
    llama: Any = peer_llama(
        model_path=str(smollm2_file()),
        n_ctx=4096,
        n_threads=os.cpu_count() or 1,
        verbose=False,
    )
    texts = []
    for m in messages:
        llama.reset()  # a fresh cache per prompt, as the backend uses
        out: Any = llama.create_chat_completion(m, temperature=0, max_tokens=max_tokens)
        texts.append(out["choices"][0]["message"]["content"] or "")
    return texts


def llama_cpp_contexts_run(
    messages: list[list[dict[str, str]]], max_tokens: int, contexts: int
) -> list[str]:
    """llama-cpp-python set up as the backend is: ``contexts`` models of one thread each,
    every one answering its share of the prompts in a thread of its own."""
    from concurrent.futures import ThreadPoolExecutor

    models: list[Any] = [
        peer_llama(model_path=str(smollm2_file()), n_ctx=4096, n_threads=1, verbose=False)
        for _ in range(contexts)
    ]
    texts = [""] * len(messages)

    def share(slot: int) -> None:
        llama = models[slot]
        for index in range(slot, len(messages), contexts):
            llama.reset()
            out: Any = llama.create_chat_completion(
                messages[index], temperature=0, max_tokens=max_tokens
            )
            texts[index] = out["choices"][0]["message"]["content"] or ""

    with ThreadPoolExecutor(contexts) as pool:
        list(pool.map(share, range(contexts)))
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 prompts x 32 tokens")
    args = parser.parse_args()
    count, max_tokens = (8, 32) if args.quick else (24, 64)
    messages = prompts(count)
    cores = os.cpu_count() or 1
    print(f"{count} greedy chat completions of at most {max_tokens} tokens, {cores} cores")

    whileai_run(messages[:1], 4, cores)  # load the model before timing either side
    llama_cpp_contexts_run(messages[:1], 4, cores)  # and the peer's, the same way
    same = timed(
        "llama.cpp, same set-up", lambda: llama_cpp_contexts_run(messages, max_tokens, cores)
    )
    peer = timed("llama.cpp", lambda: llama_cpp_run(messages, max_tokens))
    ours = timed("whileai", lambda: whileai_run(messages, max_tokens, cores))
    single = timed("whileai-1", lambda: whileai_run(messages, max_tokens, 1))
    for label, other in (("the same set-up", same), ("the default set-up", peer)):
        differ = sum(a != b for a, b in zip(ours.result, other.result, strict=True))
        if differ:
            print(
                f"note: {differ}/{count} greedy answers differ from {label}'s (thread count "
                "changes float sums)"
            )
    print(
        ratio_line(
            f"completions, {cores} contexts x 1 thread, both sides",
            ours.rate(count),
            same.rate(count),
            f"llama-cpp-python, {cores} Llama x 1 thread",
            target=1.0,
        )
    )
    print(
        "   (information, not the same configuration) "
        + ratio_line(
            f"completions, {cores} contexts x 1 thread vs 1 context x {cores} threads",
            ours.rate(count),
            peer.rate(count),
            "llama-cpp-python's default set-up",
        )
    )
    print(
        ratio_line(
            f"completions, {cores} contexts vs 1 context (both whileai, 1 thread each)",
            ours.rate(count),
            single.rate(count),
            "whileai contexts=1",
        )
    )


if __name__ == "__main__":
    main()
