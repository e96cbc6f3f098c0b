"""The response cache as a user meets it: a second run of the same call costs no model calls
and gives the same rows; what is not reproducible is not cached; a broken cache is a miss,
never a crash; and runs in several processes share one directory without harm."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import whileai as wai
from whileai.backends import Completion, Sampling
from whileai.response_cache import CACHE_FILE, CachedBackend, ResponseCache, caching

from .sim_doubles import BASE, SpyBackends, registry

SPY = {**BASE, "agent_model": "spy:agent", "user_model": "spy:user"}
#: what differs between two runs of one call whatever the cache does
PER_RUN = ("run_id", "lineage")


def model_calls(spies: SpyBackends) -> int:
    return sum(b.calls for b in spies.built)


def same_rows(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    def strip(row: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in row.items() if k not in PER_RUN}

    return [strip(r) for r in a] == [strip(r) for r in b]


def run(spies: SpyBackends, cache: Any, **params: Any) -> Any:
    advanced = {**SPY["advanced"], **({} if cache is None else {"cache": cache})}
    return wai.simulate(
        **{**SPY, "advanced": advanced},
        registry=registry(spies),
        unique=4,
        repeats=2,
        seed=5,
        **params,
    )


def test_a_second_run_answers_from_the_cache_with_the_same_rows(tmp_path: Path) -> None:
    spies = SpyBackends()
    first = run(spies, str(tmp_path / "cache"))
    calls = model_calls(spies)
    assert calls > 0
    report = first.report()["cache"]
    assert (report["hits"], report["misses"]) == (0, calls)
    second = run(spies, str(tmp_path / "cache"))
    assert model_calls(spies) == calls  # not one more call reached a model
    assert same_rows(first.rows, second.rows)
    again = second.report()["cache"]
    assert (again["hits"], again["misses"], again["uncacheable"]) == (calls, 0, 0)
    assert again["dir"] == str(tmp_path / "cache")


def test_the_environment_variable_turns_it_on_and_false_turns_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHILEAI_CACHE", str(tmp_path / "env-cache"))
    spies = SpyBackends()
    run(spies, None)
    calls = model_calls(spies)
    assert (tmp_path / "env-cache" / CACHE_FILE).exists()
    run(spies, None)
    assert model_calls(spies) == calls
    uncached = run(spies, False)
    assert model_calls(spies) == 2 * calls
    assert uncached.report()["cache"] is None
    with pytest.raises(ValueError, match=r"advanced\['cache'\] must be a directory path"):
        run(spies, 42)
    # as an environment file gives it: the ~ unread by any shell
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WHILEAI_CACHE", "~/.cache/whileai")
    run(spies, None)
    assert (tmp_path / "home" / ".cache" / "whileai" / CACHE_FILE).exists()


class Counting:
    name = "counting"
    model = "counting-1"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(
        self, messages: Any, tools: Any = None, sampling: Any = None, **_: Any
    ) -> Completion:
        self.calls += 1
        return Completion(f"answer {self.calls}", "counting-1", {}, input_tokens=7)


def test_only_reproducible_answers_are_cached(tmp_path: Path) -> None:
    inner = Counting()
    cache = ResponseCache(tmp_path)
    backend = CachedBackend(inner, cache)
    ask = [{"role": "user", "content": "hi"}]

    async def both() -> list[str]:
        out = []
        for sampling in (
            Sampling(temperature=0.0),
            Sampling(temperature=0.0),
            Sampling(temperature=0.9, seed=3),
            Sampling(temperature=0.9, seed=3),
            Sampling(temperature=0.9),  # unseeded above 0: a new answer every time
            Sampling(temperature=0.9),
            None,  # the server's default temperature, unseeded: not reproducible either
        ):
            out.append((await backend.complete(ask, sampling=sampling)).text)
        return out

    texts = asyncio.run(both())
    assert texts == ["answer 1", "answer 1", "answer 2", "answer 2", "answer 3", "answer 4",
                     "answer 5"]  # fmt: skip
    assert cache.stats.as_dict() == {
        "hits": 2,
        "misses": 2,
        "uncacheable": 3,
        "corrupt": 0,
        "input_tokens_saved": 14,
        "output_tokens_saved": 0,
    }


def test_a_corrupt_entry_is_a_miss_and_a_broken_file_runs_uncached(tmp_path: Path) -> None:
    spies = SpyBackends()
    directory = tmp_path / "cache"
    run(spies, str(directory))
    calls = model_calls(spies)
    with sqlite3.connect(directory / CACHE_FILE) as db:
        (key,) = db.execute("SELECT key FROM responses LIMIT 1").fetchone()
        db.execute("UPDATE responses SET entry = ? WHERE key = ?", ('{"format": 1, "te', key))
    second = run(spies, str(directory))
    assert model_calls(spies) == calls + 1  # the torn entry was asked again, the rest hit
    assert second.report()["cache"]["corrupt"] == 1
    # a file that is not a database: every call goes to the model, and the run says so
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / CACHE_FILE).write_bytes(b"this is not a database" * 100)
    third = run(spies, str(broken))
    assert model_calls(spies) == 2 * calls + 1
    assert "unusable" in third.report()["cache"]
    assert any("response cache could not be used" in w for w in third.warnings)


WRITER = """
import sys, time
from whileai.backends import Completion
from whileai.response_cache import ResponseCache
start = float(sys.argv[3])
while time.time() < start:  # the three open the new cache at one instant
    time.sleep(0.001)
cache = ResponseCache(sys.argv[1])
for i in range(300):
    cache.put(f"{sys.argv[2]}-{i}", Completion(f"{sys.argv[2]} {i}", "m", {}))
assert cache.broken is None, cache.broken
"""


def test_processes_sharing_one_directory_lose_and_tear_nothing(tmp_path: Path) -> None:
    start = time.time() + 1.0  # (after the three interpreters have started)
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name, str(start)])
        for name in ("a", "b", "c")
    ]
    for writer in writers:
        assert writer.wait(timeout=120) == 0
    cache = ResponseCache(tmp_path)
    for name in ("a", "b", "c"):
        for i in range(300):
            found = cache.get(f"{name}-{i}")
            assert found is not None and found.text == f"{name} {i}"
    assert cache.stats.corrupt == 0
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone() == (900,)


def test_connections_opening_a_new_cache_at_one_instant_all_use_it(tmp_path: Path) -> None:
    # Several workers opening one new cache together all switch it to WAL; SQLite answered
    # some of them "database is locked" at once, and each such worker ran uncached (its
    # answers lost to the others). Forty rounds of four connections meeting at a barrier.
    import threading

    for round_ in range(40):
        directory = tmp_path / str(round_)
        caches = [ResponseCache(directory) for _ in range(4)]
        barrier = threading.Barrier(len(caches))

        def work(cache: ResponseCache, name: int, barrier: threading.Barrier) -> None:
            barrier.wait()
            for i in range(20):
                cache.put(f"{name}-{i}", Completion(f"{name} {i}", "m", {}))

        threads = [
            threading.Thread(target=work, args=(cache, name, barrier))
            for name, cache in enumerate(caches)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [c.broken for c in caches] == [None] * 4, round_
        reader = ResponseCache(directory)
        assert all(reader.get(f"{n}-{i}") is not None for n in range(4) for i in range(20))
        reader.close()


def test_caching_names_what_it_takes() -> None:
    assert caching(None, environ={}) is None
    assert caching(False, environ={"WHILEAI_CACHE": "/tmp/x"}) is None
    assert caching(None, environ={"WHILEAI_CACHE": "/tmp/x"}).directory == "/tmp/x"
    with pytest.raises(ValueError, match="cache= must be a directory path"):
        caching(3)
    assert json.loads(json.dumps(caching("/tmp/y").report())) == {
        "dir": "/tmp/y",
        "hits": 0,
        "misses": 0,
        "uncacheable": 0,
        "corrupt": 0,
        "input_tokens_saved": 0,
        "output_tokens_saved": 0,
    }


def test_a_stored_answer_comes_back_with_every_count_the_server_gave() -> None:
    from whileai.backends import Completion, ToolCall
    from whileai.response_cache import completion_from, completion_to

    answer = Completion(
        "checking",
        "gpt-4o-2024-08-06",
        {"temperature": 0.0, "seed": 3},
        (ToolCall("c1", "get_order", {"order_id": "A1"}),),
        "tool_calls",
        input_tokens=2048,
        output_tokens=12,
        cached_input_tokens=1920,
        logprob=-1.5,
        n_tokens=12,
    )
    assert completion_from(json.loads(json.dumps(completion_to(answer)))) == answer


def test_a_cached_tool_call_keeps_its_arguments_in_the_order_the_model_gave_them(
    tmp_path: Path,
) -> None:
    """Read back in another order, a call's arguments would change the next call's messages
    (so its key: a miss) and the row's bytes."""
    from whileai.backends import ToolCall

    answer = Completion(
        "",
        "m-1",
        {"seed": 1},
        (ToolCall("c1", "update_address", {"order_id": "A1", "address": "9 Mill Lane"}),),
        "tool_calls",
    )
    cache = ResponseCache(tmp_path)
    cache.put("k", answer)
    again = cache.get("k")
    assert again is not None
    assert list(again.tool_calls[0].arguments) == ["order_id", "address"]
    cache.close()
