"""``simulate()`` against a real MCP server written with the SDK (``ticket_server.py``, a
support desk's ticket store), started over stdio per episode: the agent is offered the
server's tools, its calls reach the server, faults land between the two, the server's state
and checks grade each rollout, and a server that will not start, offers nothing or dies
mid-episode fails only its own rows."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import whileai as wai
from whileai import hookimpl
from whileai.hookspecs import Register
from whileai.registry import Registry
from whileai.testing import PleasedUser, ScriptedBackend, call_tool

HERE = Path(__file__).parent
SERVER = f"{sys.executable} {HERE / 'ticket_server.py'}"
SEEDS = str(HERE / "seeds.jsonl")


def _result(message: Mapping[str, Any]) -> Any:
    try:
        content = json.loads(message["content"])
    except ValueError:
        return None  # a malformed answer: the agent asks again
    return None if isinstance(content, dict) and "error" in content else content


def desk_agent(messages: Sequence[Mapping[str, Any]], tools: Any) -> Any:
    """A support agent that does the job: finds the customer's tickets, acts on the one the
    request is about, asks again after any failed or unreadable answer, then reports."""
    request = next(m["content"] for m in messages if m["role"] == "user")
    email = next(w.strip(".,:") for w in request.split() if "@" in w)
    answers = [_result(m) for m in messages if m["role"] == "tool"]
    good = [a for a in answers if a is not None]
    if len(answers) > 6:
        return "Sorry, the ticket system is not answering."
    if not good:
        return call_tool("find_tickets", {"customer": email}, call_id=f"c{len(answers)}")
    if len(good) == 1:
        subject = "printer" if "printer" in request else "vpn"
        ticket = next(
            (t["ticket_id"] for t in good[0].get("tickets", []) if subject in t.get("subject", "")),
            None,
        )
        if ticket is None:
            return "I could not find that ticket."
        if subject == "printer":
            args = {"ticket_id": ticket, "resolution": "jam fixed"}
            return call_tool("close_ticket", args, call_id=f"c{len(answers)}")
        args = {"ticket_id": ticket, "text": "drops every hour"}
        return call_tool("add_note", args, call_id=f"c{len(answers)}")
    return f"Done: {json.dumps(good[-1])}"


class Doubles:
    def __init__(self) -> None:
        self.agent = ScriptedBackend("agent:desk", desk_agent)

    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        register("desk", lambda argument=None, **_: self.agent)
        register("customer", lambda argument=None, **_: PleasedUser("customer:pleased"))


@pytest.fixture(autouse=True)
def checks_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    # the seeds name ticket_checks:only_the_goal_ticket_changed, which lives beside this file
    monkeypatch.syspath_prepend(str(HERE))


def run(doubles: Doubles | None = None, world: str = f"mcp:{SERVER}", **given: Any) -> Any:
    options = {"situations": SEEDS, "state_tool": "dump_state", **given.pop("options", {})}
    params: dict[str, Any] = {
        "agent_model": "desk",
        "user_model": "customer",
        "simulator": "template",
        "unique": 2,
        "repeats": 2,
        "strategy": "grid",
        "fault_rate": 0.0,
        "seed": 5,
        "max_turns": 1,
        **given,
    }
    advanced = {"world": world, "world_options": options, "max_concurrency": 2}
    advanced.update(params.pop("advanced", {}))
    return wai.simulate(
        registry=Registry.load(plugins=[doubles or Doubles()]), advanced=advanced, **params
    )


def situation(row: Mapping[str, Any]) -> str:
    return str(row["scenario_dimensions"]["situation"])


def test_an_agent_does_the_job_on_a_real_mcp_server_and_the_server_grades_it() -> None:
    doubles = Doubles()
    data = run(doubles)
    rows = data.trajectories  # in memory: the world state and reasons as the grader wrote them
    assert len(rows) == 4
    assert [r.get("error") for r in rows] == [None] * 4
    assert [r["reward"] for r in rows] == [1.0] * 4
    # the agent was offered the server's own tools, minus the state tool the run reads
    offered = {t["function"]["name"] for t in doubles.agent.tools[0] or []}
    assert {"find_tickets", "get_ticket", "add_note", "close_ticket"} <= offered
    assert "dump_state" not in offered
    for row in rows:
        tickets = row["world_state"]["tickets"]
        if situation(row) == "close-printer":
            assert tickets["T-100"]["status"] == "closed"
            assert tickets["T-100"]["resolution"] == "jam fixed"
        else:
            # each rollout had a server of its own: one note, never the other repeat's too
            assert row["world_state"]["notes"] == {"T-101": ["drops every hour"]}
            assert tickets["T-100"]["status"] == "open"
        assert "check 1: ticket_status(ticket_id='T-100'): as the goal expects" in row[
            "reason"
        ] or ("check 1: get_ticket(ticket_id='T-101'): as the goal expects" in row["reason"])
    # exported, a reason still says which check passed, with the goal's values masked
    assert all(r["reason"].startswith("check 1: ") for r in data.rows())
    assert not any("T-100" in r["reason"] for r in data.rows())
    assert data.report()["world"]["name"] == "mcp"


def test_an_agent_that_closes_the_wrong_ticket_fails_the_servers_checks() -> None:
    def careless(messages: Sequence[Mapping[str, Any]], tools: Any) -> Any:
        if not any(m["role"] == "tool" for m in messages):
            return call_tool("close_ticket", {"ticket_id": "T-102", "resolution": "done"})
        return "Closed it."

    class Careless(Doubles):
        def __init__(self) -> None:
            self.agent = ScriptedBackend("agent:careless", careless)

    data = run(Careless(), unique=1, repeats=1, dimensions={"situation": ["close-printer"]})
    row = data.trajectories[0]
    assert row["reward"] == 0.0
    assert "ticket_status(ticket_id='T-100') answered {'status': 'open'}" in row["reason"]
    assert "python check ticket_checks:only_the_goal_ticket_changed: False" in row["reason"]


def test_faults_fire_between_the_agent_and_the_server_and_land_on_the_rows() -> None:
    data = run(unique=2, repeats=3, fault_rate=0.5)
    rows = data.rows()
    faults = [f for r in rows for f in r["faults"]]
    assert faults, "half the calls fault: some must have fired"
    assert {f["kind"] for f in faults} <= {
        "timeout",
        "error",
        "rate_limit",
        "stale",
        "partial",
        "malformed",
    }
    for row in rows:
        for fault in row["faults"]:
            step = row["steps"][fault["step"]]
            assert step["role"] == "tool" and step["fault"] == fault["kind"]
            assert step["name"] == fault["tool"]
            if fault["kind"] in ("timeout", "error", "rate_limit"):
                assert "error" in json.loads(step["content"])
    # the agent retries loud faults, so most rollouts still reach the goal the server checks
    assert sum(r["reward"] == 1.0 for r in rows) >= 3
    assert all(r["reward"] in (0.0, 1.0) for r in rows)
    again = run(unique=2, repeats=3, fault_rate=0.5)
    assert [r["faults"] for r in again.rows()] == [r["faults"] for r in rows]


def test_a_server_killed_mid_episode_fails_that_rollout_and_the_run_goes_on() -> None:
    # the server exits the moment a ticket is closed: close-printer's rollouts lose it mid-call
    data = run(options={"env": {"TICKET_SERVER_DIE_ON_CLOSE": "1"}})
    rows = data.rows()
    killed = [r for r in rows if situation(r) == "close-printer"]
    alive = [r for r in rows if situation(r) == "note-vpn"]
    assert len(killed) == len(alive) == 2
    for row in killed:
        assert "stopped while answering 'close_ticket'" in row["error"]
        assert row["reward"] is None and row["stop_reason"] == "error"
    assert [r["reward"] for r in alive] == [1.0, 1.0]


def test_a_server_that_will_not_start_fails_its_rows_with_its_own_words() -> None:
    broken = f"{sys.executable} -c \"import sys; print('no database configured', file=sys.stderr); sys.exit(2)\""
    data = run(world=f"mcp:{broken}", unique=1, repeats=2)
    rows = data.rows()
    assert len(rows) == 2
    for row in rows:
        assert "could not start an episode" in row["error"]
        assert "did not start" in row["error"]
        assert "no database configured" in row["error"]
        assert row["reward"] is None


def test_a_server_with_no_tools_fails_its_rows() -> None:
    empty = f"{sys.executable} {HERE / 'empty_server.py'}"
    data = run(world=f"mcp:{empty}", unique=1, repeats=1, options={"state_tool": None})
    (row,) = data.rows()
    assert "lists no tools" in row["error"] and row["reward"] is None


def test_tasks_replay_a_saved_mcp_run_and_resume_finishes_a_cut_one(tmp_path: Path) -> None:
    out = tmp_path / "desk.jsonl"
    original = run(output=str(out))
    saved = [json.loads(line) for line in out.read_text().splitlines()]
    assert all("privileged" not in row for row in saved)
    assert not any('"expect"' in json.dumps(r) for r in saved), "the checks are the answer key"
    replay = run(tasks=saved, repeats=1, unique=None)
    # the four saved rows are two situations' repeats: each situation is played once more
    assert sorted(r["prompt"] for r in replay.rows()) == sorted(
        {r["prompt"] for r in original.rows()}
    )
    assert [r["reward"] for r in replay.rows()] == [1.0, 1.0]
    assert all(r["lineage"]["replayed"] for r in replay.rows())

    # a streamed run's rows are read from its file: take what is compared before it is cut
    original_keys = sorted(r["lineage"]["rollout_key"] for r in original.rows())
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2])
    resumed = run(output=str(out), resume=True)
    keys = [json.loads(x)["lineage"]["rollout_key"] for x in out.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 4
    assert sorted(keys) == original_keys
    assert len(resumed.rows()) == 4


def servers_at_once(tmp_path: Path, hold_s: float = 0.0, **options: Any) -> int:
    """The most ticket servers alive at once in a run of 6 episodes, 3 in flight, each
    server holding its episode ``hold_s`` seconds at the end."""
    noted = tmp_path / f"servers-{len(list(tmp_path.iterdir()))}"
    noted.mkdir()
    env = {"TICKET_SERVER_DIR": str(noted), "TICKET_SERVER_HOLD_S": str(hold_s)}
    data = run(
        unique=2,
        repeats=3,
        options={"env": env, **options},
        advanced={"max_concurrency": 3},
    )
    assert not any(r.get("error") for r in data.rows), [r.get("error") for r in data.rows]
    assert all(r["reward"] == 1.0 for r in data.rows)
    seen = (noted / "seen").read_text().split()
    assert len(seen) == 6  # a server per episode
    return max(map(int, seen))


def test_max_servers_caps_the_server_processes_alive_at_once(tmp_path: Path) -> None:
    # without the cap, the episodes in flight each start theirs at once (held a second, so
    # they overlap however the starts are spread)
    assert servers_at_once(tmp_path, hold_s=1.0) > 1
    assert servers_at_once(tmp_path, hold_s=0.3, max_servers=1) == 1
    with pytest.raises(ValueError, match=r"max_servers must be a whole number >= 1.*got 0"):
        run(options={"max_servers": 0})
    with pytest.raises(ValueError, match="max_servers caps the server processes"):
        run(
            world="mcp:http://127.0.0.1:9/mcp",
            options={"reset_tool": "reset_store", "max_servers": 2},
        )


def test_bad_world_options_and_seeds_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the MCP world needs situations"):
        run(options={"situations": None})
    with pytest.raises(ValueError, match="neither on PATH nor a file"):
        run(world="mcp:no-such-server --stdio")
    with pytest.raises(ValueError, match="name its reset tool"):
        run(world="mcp:http://127.0.0.1:9/mcp")
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "persona": "x"}\n')
    with pytest.raises(ValueError, match=r"seeds.jsonl line 2: 'prompt' .* is required"):
        run(options={"situations": str(seeds)})
    seeds.write_text('{"prompt": "hi", "checks": [{"tool": "get_ticket"}]}\n')
    with pytest.raises(ValueError, match="line 1 check 0: tool check 'get_ticket' says nothing"):
        run(options={"situations": str(seeds)})
    seeds.write_text('{"prompt": "hi", "checks": [{"python": "ticket_checks:nope"}]}\n')
    with pytest.raises(ValueError, match="ticket_checks has no function 'nope'"):
        run(options={"situations": str(seeds)})


def test_a_situation_without_checks_is_left_unscored_not_failed(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(
        json.dumps({"id": "bare", "prompt": "ana@example.com: close my printer ticket"}) + "\n"
    )
    data = run(unique=1, repeats=1, options={"situations": str(seeds)})
    (row,) = data.rows()
    assert row["reward"] is None
    assert "has no checks" in row["reason"]


def written_from(facts: Mapping[str, Any], tool: str) -> dict[str, Any]:
    example = facts["example"]
    checks = [c for c in example["goal"]["checks"] if "tool" in c]
    return {
        "prompt": "Hello, " + example["prompt"],
        "persona": example["persona"],
        "patience": 2,
        "hidden_state": example["hidden_state"],
        "goal": {k: v for k, v in example["goal"].items() if k != "checks"},
        "checks": [{**c, "tool": tool} for c in checks],
    }


def test_a_model_writer_writes_situations_from_the_servers_tools_and_a_seed() -> None:
    tries: list[str] = []

    def writer(messages: Sequence[Mapping[str, Any]], tools: Any) -> str:
        facts = json.loads(messages[1]["content"])["facts"]
        assert "find_tickets" in {t["name"] for t in facts["tools"]}
        # the first try checks with a tool the server lacks, and is sent back with the reason
        tool = "ticket_lookup" if not tries else facts["example"]["goal"]["checks"][0]["tool"]
        tries.append(str(messages[-1]["content"]))
        return json.dumps(written_from(facts, tool))

    class Writer(Doubles):
        @hookimpl
        def whileai_register_backends(self, register: Register) -> None:
            super().whileai_register_backends(register)
            register("writer", lambda argument=None, **_: ScriptedBackend("writer", writer))

    data = run(
        Writer(),
        unique=1,
        repeats=1,
        simulator="writer",
        dimensions={"situation": ["close-printer"]},
    )
    (row,) = data.trajectories
    assert row["prompt"].startswith("Hello, ")
    assert row["writer_model"] == "writer"
    assert row["reward"] == 1.0
    assert len(tries) == 2
    assert "the checks read tools the server does not have: ['ticket_lookup']" in tries[1]


@pytest.fixture
def http_desk() -> Any:
    """The ticket server on loopback over streamable HTTP, stopped after the test."""
    import socket
    import subprocess
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, str(HERE / "ticket_server.py"), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the HTTP ticket server did not come up") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_running_server_over_streamable_http_is_reset_for_every_episode(http_desk: str) -> None:
    data = run(
        world=f"mcp:{http_desk}",
        options={"reset_tool": "reset_store"},
        dimensions={"situation": ["note-vpn"]},
        unique=1,
        repeats=3,
    )
    rows = data.trajectories
    assert [r["reward"] for r in rows] == [1.0] * 3
    # one shared server, yet each episode found the store as it started: one note each time
    assert all(r["world_state"]["notes"] == {"T-101": ["drops every hour"]} for r in rows)


def test_a_server_named_in_an_mcp_client_config_file_is_a_world(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    server = {"command": sys.executable, "args": [str(HERE / "ticket_server.py")], "env": {}}
    config.write_text(json.dumps({"mcpServers": {"tickets": server}}))
    data = run(world="mcp:tickets", options={"config": str(config)}, repeats=1)
    assert [r["reward"] for r in data.rows()] == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"names no server 'desk'; it has \['tickets'\]"):
        run(world="mcp:desk", options={"config": str(config)})


def test_a_situation_without_checks_is_graded_by_the_judge_given(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.jsonl"
    seed = {
        "id": "printer",
        "prompt": "ana@example.com: close my printer ticket",
        "principle": "close only the ticket the customer means",
    }
    seeds.write_text(json.dumps(seed) + "\n")

    def judge(row: Mapping[str, Any]) -> Any:
        from whileai.scoring import Verdict

        # the judge reads the row the way a rubric would, the privileged principle included
        closed = row["world_state"]["tickets"]["T-100"]["status"] == "closed"
        return Verdict(1.0 if closed else 0.0, f"{row['privileged']['principle']}: {closed}")

    data = run(unique=1, repeats=2, judge=judge, options={"situations": str(seeds)})
    assert [r["reward"] for r in data.trajectories] == [1.0, 1.0]
    assert all("close only the ticket" in r["reason"] for r in data.trajectories)
