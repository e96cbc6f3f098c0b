"""The sandbox server and each run's process tree. Standard library only: it starts before
anything else is imported and its forks run as other users.

CodeExec starts one server per verifier (``launch_command``) and asks it to fork one run per
program, so each run starts from a warm interpreter. Then:

1. the server, as root, moves into a new network namespace with only a down loopback, so no
   connection from any run leaves the machine, and into a mount namespace of its own where it
   lays out the filesystem every run sees (``mounts``: host mounts read-only, shared and
   unreadable directories covered), once rather than in every run;
2. each run's first process reads its job (JSON: the program, its limits, its directory) from
   a pipe while still privileged and, as root, enters new mount and PID namespaces (copies of
   the server's) and mounts its working directory there; it writes the isolation notes to the
   result pipe, forks the run's init and exits. The tests come in a pipe of their own, which
   this process and the init hand on unread: only the tests' process reads it, so the tests
   are never in the memory of any process the candidate's is a fork of (a program that walked
   ``gc`` or read its own heap would find the expected answers there);
3. the init, PID 1 of the new PID namespace, mounts the run's own /proc and forks two
   processes that share nothing but two pipes:

   - the **tests' process** (``harness``) runs the reference's tests and is the only process
     that holds the outcome's pipe;
   - the **candidate's process** (``candidate``) runs the program and answers the tests' calls
     into it with plain values.

   Both run as the run's uid (a test may read a file the program wrote, whatever its mode),
   and the tests' process is non-dumpable from before its first instruction: no process of the
   same uid may trace it, read or write its memory, open its /proc files or take its file
   descriptors. The candidate holds no descriptor of the outcome's pipe or the result pipe and
   so cannot write a verdict: what it controls is what its functions return (and it can kill
   or stop the tests' process, which fails the run);
4. when the tests' process ends, the init kills and reaps everything left in the namespace and
   writes the final record (both processes' exit status, CPU time, the tests' outcome) to the
   result pipe; its exit closes the pipe, which tells the runner the run is over.

Each step that the machine does not allow is skipped and named in the notes, so the runner can
say what isolation the result had.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import resource
import signal
import socket
import struct
import sys
import time
import traceback
from typing import Any

from whileai_verifiers.sandbox import candidate, harness, mounts

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def launch_command(python: str, package_dir: str, control_fd: int, network: str) -> list[str]:
    """The command that starts a server: this package imported without its parent's
    ``__init__`` (which needs the distribution's metadata), from any interpreter."""
    bootstrap = (
        "import sys, types; "
        "package = types.ModuleType('whileai_verifiers'); "
        f"package.__path__ = [{package_dir!r}]; "
        "sys.modules['whileai_verifiers'] = package; "
        "from whileai_verifiers.sandbox.server import serve; "
        "serve(int(sys.argv[1]), sys.argv[2])"
    )
    return [python, "-I", "-B", "-c", bootstrap, str(control_fd), network]


# Standard modules programs and tests commonly import, loaded once by the server so no run pays
# for them: a fork shares them (unittest alone takes ~28 ms to import here). Each run's two
# processes still get separate copies the moment either changes one.
PRELOADED = (
    "bisect",
    "collections",
    "copy",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "math",
    "random",
    "re",
    "string",
    "unittest",
)


def preload() -> None:
    for name in PRELOADED:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def isolate_network(policy: str) -> str:
    """Move this (server) process into a new network namespace that every run shares: it has
    only a loopback that is down and that no run may bring up, so nothing reaches any host.
    Made once per server rather than per run, because creating and tearing down a network
    namespace costs more than the rest of a run's setup together."""
    if policy == "allow":
        return "not isolated: network='allow'"
    if os.geteuid() != 0:
        return "not isolated: creating a network namespace needs root"
    if mounts.libc.unshare(mounts.CLONE_NEWNET) != 0:
        return f"not isolated: unshare(CLONE_NEWNET) failed ({os.strerror(ctypes.get_errno())})"
    return "isolated"


def drop_privileges(uid: int | None) -> None:
    if uid is None:
        return
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def apply_limits(job: dict[str, Any]) -> None:
    limits = job["limits"]
    cpu = int(limits["cpu_time"])
    # Soft limit sends SIGXCPU, the hard one a second later SIGKILL, for code that catches it.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    file_size = int(limits["max_file_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    processes = int(limits["max_processes"]) + int(job.get("nproc_offset", 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def enter(job: dict[str, Any], uid: int | None) -> None:
    """What both of a run's processes do first: its directory, its user, its limits."""
    os.chdir(job["workdir"])
    # Home and temporary files go to the working directory, the one place it may write.
    os.environ.update(HOME=job["workdir"], TMPDIR=job["workdir"])
    if "tempfile" in sys.modules:
        setattr(sys.modules["tempfile"], "tempdir", None)  # noqa: B010
    drop_privileges(uid)
    # After the uid change, which clears both: if the init dies, so does this process, and no
    # process of the same uid may trace it or open its /proc files.
    mounts.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    mounts.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    apply_limits(job)


def _exit(status: int) -> None:
    """End a run's process at once, after what it printed has gone out."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def candidate_main(job: dict[str, Any], requests: int, replies: int) -> None:
    """The candidate's process: never returns."""
    status = 0
    try:
        enter(job, job.get("uid"))
        candidate.serve(job, requests, replies)
    except BaseException:
        status = 70
    finally:
        _exit(status)


def tests_main(
    job: dict[str, Any], tests_fd: int, requests: int, replies: int, report_fd: int
) -> None:
    """The tests' process: never returns. The first to read the tests' pipe (see the module
    doc)."""
    status = 70
    try:
        with os.fdopen(tests_fd, "rb") as handle:
            job = {**job, **json.loads(handle.read())}
        enter(job, job.get("uid"))
        outcome = harness.serve(job, requests, replies)
        outcome["nonce"] = job["nonce"]
        os.write(report_fd, (json.dumps(outcome) + "\n").encode())
        status = 0
    except BaseException as exc:
        failure = {
            "status": "sandbox_error",
            "message": f"{type(exc).__name__}: {exc}",
            "nonce": job["nonce"],
        }
        with contextlib.suppress(OSError):
            os.write(report_fd, (json.dumps(failure) + "\n").encode())
    finally:
        _exit(status)


#: How long the init waits for the exit status of a candidate the tests saw end (it is
#: between closing its pipes and becoming a zombie: microseconds, unless the machine is busy).
_EXIT_STATUS_WAIT = 2.0


def _read_available(fd: int) -> bytes:
    """What is in the pipe now; a grandchild still holding its write end cannot make us wait."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks)


def run_job(
    network: str,
    layout: tuple[str | None, str],
    job_fd: int,
    tests_fd: int,
    stdout_fd: int,
    stderr_fd: int,
    result_fd: int,
) -> None:
    """One sandbox run, in a process forked from the server for it (see the module doc).
    ``tests_fd`` is handed on to the init unread."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    os.close(stdout_fd)
    os.close(stderr_fd)
    with os.fdopen(job_fd, "rb") as handle:
        job = json.loads(handle.read())
    notes: dict[str, str] = {"network": network}
    private = False
    if os.geteuid() == 0:
        private = mounts.make_filesystem(job, notes, *layout)
    else:
        notes["namespaces"] = "not created: not running as root"
        notes["filesystem"] = "shared with the host: not running as root"
    if not private:
        mounts.host_workdir(job)
    if job["network"] == "require" and notes.get("network") != "isolated":
        refusal = {"nonce": job["nonce"], "exit_code": None, "notes": notes, "refused": True}
        os.write(result_fd, json.dumps(refusal).encode())
        return
    uid = job.get("uid")
    notes["user"] = f"uid {uid}" if uid is not None else f"uid {os.getuid()} (not root, unchanged)"
    # The isolation notes go out first, so the runner has them even if the run is killed; then
    # the init's pid as the host sees it, which the runner waits on for the run's very end.
    os.write(result_fd, (json.dumps({"nonce": job["nonce"], "notes": notes}) + "\n").encode())
    init = os.fork()
    if init == 0:
        init_main(job, tests_fd, result_fd, notes, private)
    os.write(result_fd, (json.dumps({"nonce": job["nonce"], "init_pid": init}) + "\n").encode())
    # This process ends here: the init carries on as a child of the server, which reaps it, and
    # writes the run's record itself, so no further hop is needed once the tests end.


def _fork(target: Any, *args: Any, close: tuple[int, ...]) -> int:
    pid = os.fork()
    if pid == 0:
        for fd in close:
            os.close(fd)
        target(*args)
    return pid


def init_main(
    job: dict[str, Any], tests_fd: int, result_fd: int, notes: dict[str, str], private: bool
) -> None:
    """The first process of the run's PID namespace. Never returns.

    It starts the tests' and the candidate's processes and waits for the tests' to end; then,
    inside its own namespace, kills every process left (``kill(-1)`` from a namespace's init
    reaches only that namespace) and reaps them all, so when it writes the record and its end
    closes the result pipe, nothing of the run is alive. A backstop alarm kills the run if the
    runner that set the deadline is gone.
    """
    status = 0
    try:
        contained = os.getpid() == 1
        if contained and private:
            mounts.mount_proc(notes)
        if not contained:
            # Without a PID namespace, orphans (daemons included) are re-parented to this
            # process instead of the host's init, so it can still end them.
            mounts.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        # Inherited by both children, and set again after their uid change: the tests' process
        # is never traceable, not even in the instant after the fork.
        mounts.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        report_read, report_write = os.pipe()
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        tests_pid = _fork(
            tests_main,
            job,
            tests_fd,
            requests_write,
            replies_read,
            report_write,
            close=(result_fd, report_read, requests_read, replies_write),
        )
        candidate_pid = _fork(
            candidate_main,
            job,
            requests_read,
            replies_write,
            close=(result_fd, tests_fd, report_read, report_write, requests_write, replies_read),
        )
        # (the tests' pipe too: were the init to hold it, a runner writing tests larger than a
        # pipe's buffer would wait on a tests' process that died before reading them)
        ends = (tests_fd, report_write, requests_read, requests_write, replies_read, replies_write)
        for fd in ends:
            os.close(fd)

        def backstop(signum: int, frame: Any) -> None:
            if contained:
                os.kill(-1, signal.SIGKILL)
            else:
                os.killpg(os.getpgrp(), signal.SIGKILL)

        signal.signal(signal.SIGALRM, backstop)
        signal.setitimer(signal.ITIMER_REAL, float(job["limits"]["timeout"]) + 2.0)
        candidate_status: int | None = None
        candidate_cpu = 0.0
        while True:
            pid, wait_status, usage = os.wait4(-1, 0)
            if pid == candidate_pid:
                candidate_status = wait_status
                candidate_cpu = usage.ru_utime + usage.ru_stime
            if pid == tests_pid:
                break
        # The reports are a few short lines, well inside a pipe's buffer, so no writer blocked
        # on them and they are all there now.
        reports = _read_available(report_read)
        if candidate_status is None:
            # Reaped in either order: a candidate that ended before the tests did is a zombie
            # now, or about to be: a process closes its pipes before it becomes a zombie, so
            # the tests can see it go and end first. Its status is why it went; when the tests
            # say it ended, wait the moment that takes (a live candidate is not waited for).
            ended = b'"CandidateEnded"' in reports
            deadline = time.monotonic() + (_EXIT_STATUS_WAIT if ended else 0.0)
            while candidate_status is None:
                with contextlib.suppress(ChildProcessError):
                    pid, wait_status_c, usage_c = os.wait4(candidate_pid, os.WNOHANG)
                    if pid == candidate_pid:
                        candidate_status = wait_status_c
                        candidate_cpu = usage_c.ru_utime + usage_c.ru_stime
                if candidate_status is not None or time.monotonic() >= deadline:
                    break
                time.sleep(0.001)
        signal.setitimer(signal.ITIMER_REAL, 0)
        if contained:
            # Again after every reap: a process forked while the first signal went out may have
            # missed it.
            with contextlib.suppress(ChildProcessError):
                while True:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(-1, signal.SIGKILL)
                    os.wait()
        else:
            end_descendants()
        reports += _read_available(report_read)
        record: dict[str, Any] = {
            "nonce": job["nonce"],
            "final": True,
            "exit_code": os.waitstatus_to_exitcode(wait_status),
            "candidate_exit_code": None
            if candidate_status is None
            else os.waitstatus_to_exitcode(candidate_status),
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "candidate_cpu_seconds": candidate_cpu,
            "contained": contained,
            "notes": notes,
            "reports": reports.decode("utf-8", "replace")[-20000:],
        }
        os.write(result_fd, (json.dumps(record) + "\n").encode())
    except BaseException:
        traceback.print_exc()
        status = 70
    finally:
        os._exit(status)


def _children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            # The command name may hold spaces and parentheses; the fields after it do not.
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == pid:
                found.append(int(name))
    return found


def end_descendants() -> None:
    """Kill and reap every descendant of this subreaper: each one killed hands its own children
    to us, so repeating until none is left ends the whole tree, however it daemonised."""
    me = os.getpid()
    while True:
        for pid in _children(me):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.wait()
        except ChildProcessError:
            return
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass


def serve(control_fd: int, network_policy: str) -> None:
    """Fork one run per request until the control socket closes.

    A request is the word ``run`` with five file descriptors (job pipe, tests pipe, stdout,
    stderr, result pipe); the reply is the run's pid (its session id). Forking this warm interpreter costs a
    few milliseconds where starting a new one costs tens. The server is single-threaded (so
    forking it is safe), is the subreaper of its runs' orphaned inits, and lets the kernel reap
    all its children.
    """
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    mounts.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    preload()
    network = isolate_network(network_policy)
    layout: tuple[str | None, str] = (None, "shared with the host: not running as root")
    if os.geteuid() == 0:
        layout = mounts.prepare_server()
    # Every object the server holds now moves to the collector's permanent generation: a run's
    # processes are forks of this one, and a collection there would otherwise walk (and so
    # copy, page by page) the whole inherited heap (the gc.freeze idiom for pre-fork servers).
    gc.collect()
    gc.freeze()
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 64, 5)
        except OSError:
            return
        if not message:
            return
        if message != b"run" or len(fds) != 5:
            for fd in fds:
                os.close(fd)
            control.send(struct.pack("q", -1))
            continue
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                control.close()
                os.setsid()
                run_job(network, layout, *fds)
            except BaseException:
                traceback.print_exc()
                status = 70
            finally:
                os._exit(status)
        for fd in fds:
            os.close(fd)
        control.send(struct.pack("q", pid))
