"""Runs one program in a sandbox process and cleans up after it; the verifier only interprets.

The runner (this module, in the caller's thread) asks the verifier's sandbox server to fork a
run holding four pipes (job, stdout, stderr, result), and reads them with ``select`` against the
wall deadline until the result pipe closes: no signals are used in the caller, so it works from
any thread. The run's init closes that pipe only after every process of the run is dead (see
``sandbox.server``). If the deadline passes, or the run could not be contained in a PID
namespace, every process of the run's uid (which no other run uses while we hold its lock) and
of its session is sent SIGKILL, so a child that ignores SIGTERM or a grandchild that
daemonised is gone too. A working directory made on the host (without a mount namespace) is
removed afterwards.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import random
import secrets
import select
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from whileai_verifiers.codeexec_limits import Limits
from whileai_verifiers.codeexec_program import Program
from whileai_verifiers.sandbox.harness import defined_names, referenced_names
from whileai_verifiers.sandbox.server import launch_command

PACKAGE_DIR = str(Path(__file__).resolve().parent)
# A uid range no account uses: systemd's table of uid ranges lists 1879048192-2147483647 as
# unused by any allocation scheme. Each concurrent sandbox takes its own uid, so one sandbox
# cannot signal or read another, and the process limit counts only its own processes.
DEFAULT_UID_BASE = 1_879_048_192 + 0x5A1_000
DEFAULT_UID_COUNT = 4096
RESULT_LIMIT = 1 << 20
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}


@attrs.frozen
class SandboxResult:
    """What happened to one run, before anyone interprets it."""

    timed_out: bool
    duration: float
    exit_code: int | None
    record: dict[str, Any] | None
    outcome: dict[str, Any] | None
    notes: dict[str, str]
    stdout_tail: str
    stderr_tail: str
    leftovers_killed: int
    uid: int | None = None
    session: int | None = None
    error: str | None = None


class _Tail:
    """Keeps the last ``limit`` bytes of a stream, so a program that prints forever costs nothing."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > 2 * self.limit:
            del self.data[: len(self.data) - self.limit]

    def text(self) -> str:
        kept = bytes(self.data[-self.limit :]).decode("utf-8", "replace")
        return kept if self.total <= self.limit else "..." + kept


def _lock_dir() -> Path:
    path = Path(tempfile.gettempdir()) / "whileai-codeexec-uids"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@contextlib.contextmanager
def claimed_uid(base: int, count: int) -> Iterator[int]:
    """An unprivileged uid no other sandbox (in any process) is using, for the block's duration."""
    directory = _lock_dir()
    start = random.randrange(count)
    for attempt in range(count + 1):
        uid = base + (start + attempt) % count
        fd = os.open(directory / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            # The last attempt waits rather than fail: every uid is busy only when more sandboxes
            # run than the range holds, and one will come free.
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if attempt == count else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield uid
        finally:
            os.close(fd)
        return


def _process_table() -> Iterator[tuple[int, str, int | None, int | None, int]]:
    """(pid, state, real uid, session id in the host's namespace, threads) of every process."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = Path("/proc", name, "status").read_text()
        except OSError:
            continue
        state, uid, session, threads = "", None, None, 1
        for line in status.splitlines():
            key, _, value = line.partition(":")
            if key == "State":
                state = value.split()[0]
            elif key == "Uid":
                uid = int(value.split()[0])
            elif key == "NSsid":
                session = int(value.split()[0])
            elif key == "Threads":
                threads = int(value)
        yield int(name), state, uid, session, threads


def kill_leftovers(*, uid: int | None, session: int, spare: int) -> int:
    """SIGKILL every live process of ``uid`` or in ``session`` (other than ``spare``), until none
    is left; returns how many were killed. Zombies are skipped: they run nothing."""
    killed: set[int] = set()
    for _ in range(100):
        found = [
            pid
            for pid, state, owner, sid, _ in _process_table()
            if pid != spare
            and state not in ("Z", "X")
            and ((uid is not None and owner == uid) or sid == session)
        ]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.001)
    return len(killed)


def _live(uid: int | None, session: int) -> bool:
    return any(
        state not in ("Z", "X") and ((uid is not None and owner == uid) or sid == session)
        for _, state, owner, sid, _ in _process_table()
    )


def await_exit(
    *, uid: int | None, session: int, init_pid: int | None = None, timeout: float = 1.0
) -> int:
    """Wait until every process of the run has gone (the init closes the result pipe a moment
    before it exits itself), then sweep whatever is still there; returns how many were killed.

    Without this, ``verify`` could return while the run's init was still on its way out. A
    contained run's init has already killed everything else, so its own end is the run's end:
    a pidfd says when, without scanning /proc."""
    if init_pid is not None:
        try:
            handle = os.pidfd_open(init_pid)
        except ProcessLookupError:
            return 0
        except OSError:
            pass
        else:
            try:
                ended = select.select([handle], [], [], timeout)[0]
            finally:
                os.close(handle)
            return 0 if ended else kill_leftovers(uid=uid, session=session, spare=-1)
    deadline = time.monotonic() + timeout
    while _live(uid, session):
        if time.monotonic() >= deadline:
            return kill_leftovers(uid=uid, session=session, spare=-1)
        time.sleep(0.0005)
    return 0


def _remove(workdir: str) -> None:
    def make_writable(function: Any, path: str, excinfo: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
        with contextlib.suppress(OSError):
            function(path)

    shutil.rmtree(workdir, onerror=make_writable)


def _nproc_offset(beside: int = 0, room: int = 0) -> int:
    """What RLIMIT_NPROC already counts for the current (non-root) user: every thread of every
    process of its real uid (a desktop session holds hundreds, a grading process its own
    pools), plus ``room`` for each of the ``beside`` runs that may start next to this one under
    the same uid. Counting processes alone left correct programs that start a thread or a
    process failing with "process limit reached" wherever the user ran many threads."""
    me = os.getuid()
    threads = sum(
        count
        for _, state, uid, _, count in _process_table()
        if uid == me and state not in ("Z", "X")
    )
    return threads + beside * room


def _parse_record(raw: bytes, nonce: str) -> dict[str, Any] | None:
    """The run's record: the isolation notes its first process wrote, merged with what its init
    wrote at the end (absent when the run was killed)."""
    record: dict[str, Any] | None = None
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            part = json.loads(line)
        except ValueError:
            continue
        if isinstance(part, dict) and part.get("nonce") == nonce:
            record = {**(record or {}), **part}
    return record


def _reports(record: dict[str, Any], nonce: str) -> tuple[dict[str, str], dict[str, Any] | None]:
    """The run's isolation notes, and the outcome the program's process reported."""
    notes: dict[str, str] = dict(record.get("notes") or {})
    outcome = None
    for line in str(record.get("reports", "")).splitlines():
        try:
            report = json.loads(line)
        except ValueError:
            continue
        if isinstance(report, dict) and report.get("nonce") == nonce:
            outcome = report
            break
    return notes, outcome


class SandboxServer:
    """The warm process runs are forked from (``sandbox.server.serve``), started on first use.

    Thread-safe: a lock serialises the short request/reply; the runs themselves proceed in
    parallel. It stops when :meth:`close` is called or this object is collected (its control
    socket closes and it exits); a server that died is started again on the next request.
    """

    def __init__(self, python: str = sys.executable, network: str = "isolate") -> None:
        self.python = python
        self.network = network
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._finalizer: Any = None
        self._owner = os.getpid()

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = subprocess.Popen(
                launch_command(self.python, PACKAGE_DIR, theirs.fileno(), self.network),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                cwd="/",
                env=ENV,
            )
        finally:
            theirs.close()
        self._proc, self._control = proc, ours
        self._finalizer = weakref.finalize(self, _stop_server, proc, ours)
        return ours

    def spawn(self, fds: list[int]) -> int:
        """Fork a run holding ``fds`` (job, stdout, stderr, result); its pid."""
        with self._lock:
            for attempt in range(2):
                if self._owner != os.getpid():
                    # Forked from the process that started the server: that server is not ours
                    # to use or stop; drop our copy of its socket and start one of our own.
                    if self._control is not None:
                        self._control.close()
                    if self._finalizer is not None:
                        self._finalizer.detach()
                    self._proc = self._control = self._finalizer = None
                    self._owner = os.getpid()
                control = self._control
                if control is None or self._proc is None or self._proc.poll() is not None:
                    self._discard()
                    control = self._start()
                try:
                    socket.send_fds(control, [b"run"], fds)
                    reply = control.recv(64)
                except OSError:
                    if attempt:
                        raise
                    self._discard()
                    continue
                if len(reply) != 8:
                    self._discard()
                    if attempt:
                        raise OSError("the sandbox server stopped answering")
                    continue
                (pid,) = struct.unpack("q", reply)
                if pid < 0:
                    raise OSError("the sandbox server refused the request")
                return int(pid)
        raise OSError("the sandbox server could not be started")

    def _discard(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._proc = self._control = self._finalizer = None

    def close(self) -> None:
        with self._lock:
            self._discard()


def _stop_server(proc: subprocess.Popen[bytes], control: socket.socket) -> None:
    control.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@functools.lru_cache(maxsize=1024)
def _names_for(tests: str, prompt: str, entry_point: str | None) -> tuple[list[str], list[str]]:
    """The program's names the tests read, and the prompt's helpers among them (which the tests
    get from the prompt itself); cached, since the k completions of a problem share its tests."""
    names = referenced_names(tests)
    if not entry_point:
        return names, []
    helpers = sorted((set(names) & defined_names(prompt)) - {entry_point})
    return sorted({*names, entry_point}), helpers


def run_sandboxed(
    program: Program,
    limits: Limits,
    *,
    uid: int | None,
    server: SandboxServer,
    beside: int = 0,
) -> SandboxResult:
    """Run ``program`` under ``limits`` as ``uid`` (None: as the current user, not root).
    ``beside``: how many other runs may be under way at once (as the current user, they
    share its process limit)."""
    start = time.monotonic()
    names, helpers = _names_for(program.tests, program.prompt, program.entry_point)
    workdir = os.path.join(tempfile.gettempdir(), f"whileai-codeexec-{secrets.token_hex(8)}")
    nonce = secrets.token_hex(16)
    job = {
        "program": program.source,
        "entry_point": program.entry_point,
        "names": names,
        "workdir": workdir,
        "uid": uid,
        "nonce": nonce,
        "network": limits.network,
        "nproc_offset": 0 if uid is not None else _nproc_offset(beside, limits.max_processes),
        "limits": {
            "timeout": limits.timeout,
            "cpu_time": limits.cpu_seconds,
            "memory_mb": limits.memory_mb,
            "max_file_mb": limits.max_file_mb,
            "max_written_mb": limits.max_written_mb,
            "max_processes": limits.max_processes,
        },
    }
    stdout = _Tail(limits.output_tail)
    stderr = _Tail(limits.output_tail)
    result = _Tail(RESULT_LIMIT)
    timed_out = False
    leftovers = 0
    error = None
    pid: int | None = None
    # What only the tests' process reads, through a pipe of its own (sandbox/server, step 2):
    # the candidate's process never holds the expected answers, not even in freed memory.
    tests = {"tests": program.tests, "prompt": program.prompt, "prompt_helpers": helpers}
    ours: list[int] = []
    try:
        job_read, job_write = os.pipe()
        tests_read, tests_write = os.pipe()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        result_read, result_write = os.pipe()
        ours = [job_write, tests_write, out_read, err_read, result_read]
        theirs = [job_read, tests_read, out_write, err_write, result_write]
        # The job and the tests go into their pipes before the run is forked, so the run need
        # not wait for this thread to hear back from the server; only what is larger than a
        # pipe's buffer is finished afterwards (the job first: the run reads it first).
        payloads = [
            (fd, _write_now(fd, json.dumps(part).encode()))
            for fd, part in ((job_write, job), (tests_write, tests))
        ]
        try:
            pid = server.spawn(theirs)
        finally:
            for fd in theirs:
                os.close(fd)
        for fd, payload in payloads:
            os.set_blocking(fd, True)
            with contextlib.suppress(BrokenPipeError):
                while payload:
                    payload = payload[os.write(fd, payload) :]
            ours.remove(fd)
            os.close(fd)
        streams = {out_read: stdout, err_read: stderr, result_read: result}
        # The run is over when its result pipe closes: the init that holds it closes it only
        # after everything in the run's PID namespace is dead.
        timed_out = not _pump(streams, result_read, start + limits.timeout)
        ran = _parse_record(bytes(result.data), nonce)
        if timed_out or not _contained(ran):
            leftovers = kill_leftovers(uid=uid, session=pid, spare=-1)
            _pump(streams, result_read, time.monotonic() + 1.0)
        else:
            init_pid = (ran or {}).get("init_pid")
            leftovers = await_exit(
                uid=uid, session=pid, init_pid=init_pid if isinstance(init_pid, int) else None
            )
        # Everything that could write is dead now: take what is left in the pipes.
        _drain(streams)
    except OSError as exc:
        error = f"could not run the sandbox: {exc}"
        if pid is not None:
            kill_leftovers(uid=uid, session=pid, spare=-1)
    finally:
        for fd in ours:
            os.close(fd)
        # Only a run without a mount namespace made its directory on the host.
        if os.path.lexists(workdir):
            _remove(workdir)
    record = _parse_record(bytes(result.data), nonce)
    notes: dict[str, str] = {}
    outcome = None
    if record is not None:
        notes, outcome = _reports(record, nonce)
    return SandboxResult(
        timed_out=timed_out,
        duration=time.monotonic() - start,
        exit_code=None if record is None else record.get("exit_code"),
        record=record,
        outcome=outcome,
        notes=notes,
        stdout_tail=stdout.text(),
        stderr_tail=stderr.text(),
        leftovers_killed=leftovers,
        uid=uid,
        session=pid,
        error=error,
    )


def _write_now(fd: int, data: bytes) -> memoryview:
    """What of ``data`` did not fit in the pipe ``fd`` without waiting."""
    payload = memoryview(data)
    os.set_blocking(fd, False)
    with contextlib.suppress(BlockingIOError):
        payload = payload[os.write(fd, payload) :]
    return payload


def _drain(streams: dict[int, _Tail]) -> None:
    for fd, tail in streams.items():
        while chunk := _read_chunk(fd):
            tail.add(chunk)


def _contained(record: dict[str, Any] | None) -> bool:
    """Whether the run's init reported from PID 1 of its own namespace, where it killed and
    reaped every process the program left before writing the record."""
    return record is not None and record.get("final") is True and record.get("contained") is True


def _pump(streams: dict[int, _Tail], until_closed: int, deadline: float) -> bool:
    """Read the streams until ``until_closed`` reaches its end (True) or the deadline (False)."""
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for key, _ in selector.select(remaining):
                fd = int(key.fd)
                chunk = _read_chunk(fd)
                if chunk:
                    streams[fd].add(chunk)
                elif chunk == b"":
                    if fd == until_closed:
                        return True
                    selector.unregister(fd)


def _read_chunk(fd: int) -> bytes | None:
    """The next chunk, b"" at end of stream, None when nothing is there yet."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return None
