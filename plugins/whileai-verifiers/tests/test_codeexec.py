"""CodeExec: grading code by running it, and hostile programs that must stay contained.

Every hostile run is checked three ways: the verdict says what happened, the host shows no
trace (no file outside the sandbox, no connection), and no process of the run is left (a scan
of /proc for the run's uid and session, since psutil is not a dependency).
"""

from __future__ import annotations

import os
import pickle
import threading
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

import whileai as wai
from whileai.scoring import as_scorer, grade_row
from whileai_verifiers.codeexec import CodeExec, UncontainedWarning
from whileai_verifiers.codeexec_program import build_program
from whileai_verifiers.codeexec_sandbox import _nproc_offset, claimed_uid

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and uid change need root")
REPO = Path(__file__).resolve().parents[3]

ADD = {
    "prompt": 'from typing import List\n\n\ndef add(xs: List[int]) -> int:\n    """Sum."""\n',
    "test": "def check(candidate):\n    assert candidate([1, 2]) == 3\n    assert candidate([]) == 0\n",
    "entry_point": "add",
}


@pytest.fixture(scope="module")
def code() -> Iterator[CodeExec]:
    with CodeExec(timeout=1.5) as verifier:
        yield verifier


def live_processes(uid: int | None, session: int | None) -> list[int]:
    """Pids still alive (not zombies) that belong to a run, by uid or session id."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = Path("/proc", name, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields["State"].split()[0] in ("Z", "X"):
            continue
        if (uid is not None and int(fields["Uid"].split()[0]) == uid) or (
            session is not None and int(fields.get("NSsid", "0 ").split()[0]) == session
        ):
            found.append(int(name))
    return found


def assert_nothing_left(verdict: Any) -> None:
    assert verdict.meta["session"] is not None
    assert live_processes(verdict.meta["uid"], verdict.meta["session"]) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(verdict.meta["session"], 0)


# --- grading -------------------------------------------------------------------------------


def test_correct_solution_passes_and_wrong_one_fails_with_the_assertion(code: CodeExec) -> None:
    tests = "assert double(2) == 4\nassert double(-1) == -2\n"
    good = code.verify("def double(x):\n    return 2 * x\n", tests)
    bad = code.verify("def double(x):\n    return x + 2\n", tests)
    assert (good.reward, good.reason, good.status) == (1.0, "passed", "ok")
    assert bad.reward == 0.0
    assert bad.reason == "AssertionError (<tests> line 2: assert double(-1) == -2)"
    assert bad.meta["phase"] == "tests"
    assert_nothing_left(bad)


def test_assertion_messages_and_exceptions_read_plainly(code: CodeExec) -> None:
    verdict = code.verify("x = 1", "assert x == 2, f'x is {x}'")
    assert verdict.reason == "AssertionError: x is 1 (<tests> line 1: assert x == 2, f'x is {x}')"
    crash = code.verify("def f():\n    return {}['k']\n", "f()")
    assert str(crash.reason).startswith("KeyError: 'k' (<program> line 2")


def test_syntax_error_is_named_with_its_line(code: CodeExec) -> None:
    verdict = code.verify("def f(x)\n    return x\n", "assert f(1) == 1")
    assert verdict.reward == 0.0
    assert verdict.reason == "SyntaxError: expected ':' (<program> line 1)"
    assert verdict.meta["phase"] == "program"


def test_humaneval_body_completion_is_appended_to_the_prompt(code: CodeExec) -> None:
    verdict = code.verify("    return sum(xs)\n", ADD)
    assert verdict.reward == 1.0
    assert verdict.meta["program"] == "prompt + completion"
    wrong = code.verify("    return None\n", ADD)
    assert wrong.reward == 0.0
    assert str(wrong.reason).startswith("AssertionError (<tests> line 2")


def test_humaneval_full_function_runs_alone_with_the_prompts_imports(code: CodeExec) -> None:
    completion = "def add(xs: List[int]) -> int:\n    return sum(xs)\n"
    verdict = code.verify(completion, ADD)
    assert verdict.reward == 1.0
    assert verdict.meta["program"] == "prompt imports + completion"


def test_fenced_chat_answer_is_graded_on_the_code_inside(code: CodeExec) -> None:
    completion = "Here you go:\n```python\ndef add(xs):\n    return sum(xs)\n```\nDone."
    verdict = code.verify(completion, ADD)
    assert verdict.reward == 1.0
    assert verdict.meta["program"] == "prompt imports + completion, fenced"


def test_missing_entry_point_is_reported(code: CodeExec) -> None:
    verdict = code.verify("def other(xs):\n    return 0\n", {**ADD, "prompt": ""})
    assert verdict.reward == 0.0
    assert verdict.reason == "NameError: the program does not define 'add'"


def test_unittest_style_tests_pass_and_fail(code: CodeExec) -> None:
    tests = (
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_inc(self):\n"
        "        self.assertEqual(inc(1), 2)\n"
        "unittest.main()\n"
    )
    assert code.verify("def inc(x):\n    return x + 1\n", tests).reward == 1.0
    failed = code.verify("def inc(x):\n    return x\n", tests)
    assert failed.reward == 0.0
    assert "SystemExit" in str(failed.reason)
    assert "test_inc" in failed.meta["stderr_tail"]


def test_program_that_exits_early_does_not_pass(code: CodeExec) -> None:
    assert code.verify("import sys\nsys.exit(0)\n", "assert False").reason == (
        "SystemExit: exit(0) during the program (<program> line 2: sys.exit(0))"
    )
    hard_exit = code.verify("import os\nos._exit(0)\n", "assert False")
    assert hard_exit.reward == 0.0
    assert str(hard_exit.reason).startswith("exited with code 0 before the tests finished")


def test_verdict_meta_records_limits_isolation_and_output(code: CodeExec) -> None:
    verdict = code.verify("import sys\nprint('out')\nprint('err', file=sys.stderr)\n", "pass")
    meta = verdict.meta
    assert meta["exit_code"] == 0 and meta["signal"] is None
    assert meta["limits"] == {
        "timeout": 1.5,
        "cpu_time": 2,
        "memory_mb": 1024,
        "max_processes": 32,
        "max_file_mb": 16,
        "max_written_mb": 64,
        "network": "isolate",
    }
    assert meta["stdout_tail"] == "out\n" and meta["stderr_tail"] == "err\n"
    assert meta["duration"] > 0
    assert meta["network"] == "isolated" or meta["network"].startswith("not isolated: ")


def test_grading_a_row_records_name_version_and_reason() -> None:
    verifier = wai.verify.CodeExec(timeout=2.0)
    assert isinstance(verifier, CodeExec)
    row = {
        "prompt": "Write add(xs).",
        "final_text": "def add(xs):\n    return sum(xs)\n",
        "privileged": {"reference": ADD},
    }
    graded = grade_row(row, as_scorer(verifier))
    assert graded["reward"] == 1.0
    assert graded["judge_name"] == "CodeExec"
    assert graded["judge_status"] == "ok"
    assert graded["judge_meta"]["name"] == "CodeExec"
    assert graded["judge_meta"]["version"] == verifier.version
    missing = grade_row({**row, "privileged": {}}, as_scorer(verifier))
    assert missing["judge_status"] == "error"
    assert "reference is missing" in missing["reason"]
    verifier.close()


def test_bad_arguments_raise_naming_what_was_wrong(code: CodeExec) -> None:
    with pytest.raises(ValueError, match="timeout must be a positive number, got 0"):
        CodeExec(timeout=0)
    with pytest.raises(ValueError, match="network must be one of isolate, require, allow"):
        CodeExec(network=cast(Any, "off"))
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        CodeExec(workers=0)
    with pytest.raises(ValueError, match="reference mapping lacks 'entry_point'"):
        code.verify("x = 1", {"test": "def check(c): pass"})
    with pytest.raises(TypeError, match="completion must be a string, got int"):
        code.verify(cast(Any, 3), "pass")
    with pytest.raises(ValueError, match=r"pairs\[1\]: reference is an empty string"):
        code.verify_many([("x = 1", "pass"), ("x = 1", "  ")])


def test_program_assembly_rule_without_running() -> None:
    body = build_program(
        "    return 1\n", {"prompt": "def f():\n", "test": "t", "entry_point": "f"}
    )
    assert body.source == "def f():\n    return 1\n"
    assert body.assembly == "prompt + completion"
    plain = build_program("print(1)", "assert True")
    assert (plain.source, plain.tests, plain.entry_point) == ("print(1)", "assert True", None)


# --- concurrency ---------------------------------------------------------------------------


def test_verify_many_keeps_order_and_runs_the_pool() -> None:
    with CodeExec(timeout=2.0, workers=3) as verifier:
        pairs = [(f"def f():\n    return {i}\n", f"assert f() == {i % 2}") for i in range(6)]
        verdicts = verifier.verify_many(pairs)
    assert [v.reward for v in verdicts] == [1.0 if i in (0, 1) else 0.0 for i in range(6)]


def test_concurrent_runs_never_share_a_uid() -> None:
    # Two claims on a range of two uids, held at once, get both; the lock is a file lock, so
    # this holds across verifiers and processes too.
    with claimed_uid(5_000_000, 2) as first, claimed_uid(5_000_000, 2) as second:
        assert {first, second} == {5_000_000, 5_000_001}


def test_verify_is_safe_from_many_threads(code: CodeExec) -> None:
    results: dict[int, float | None] = {}

    def grade(i: int) -> None:
        results[i] = code.verify(f"v = {i}", f"assert v == {i}").reward

    threads = [threading.Thread(target=grade, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == dict.fromkeys(range(8), 1.0)


# --- hostile programs ----------------------------------------------------------------------


def test_infinite_loop_that_floods_output_times_out(code: CodeExec) -> None:
    verdict = code.verify("while True:\n    print('x' * 1000)\n", "pass")
    assert (verdict.reward, verdict.reason) == (0.0, "timeout after 1.5s")
    assert len(verdict.meta["stdout_tail"]) <= 2003
    assert_nothing_left(verdict)


def test_process_that_ignores_sigterm_is_killed(code: CodeExec) -> None:
    program = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    verdict = code.verify(program, "pass")
    assert verdict.reason == "timeout after 1.5s"
    assert_nothing_left(verdict)


def test_cpu_limit_kills_a_busy_program_before_the_wall_clock() -> None:
    with CodeExec(timeout=10.0, cpu_time=1) as verifier:
        verdict = verifier.verify("while True:\n    pass\n", "pass")
    assert verdict.reward == 0.0
    assert verdict.reason == "killed: CPU time limit (1s)"
    assert verdict.meta["signal"] in ("SIGXCPU", "SIGKILL")
    assert_nothing_left(verdict)


def test_fork_bomb_hits_the_process_limit(code: CodeExec) -> None:
    verdict = code.verify("import os\nwhile True:\n    os.fork()\n", "pass")
    assert verdict.reward == 0.0
    assert str(verdict.reason).startswith("process limit (32) reached: BlockingIOError")
    assert_nothing_left(verdict)


def test_ten_gigabyte_allocation_hits_the_memory_limit(code: CodeExec) -> None:
    verdict = code.verify("block = bytearray(10 * 1024**3)\n", "pass")
    assert (verdict.reward, verdict.reason) == (0.0, "killed: memory limit (1024 MB): MemoryError")
    assert_nothing_left(verdict)


def test_file_size_limit_stops_a_disk_filler(code: CodeExec) -> None:
    verdict = code.verify("open('big', 'wb').write(b'x' * (64 * 1024 * 1024))\n", "pass")
    assert str(verdict.reason).startswith("killed: file size limit (16 MB): OSError: [Errno 27]")


@ROOT_ONLY
@pytest.mark.parametrize("where", ["tmp", "repo"])
def test_writes_outside_the_working_directory_fail(code: CodeExec, where: str) -> None:
    directory = Path("/tmp") if where == "tmp" else REPO
    target = directory / f"whileai-codeexec-escape-{uuid.uuid4().hex}"
    verdict = code.verify(f"open({str(target)!r}, 'w').write('escaped')\n", "pass")
    assert verdict.reward == 0.0
    assert str(verdict.reason).startswith(("PermissionError", "OSError: [Errno 30]"))
    assert not target.exists()
    assert_nothing_left(verdict)


def world_writable_directories() -> list[str]:
    """Every directory anyone may write to on this machine, found as an attacker would."""
    found = []
    for top in ("/", "/run", "/var", "/dev", "/usr", "/opt", "/srv", "/home", "/mnt", "/media"):
        for directory, subdirs, _ in os.walk(top):
            if directory.startswith(("/proc", "/sys")) or directory.count("/") > 3:
                subdirs[:] = []
                continue
            try:
                mode = os.stat(directory).st_mode
            except OSError:
                continue
            if mode & 0o002:
                found.append(directory)
        if top == "/":
            break
    return sorted(
        set(found) | {d for d in ("/run/lock", "/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(d)}
    )


@ROOT_ONLY
def test_no_world_writable_path_takes_a_write(code: CodeExec) -> None:
    # Found at test time, not listed: /run/lock took 800 MB from a candidate once.
    directories = world_writable_directories()
    assert "/run/lock" in directories or not os.path.isdir("/run/lock")
    marker = f"whileai-codeexec-escape-{uuid.uuid4().hex}"
    program = (
        "import os\n"
        f"written = []\nfor d in {directories!r}:\n"
        "    try:\n"
        f"        with open(os.path.join(d, {marker!r}), 'wb') as h:\n"
        "            h.write(b'x' * 1024)\n"
        "        written.append(d)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    verdict = code.verify(program, "assert written == [], written")
    assert verdict.reason == "passed", verdict.reason
    assert [d for d in directories if os.path.exists(os.path.join(d, marker))] == []


@ROOT_ONLY
def test_what_a_run_writes_in_all_is_capped(code: CodeExec) -> None:
    # Many files under the per-file limit still stop at the working directory's size.
    program = (
        "import os\n"
        "total = 0\n"
        "try:\n"
        "    for i in range(100):\n"
        "        with open(f'f{i}', 'wb') as h:\n"
        "            h.write(b'x' * (8 * 1024 * 1024))\n"
        "        total += 8\n"
        "except OSError as exc:\n"
        "    error = exc.errno\n"
    )
    verdict = code.verify(program, "assert total <= 64 and error == 28, (total, error)")
    assert verdict.reason == "passed", verdict.reason
    assert "the only writable place" in verdict.meta["filesystem"]
    assert verdict.meta["limits"]["max_written_mb"] == 64


@ROOT_ONLY
def test_proc_shows_only_the_runs_own_processes(code: CodeExec) -> None:
    program = (
        "import os\n"
        "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "lines = []\n"
        "for p in pids:\n"
        "    try:\n"
        "        lines.append(open(f'/proc/{p}/cmdline', 'rb').read())\n"
        "    except OSError:\n"
        "        pass\n"
        "seen_host = any(b'pytest' in line for line in lines)\n"
    )
    verdict = code.verify(program, "assert not seen_host and len(pids) <= 4, pids")
    assert verdict.reason == "passed", verdict.reason
    assert verdict.meta["proc"] == "private: the run's processes only"


def test_working_directory_is_fresh_writable_and_removed(code: CodeExec) -> None:
    program = "import os\nopen('scratch.txt', 'w').write('ok')\nprint(os.getcwd())\n"
    verdict = code.verify(program, "assert open('scratch.txt').read() == 'ok'")
    assert verdict.reward == 1.0
    workdir = Path(verdict.meta["stdout_tail"].strip())
    assert workdir.name.startswith("whileai-codeexec-")
    assert not workdir.exists()


@ROOT_ONLY
def test_connection_to_an_outside_address_fails_at_once(code: CodeExec) -> None:
    # 203.0.113.1 is TEST-NET-3: never routed, so even without isolation no real host is hit.
    program = (
        "import socket\ns = socket.socket()\ns.settimeout(5)\ns.connect(('203.0.113.1', 80))\n"
    )
    verdict = code.verify(program, "pass")
    assert verdict.meta["network"] == "isolated"
    assert str(verdict.reason).startswith("OSError: [Errno 101] Network is unreachable")
    assert_nothing_left(verdict)


def test_daemonised_grandchild_is_gone_after_the_run(code: CodeExec) -> None:
    program = (
        "import os, signal, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    )
    verdict = code.verify(program, "pass")
    assert verdict.reward == 1.0
    assert_nothing_left(verdict)


@ROOT_ONLY
def test_runs_as_an_unprivileged_user_that_cannot_read_root_files(code: CodeExec) -> None:
    program = "import os\nprint(os.getuid())\nprint(os.path.exists('/root/.bashrc'))\n"
    verdict = code.verify(program, "pass")
    uid_line, _ = verdict.meta["stdout_tail"].split()
    assert int(uid_line) == verdict.meta["uid"] != 0
    assert verdict.meta["user"] == f"uid {verdict.meta['uid']}"


def test_a_pickled_verifier_grades_with_its_own_server() -> None:
    with CodeExec(timeout=2.0, memory_mb=512) as original:
        copy = pickle.loads(pickle.dumps(original))
    with copy:
        verdict = copy.verify("x = 2", "assert x == 2")
    assert verdict.reward == 1.0
    assert verdict.meta["limits"]["memory_mb"] == 512


def test_temporary_files_and_home_are_in_the_working_directory(code: CodeExec) -> None:
    program = (
        "import os, tempfile\n"
        "with tempfile.NamedTemporaryFile('w', delete=False) as handle:\n"
        "    handle.write('data')\n"
        "where = os.path.dirname(handle.name)\n"
    )
    tests = "assert where == os.getcwd() == os.environ['HOME']\nassert open(handle.name).read()"
    assert code.verify(program, tests).reason == "passed"


def test_a_verifier_made_without_root_warns_that_its_runs_are_not_contained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.warns(UncontainedWarning, match="signal, trace or write into any process"):
        verifier = CodeExec(timeout=2.0)
    verifier.close()


@ROOT_ONLY
def test_a_verifier_made_as_root_says_nothing_of_containment() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncontainedWarning)
        CodeExec(timeout=2.0).close()


def busy_threads(n: int) -> tuple[threading.Event, list[threading.Thread]]:
    """``n`` threads of this process, waiting until the event is set."""
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait) for _ in range(n)]
    for thread in threads:
        thread.start()
    return stop, threads


def test_the_process_limit_without_root_counts_every_thread_its_user_runs() -> None:
    # RLIMIT_NPROC counts threads: 64 more of them in this one process must raise the count
    # the limit starts from by about 64 (other processes of the uid may come and go meanwhile)
    before = _nproc_offset()
    stop, threads = busy_threads(64)
    try:
        assert _nproc_offset() - before >= 56
        assert _nproc_offset(beside=3, room=32) >= before + 64 - 8 + 96
    finally:
        stop.set()
        for thread in threads:
            thread.join()


@pytest.mark.skipif(os.geteuid() == 0, reason="as root each run has a uid of its own")
def test_without_root_a_program_that_starts_threads_passes_beside_a_busy_caller() -> None:
    program = (
        "import threading\n"
        "def total(xs):\n"
        "    out = []\n"
        "    workers = [threading.Thread(target=out.append, args=(x,)) for x in xs]\n"
        "    for w in workers:\n        w.start()\n"
        "    for w in workers:\n        w.join()\n"
        "    return sum(out)\n"
    )
    stop, threads = busy_threads(64)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncontainedWarning)
            with CodeExec(timeout=5.0) as verifier:
                verdict = verifier.verify(program, "assert total(list(range(8))) == 28\n")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert (verdict.reward, verdict.reason) == (1.0, "passed")


def test_network_policy_is_recorded() -> None:
    with CodeExec(timeout=2.0, network="allow") as shared:
        allowed = shared.verify("x = 1", "pass")
    assert allowed.meta["network"] == "not isolated: network='allow'"
    with CodeExec(timeout=2.0, network="require") as strict:
        required = strict.verify("x = 1", "pass")
    if os.geteuid() == 0:
        assert (required.reward, required.meta["network"]) == (1.0, "isolated")
    else:
        assert required.status == "error"
        assert required.reason == (
            "network='require' but the network is not isolated: "
            "creating a network namespace needs root"
        )


def test_rows_graded_by_codeexec_say_what_scored_them() -> None:
    reference = {
        "prompt": "def add(a, b):\n",
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
        "entry_point": "add",
    }
    with CodeExec(timeout=2.0) as verifier:
        rows = wai.rows(
            ["Write add(a, b)."],
            [["    return a + b\n", "    return a - b\n"]],
            reward=verifier,
            references=[reference],
        )
    assert [row["reward"] for row in rows] == [1.0, 0.0]
    assert rows[1]["reason"] == "AssertionError (<tests> line 2: assert candidate(1, 2) == 3)"
    assert {row["judge_name"] for row in rows} == {"CodeExec"}
    assert rows[0]["judge_meta"]["version"] == verifier.version


def test_a_run_starts_from_the_servers_frozen_heap(code: CodeExec) -> None:
    """The server freezes its heap before it forks runs, so a collection in a run walks only
    the run's own objects, not (and so does not copy) every page it inherited."""
    program = "import gc\n\ndef frozen():\n    return gc.get_freeze_count()\n"
    tests = "def check(candidate):\n    assert candidate() > 10_000\n"
    verdict = code.verify(program, {"test": tests, "entry_point": "frozen"})
    assert verdict.reward == 1.0, verdict.reason


def test_tests_and_programs_larger_than_a_pipes_buffer_arrive_whole(code: CodeExec) -> None:
    # Each travels in a pipe of its own, which holds 64 KiB: 3,000 cases are some 100 KB of
    # tests, and the program carries 100 KB of comments.
    cases = "".join(f"    assert candidate({i}) == {i + 1}\n" for i in range(3000))
    reference = {"prompt": "def inc(x):\n", "test": "def check(candidate):\n" + cases}
    reference["entry_point"] = "inc"
    program = "def inc(x):\n    return x + 1\n" + ("# " + "x" * 98 + "\n") * 1000
    assert len(reference["test"]) > 65536 and len(program) > 65536
    right = code.verify(program, reference)
    assert (right.reward, right.reason) == (1.0, "passed")
    assert right.meta["candidate_calls"] == 3000
    wrong = code.verify("def inc(x):\n    return x + 1 if x < 2999 else 0\n", reference)
    assert wrong.reason == "AssertionError (<tests> line 3001: assert candidate(2999) == 3000)"
