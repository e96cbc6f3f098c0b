"""CodeExec: runs a candidate program against its reference tests in a sandbox.

``CodeExec().verify(completion, reference)`` passes (reward 1.0) only when the reference's tests
ran to their end and reported so from a process the candidate cannot reach; anything else is
0.0 with a reason a person can read ("timeout after 3.0s", "AssertionError (<tests> line 4:
assert candidate(2) == 4)", "killed: memory limit (1024 MB)", "SyntaxError: invalid syntax
(<program> line 3)"). How the program is put together from the completion and the reference is
in ``codeexec_program``; what runs inside the sandbox is in ``sandbox/``.

The verdict is out of the candidate's reach. Each run is two processes:

- the candidate's process runs the program and answers calls into its functions;
- the tests' process runs the reference's tests, in an interpreter the candidate never ran code
  in and made non-dumpable, so the candidate cannot trace it, read or write its memory or take
  its file descriptors (each needs a dumpable target, even for the same uid), against stand-ins that send arguments to the candidate's process and receive its return
  values as plain data (``sandbox/wire``: None, bools, numbers, strings, bytes and containers of
  them, exactly those types). Every comparison and assertion runs on the trusted side, on
  values alone. An object of the candidate's own class never crosses: the tests may call it,
  read attributes or iterate it, but comparing, hashing or taking its truth fails the run
  (``hack_suspected``), since its ``__eq__`` would be the candidate deciding.

The tests reach the tests' process alone, through a pipe of their own that no process the
candidate's is forked from ever read: nothing of them is in the candidate's memory (not among
its objects, not in freed heap) for it to look up the answer each call is expected to return.

So exiting early, replacing ``exec`` or ``check``, patching ``json``, ``unittest`` or the
harness, forging a report, or returning an object equal to everything cannot make a run pass:
the code that decides and reports lives where the candidate has no reach. A pass is positive
evidence: the tests' process writes it only after the tests returned, and never if the
candidate exited, died or sent a malformed reply along the way, even when the tests caught it.

Isolation, when the process runs as root (the common case in containers):

- the run's processes run as an unprivileged uid of its own (one per concurrent run, see
  ``codeexec_sandbox``): the candidate cannot write outside its working directory, read what
  only root may read, or signal any process but its own;
- in the run's mount namespace (a copy of the one the sandbox server laid out once) every host
  mount is read-only and nosuid; the working directory,
  a fresh tmpfs of ``max_written_mb``, is the only place a run can write, so that is the cap on
  all it writes. /tmp, /var/tmp, /dev/shm, /run/lock and unreadable directories such as /root
  are covered by empty root-owned filesystems; ``/proc`` is the run's own, listing only its
  processes;
- no network: the sandbox server (one per verifier) lives in a network namespace of its own with
  only a loopback that is down and that no run may bring up. Runs of one verifier share that
  namespace (creating one per run costs more than the rest of a run), so concurrent runs could
  in principle reach each other through abstract Unix sockets, but nothing else;
- a PID namespace per run: its init kills and reaps every process the program left (a child
  that ignores SIGTERM, a daemonised grandchild) before it reports;
- kernel limits on CPU time, address space, process count and file size, plus a wall timeout
  enforced by the caller's thread with ``select`` (no signals, so any thread may call);
- afterwards, if the run was killed or not contained, every process of its uids and its session
  is sent SIGKILL.

Without root, the limits, the wall timeout, the end of every descendant (the run's init is a
subreaper, so even a daemon that called setsid() is reached) and the two processes still apply;
the network and filesystem are shared and the working directory is a host
temporary directory removed afterwards; ``meta["network"]`` and ``meta["filesystem"]`` say so.
With ``network="require"`` a run that cannot be isolated is refused (status "error") instead.
The candidate then runs as the caller's user, so it can signal, trace or write into any
process of that user (the one grading included) and write any file the user can: a verifier
made without root warns so (:class:`UncontainedWarning`).

The verdict's meta: ``exit_code`` and ``signal`` (the candidate's process's when it ended before
the tests finished, else the tests' process's), ``duration`` (wall seconds), ``cpu_seconds``
(the candidate's), ``limits``, ``network``, ``filesystem``, ``proc``, ``user``, ``uid``,
``session`` (the run's session id), ``program`` (how the program was assembled),
``candidate_calls`` (calls the tests made into the candidate), ``stderr_tail`` /
``stdout_tail`` (the last 2,000 characters), ``leftovers_killed``; for a failure, ``phase``
("program" or "tests"), and ``hack_suspected`` with the reason when the failure is one a policy
gaming the grader would produce.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from whileai.scoring import Verdict
from whileai_verifiers import __version__
from whileai_verifiers._pairs import batch_pairs
from whileai_verifiers.codeexec_limits import Limits, NetworkPolicy
from whileai_verifiers.codeexec_program import Program, build_program
from whileai_verifiers.codeexec_sandbox import (
    DEFAULT_UID_BASE,
    DEFAULT_UID_COUNT,
    SandboxResult,
    SandboxServer,
    claimed_uid,
    run_sandboxed,
)


class UncontainedWarning(UserWarning):
    """CodeExec made by a process that is not root: its runs are not contained."""


#: What a verifier made without root says, once, when it is made.
UNCONTAINED = (
    "CodeExec is not running as root, so each candidate program runs as your user with no PID, "
    "mount or network namespace of its own: it can signal, trace or write into any process of "
    "yours (this one included) and write any file you can. Its verdicts hold against every "
    "hack that stays inside its run, but for code from a policy being trained, grade as root "
    "(a container is enough). docs/verifiers.md, 'What it does not guarantee'."
)


class CodeExec:
    """Grades code by running it against reference tests in a sandbox (see the module doc).

    Defaults: ``timeout=3.0`` wall seconds, ``cpu_time`` = the timeout rounded up,
    ``memory_mb=1024``, ``max_processes=32``, ``max_file_mb=16``, ``max_written_mb=64``,
    ``network="isolate"``, and
    ``workers`` = ``os.cpu_count()`` concurrent runs in :meth:`verify_many` (each run is one
    process, mostly busy on CPU, so more than one per core only queues). The reason for each
    limit's default is next to it in ``codeexec_limits.Limits``.
    """

    name = "CodeExec"
    version = __version__

    def __getstate__(self) -> dict[str, Any]:
        # A verifier handed to another process starts its own sandbox server there.
        state = dict(self.__dict__)
        del state["_server"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._server = SandboxServer(self.python, self.limits.network)

    def __init__(
        self,
        timeout: float = 3.0,
        *,
        cpu_time: float | None = None,
        memory_mb: int = 1024,
        max_processes: int = 32,
        max_file_mb: int = 16,
        max_written_mb: int = 64,
        workers: int | None = None,
        network: NetworkPolicy = "isolate",
        extract_fenced: bool = True,
        uid_base: int = DEFAULT_UID_BASE,
        uid_count: int = DEFAULT_UID_COUNT,
        python: str = sys.executable,
    ) -> None:
        self.limits = Limits(
            timeout=timeout,
            cpu_time=cpu_time,
            memory_mb=memory_mb,
            max_processes=max_processes,
            max_file_mb=max_file_mb,
            max_written_mb=max_written_mb,
            network=network,
        )
        if workers is None:
            workers = os.cpu_count() or 1
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a positive integer or None, got {workers!r}")
        if not (isinstance(uid_base, int) and uid_base > 0 and uid_count > 0):
            raise ValueError(
                f"uid_base and uid_count must be positive, got {uid_base}, {uid_count}"
            )
        self.workers = workers
        self.extract_fenced = extract_fenced
        self.uid_base = uid_base
        self.uid_count = uid_count
        self.python = python
        self._server = SandboxServer(python, network)
        self.meta = {"limits": self.limits.as_meta(), "workers": workers}
        if os.geteuid() != 0:
            warnings.warn(UNCONTAINED, UncontainedWarning, stacklevel=2)

    def program(self, completion: Any, reference: Any) -> Program:
        """The program and tests a run would execute (raises on a malformed reference)."""
        if reference is None:
            raise ValueError(
                "reference is missing (privileged.reference is empty); CodeExec needs test code "
                "or a {'test', 'entry_point'} mapping"
            )
        return build_program(completion, reference, extract_fenced=self.extract_fenced)

    def verify(self, completion: str, reference: Any, prompt: str | None = None) -> Verdict:
        """Run ``completion`` against ``reference``; safe to call from many threads at once."""
        return self._run(self.program(completion, reference))

    def verify_many(self, pairs: Iterable[Sequence[Any]]) -> list[Verdict]:
        """Verdicts for ``(completion, reference[, prompt])`` pairs, in order, ``workers`` at a time.

        Every pair is checked before any runs, so a malformed one fails the call at once,
        naming its index.
        """
        programs = []
        for index, (completion, reference) in enumerate(batch_pairs(pairs)):
            try:
                programs.append(self.program(completion, reference))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"pairs[{index}]: {exc}") from exc
        if not programs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.workers, len(programs))) as pool:
            return list(pool.map(self._run, programs))

    def close(self) -> None:
        """Stop the sandbox server now (it also stops when this verifier is collected)."""
        self._server.close()

    def __enter__(self) -> CodeExec:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, program: Program) -> Verdict:
        if os.geteuid() != 0:
            result = run_sandboxed(
                program, self.limits, uid=None, server=self._server, beside=self.workers - 1
            )
            return _verdict(result, self.limits, program)
        with claimed_uid(self.uid_base, self.uid_count) as uid:
            result = run_sandboxed(program, self.limits, uid=uid, server=self._server)
        return _verdict(result, self.limits, program)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _quoted_from_tests(outcome: dict[str, Any]) -> tuple[str, ...]:
    """What a failure's reason quotes of the tests beyond their lines: an assertion's own
    message (``assert f(1) == 3, "expected 3"``) is the tests' text."""
    message = str(outcome.get("message") or "").strip()
    if outcome.get("error_type") == "AssertionError" and message:
        return (message,)
    return ()


def _failure_reason(outcome: dict[str, Any], limits: Limits) -> str:
    kind = str(outcome.get("error_type", "error"))
    message = str(outcome.get("message") or "")
    where = outcome.get("where")
    # The harness's own findings (the candidate gone, a comparison it refused) read as sentences.
    plain = kind in ("CandidateEnded", "CandidateGone", "Unverifiable")
    described = message if plain else (f"{kind}: {message}" if message else kind)
    if kind == "MemoryError":
        return f"killed: memory limit ({limits.memory_mb} MB): MemoryError"
    if f"[Errno {errno.EFBIG}]" in message:
        return f"killed: file size limit ({limits.max_file_mb} MB): {described}"
    if kind == "BlockingIOError" and f"[Errno {errno.EAGAIN}]" in message:
        return f"process limit ({limits.max_processes}) reached: {described}"
    if where:
        return f"{described} ({where})"
    return described


def _killed_reason(exit_code: int, cpu: float, limits: Limits) -> str:
    """Why a process that ended with ``exit_code`` (negative: a signal) did."""
    if exit_code >= 0:
        return f"exited with code {exit_code} before the tests finished (no result was reported)"
    number = -exit_code
    if number == signal.SIGXCPU or (number == signal.SIGKILL and cpu >= limits.cpu_seconds - 0.1):
        return f"killed: CPU time limit ({limits.cpu_seconds}s)"
    if number == signal.SIGXFSZ:
        return f"killed: file size limit ({limits.max_file_mb} MB)"
    if number in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS):
        return (
            f"killed by {_signal_name(number)} (native code; the memory limit is "
            f"{limits.memory_mb} MB)"
        )
    return f"killed by {_signal_name(number)}"


def _verdict(result: SandboxResult, limits: Limits, program: Program) -> Verdict:
    record = result.record or {}
    outcome = result.outcome or {}
    candidate_exit = record.get("candidate_exit_code")
    ended = outcome.get("status") == "failed" and outcome.get("error_type") == "CandidateEnded"
    exit_code = candidate_exit if ended and candidate_exit is not None else record.get("exit_code")
    meta: dict[str, Any] = {
        "exit_code": exit_code,
        "signal": _signal_name(-exit_code)
        if isinstance(exit_code, int) and exit_code < 0
        else None,
        "duration": round(result.duration, 4),
        "cpu_seconds": record.get("candidate_cpu_seconds"),
        "limits": limits.as_meta(),
        "network": result.notes.get("network", "unknown: the sandbox did not report"),
        "filesystem": result.notes.get("filesystem", "unknown: the sandbox did not report"),
        "proc": result.notes.get("proc", "the host's: no PID namespace"),
        "user": result.notes.get("user", "unknown: the sandbox did not report"),
        "uid": result.uid,
        "session": result.session,
        "program": program.assembly,
        "candidate_calls": outcome.get("calls"),
        "stderr_tail": result.stderr_tail,
        "stdout_tail": result.stdout_tail,
        "leftovers_killed": result.leftovers_killed,
    }
    if result.error is not None:
        return Verdict.error(result.error, **meta)
    if record.get("refused"):
        return Verdict.error(f"network='require' but the network is {meta['network']}", **meta)
    status = outcome.get("status")
    if status == "sandbox_error":
        return Verdict.error(f"sandbox setup failed: {outcome.get('message')}", **meta)
    if result.timed_out:
        return Verdict(0.0, f"timeout after {limits.timeout}s", meta=meta)
    if status == "passed":
        return Verdict(1.0, "passed", meta=meta)
    if status == "error":
        return Verdict.error(f"the tests could not be run: {outcome.get('message')}", **meta)
    if status == "failed":
        meta["phase"] = outcome.get("phase")
        hack = outcome.get("hack_suspected")
        if ended and isinstance(candidate_exit, int):
            cpu = float(record.get("candidate_cpu_seconds") or 0.0)
            reason = _killed_reason(candidate_exit, cpu, limits)
            if candidate_exit >= 0 and outcome.get("phase") == "tests" and not hack:
                hack = f"the candidate's process exited (code {candidate_exit}) during the tests"
        else:
            reason = _failure_reason(outcome, limits)
        if hack:
            meta["hack_suspected"] = str(hack)
        return Verdict(0.0, reason, meta=meta, quotes=_quoted_from_tests(outcome))
    if not record.get("final") and result.uid is None and record.get("notes"):
        # Without root the candidate shares the init's uid and may kill it; a run it cut short
        # that way must score as a failure, not drop out as an error.
        meta["hack_suspected"] = "the run's init was killed before it reported"
        return Verdict(0.0, "the run's init was killed before it reported a result", meta=meta)
    if not record.get("final"):
        return Verdict.error(
            f"the sandbox ended without a final report (exit code {result.exit_code}); "
            f"stderr: {result.stderr_tail[-300:]!r}",
            **meta,
        )
    tests_exit = record.get("exit_code")
    if isinstance(tests_exit, int) and tests_exit < 0:
        why = _killed_reason(tests_exit, float(record.get("cpu_seconds") or 0.0), limits)
        if -tests_exit in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM) and "limit" not in why:
            # Not a limit of the kernel's: the one process of its uid that would send it is the
            # candidate's.
            meta["hack_suspected"] = f"the tests' process was {why}"
        return Verdict(0.0, f"the tests' process was {why}", meta=meta)
    return Verdict(
        0.0,
        f"the tests' process ended with code {tests_exit} without reporting a result",
        meta=meta,
    )
