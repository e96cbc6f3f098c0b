"""A script using the embedded model keeps its stdout and stderr.

llama-cpp-python silences llama.cpp by pointing the process's stdout and stderr at /dev/null
and back; two threads doing that at once can leave them on /dev/null for good, and a user's
``print`` after a run would vanish. Each check runs in a fresh process, where the contexts are
loaded while many tool-call and JSON-schema completions run side by side on two contexts.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from whileai.backends import resolve_backend
from whileai.registry import Registry
from whileai_local.contexts import DEFAULT_N_CTX, ContextKey, close_idle_contexts, context_pool
from whileai_local.model_file import smollm2_file

SCRIPT = r"""
import asyncio
import json
import threading

import llama_cpp._utils

from whileai.backends import resolve_backend
from whileai_local.contexts import STD_STREAMS_LOCK

# Watch every redirect llama-cpp-python makes: how many overlap, and whether each one happens
# while the backend holds the lock that guards the process's streams.
seen = {"redirects": 0, "most_at_once": 0, "unguarded": 0}
at_once = 0
watch = threading.Lock()
silence = llama_cpp._utils.suppress_stdout_stderr
real_enter, real_exit = silence.__enter__, silence.__exit__


def enter(self):
    global at_once
    if not self.disable:
        with watch:
            at_once += 1
            seen["redirects"] += 1
            seen["most_at_once"] = max(seen["most_at_once"], at_once)
            seen["unguarded"] += not STD_STREAMS_LOCK.locked()
    return real_enter(self)


def exit_(self, *exc):
    global at_once
    result = real_exit(self, *exc)
    if not self.disable:
        with watch:
            at_once -= 1
    return result


silence.__enter__, silence.__exit__ = enter, exit_

ORDER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "Look up an order by its id",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}
PERSON = {
    "type": "json_object",
    "schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
}
ASK = [{"role": "user", "content": "Where is my order A1234?"}]
backend = resolve_backend("local:smollm2", contexts=2)


async def main():
    calls = []
    for i in range(4):
        # logprobs on half of them: those need their own contexts, so more loads race
        sampling = {"temperature": 0.7, "max_tokens": 4, "seed": i}
        calls.append(backend.complete(ASK, [ORDER_TOOL], sampling, logprobs=i % 2 == 1))
        calls.append(
            backend.complete(ASK, sampling=sampling, response_format=PERSON, logprobs=i % 2 == 1)
        )
    await asyncio.gather(*calls)


asyncio.run(main())
print("MARKER " + json.dumps(seen), flush=True)
"""


def run_script() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("attempt", range(3))
def test_a_print_after_concurrent_tool_and_schema_completions_reaches_stdout(
    attempt: int,
) -> None:
    done = run_script()
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert last.startswith("MARKER "), f"the script's output was lost: {done.stdout!r}"
    seen: dict[str, Any] = json.loads(last.removeprefix("MARKER "))
    # loads did redirect (so the race was possible), never two at once, never outside the lock
    assert seen["redirects"] >= 2
    assert seen["most_at_once"] == 1
    assert seen["unguarded"] == 0
    # cached contexts are freed at exit, so shutdown prints nothing either
    assert done.stderr == ""


def test_idle_contexts_are_freed_and_load_again_on_next_use() -> None:
    # what the exit handler runs; a context freed early is simply loaded again
    backend = resolve_backend("local:smollm2", registry=Registry.load())
    ask = [{"role": "user", "content": "What is 2 + 3?"}]
    sampling = {"temperature": 0, "max_tokens": 2}
    first = asyncio.run(backend.complete(ask, sampling=sampling))
    pool = context_pool(ContextKey(smollm2_file(), False, None, DEFAULT_N_CTX))
    assert pool.loaded >= 1
    assert close_idle_contexts() >= 1
    assert pool.loaded == 0
    again = asyncio.run(backend.complete(ask, sampling=sampling))
    assert pool.loaded == 1
    assert again.text == first.text
