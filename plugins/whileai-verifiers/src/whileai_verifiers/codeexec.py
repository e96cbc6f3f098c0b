"""CodeExec: runs a candidate program with its reference tests in a sandbox process.

``CodeExec().verify(completion, reference)`` passes (reward 1.0) when the program and the tests
run to the end without an exception; anything else is 0.0 with a reason a person can read
("timeout after 3.0s", "AssertionError (<tests> line 4: assert candidate(2) == 4)",
"killed: memory limit (1024 MB)", "SyntaxError: invalid syntax (<program> line 3)"). How the
program is put together from the completion and the reference is in ``codeexec_program``.

Isolation, when the process runs as root (the common case in containers):

- the program runs as an unprivileged uid of its own (one per concurrent run, see
  ``codeexec_sandbox``), so it cannot write outside its working directory, read what only root
  may read, or signal any process but its own;
- its working directory is a fresh tmpfs (4 x ``max_file_mb``) that exists only inside the run's
  mount namespace and vanishes with it; /tmp, /var/tmp, /dev/shm and unreadable directories such
  as /root are covered by empty root-owned filesystems there;
- no network: the sandbox server (one per verifier) lives in a network namespace of its own with
  only a loopback that is down and that no run may bring up. Runs of one verifier share that
  namespace (creating one per run costs more than the rest of a run), so concurrent runs could
  in principle reach each other through abstract Unix sockets, but nothing else;
- a PID namespace per run: its init kills and reaps every process the program left (a child
  that ignores SIGTERM, a daemonised grandchild) before it reports;
- kernel limits on CPU time, address space, process count and file size, plus a wall timeout
  enforced by the caller's thread with ``select`` (no signals, so any thread may call);
- afterwards, if the run was killed or not contained, every process of its uid and its session
  is sent SIGKILL.

Without root, the limits, the wall timeout and the end of every descendant (the run's init is a
subreaper, so even a daemon that called setsid() is reached) still apply; the network and
filesystem are shared and the working directory is a host temporary directory removed
afterwards; ``meta["network"]`` and ``meta["filesystem"]`` say so. With ``network="require"``
a run that cannot be isolated is refused (status "error") instead.

The verdict's meta: ``exit_code`` and ``signal`` of the program's process, ``duration`` (wall
seconds), ``cpu_seconds``, ``limits``, ``network``, ``filesystem``, ``user``, ``uid``,
``session`` (the run's session id), ``program`` (how the program was assembled),
``stderr_tail`` / ``stdout_tail`` (the last 2,000 characters), ``leftovers_killed`` and, for a
failure, ``phase`` ("program" or "tests").

Passing is reported through a pipe with a per-run secret, so a program that exits early
(``os._exit(0)``) before the tests ran does not pass. This guards against accidents and naive
reward hacks, not against a program that reads the grader's memory to find the secret.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from whileai.grading import Verdict
from whileai_verifiers import __version__
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


class CodeExec:
    """Grades code by running it against reference tests in a sandbox (see the module doc).

    Defaults: ``timeout=3.0`` wall seconds, ``cpu_time`` = the timeout rounded up,
    ``memory_mb=1024``, ``max_processes=32``, ``max_file_mb=16``, ``network="isolate"``, and
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
        for index, pair in enumerate(pairs):
            if (
                isinstance(pair, str | bytes)
                or not isinstance(pair, Sequence)
                or len(pair) not in (2, 3)
            ):
                raise ValueError(
                    f"pairs[{index}] must be (completion, reference) or (completion, reference, "
                    f"prompt), got {type(pair).__name__}"
                )
            try:
                programs.append(self.program(pair[0], pair[1]))
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
            result = run_sandboxed(program, self.limits, uid=None, server=self._server)
            return _verdict(result, self.limits, program)
        with claimed_uid(self.uid_base, self.uid_count) as uid:
            result = run_sandboxed(program, self.limits, uid=uid, server=self._server)
        return _verdict(result, self.limits, program)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _failure_reason(outcome: dict[str, Any], limits: Limits) -> str:
    kind = str(outcome.get("error_type", "error"))
    message = str(outcome.get("message") or "")
    where = outcome.get("where")
    described = f"{kind}: {message}" if message else kind
    if kind == "MemoryError":
        return f"killed: memory limit ({limits.memory_mb} MB): MemoryError"
    if f"[Errno {errno.EFBIG}]" in message:
        return f"killed: file size limit ({limits.max_file_mb} MB): {described}"
    if kind == "BlockingIOError" and f"[Errno {errno.EAGAIN}]" in message:
        return f"process limit ({limits.max_processes}) reached: {described}"
    if where:
        return f"{described} ({where})"
    return described


def _verdict(result: SandboxResult, limits: Limits, program: Program) -> Verdict:
    record = result.record or {}
    exit_code = record.get("exit_code")
    meta: dict[str, Any] = {
        "exit_code": exit_code,
        "signal": _signal_name(-exit_code)
        if isinstance(exit_code, int) and exit_code < 0
        else None,
        "duration": round(result.duration, 4),
        "cpu_seconds": record.get("cpu_seconds"),
        "limits": limits.as_meta(),
        "network": result.notes.get("network", "unknown: the sandbox did not report"),
        "filesystem": result.notes.get("filesystem", "unknown: the sandbox did not report"),
        "user": result.notes.get("user", "unknown: the sandbox did not report"),
        "uid": result.uid,
        "session": result.session,
        "program": program.assembly,
        "stderr_tail": result.stderr_tail,
        "stdout_tail": result.stdout_tail,
        "leftovers_killed": result.leftovers_killed,
    }
    outcome = result.outcome
    if result.error is not None:
        return Verdict.error(result.error, **meta)
    if record.get("refused"):
        return Verdict.error(f"network='require' but the network is {meta['network']}", **meta)
    if outcome is not None and outcome.get("status") == "sandbox_error":
        return Verdict.error(f"sandbox setup failed: {outcome.get('message')}", **meta)
    if result.timed_out:
        return Verdict(0.0, f"timeout after {limits.timeout}s", meta=meta)
    if outcome is not None and outcome.get("status") == "passed":
        return Verdict(1.0, "passed", meta=meta)
    if outcome is not None and outcome.get("status") == "failed":
        meta["phase"] = outcome.get("phase")
        return Verdict(0.0, _failure_reason(outcome, limits), meta=meta)
    if not record.get("final"):
        return Verdict.error(
            f"the sandbox ended without a final report (exit code {result.exit_code}); "
            f"stderr: {result.stderr_tail[-300:]!r}",
            **meta,
        )
    if isinstance(exit_code, int) and exit_code < 0:
        number = -exit_code
        cpu = record.get("cpu_seconds") or 0.0
        if number == signal.SIGXCPU or (
            number == signal.SIGKILL and cpu >= limits.cpu_seconds - 0.1
        ):
            return Verdict(0.0, f"killed: CPU time limit ({limits.cpu_seconds}s)", meta=meta)
        if number == signal.SIGXFSZ:
            return Verdict(0.0, f"killed: file size limit ({limits.max_file_mb} MB)", meta=meta)
        if number in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS):
            return Verdict(
                0.0,
                f"killed by {_signal_name(number)} (native code; the memory limit is "
                f"{limits.memory_mb} MB)",
                meta=meta,
            )
        return Verdict(0.0, f"killed by {_signal_name(number)}", meta=meta)
    return Verdict(
        0.0,
        f"exited with code {exit_code} before the tests finished (no result was reported)",
        meta=meta,
    )
