"""The sandbox's own side: run as a script (``python -I codeexec_child.py FD NETWORK``) by CodeExec.

Standard library only, because it starts before anything is imported and its forks run as
another user. It is started once per verifier as a small server (``serve``) that forks one
process per run, so each run starts from a warm interpreter. Then:

1. the server, as root, moves into a new network namespace with only a down loopback, so no
   connection from any run leaves the machine;
2. each run's first process reads its job (JSON) from a pipe while still privileged and, as
   root, moves into new mount and PID namespaces where the kernel allows it: /tmp, /var/tmp,
   /dev/shm, the parent of the working directory and every directory the sandbox user could not
   read anyway (e.g. /root) are covered by empty root-owned filesystems with the interpreter's
   own files bound back in, and the working directory is a fresh size-limited tmpfs owned by the
   sandbox user. It writes the isolation notes to the result pipe, forks the init and exits;
3. the init, PID 1 of the new PID namespace, forks the program's process, which drops to the
   job's unprivileged uid, applies the resource limits, runs the candidate program and the tests
   in one module namespace, and reports the outcome on a pipe;
4. when the program's process ends, the init kills and reaps everything left in the namespace
   (daemonised grandchildren included) and writes the final record (exit status, CPU time,
   outcome) to the result pipe; its exit closes the pipe, which tells the runner the run is over.

Each step that the machine does not allow is skipped and named in the notes, so the runner can
say what isolation the result had.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import linecache
import os
import resource
import signal
import socket
import struct
import sys
import traceback
import types
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 2
MS_NODEV = 4
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# Directories anyone may write to: covered inside the sandbox so nothing it writes there
# reaches the host.
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")
MESSAGE_LIMIT = 600

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    _check(
        _libc.mount(
            None if source is None else source.encode(),
            target.encode(),
            None if fstype is None else fstype.encode(),
            ctypes.c_ulong(flags),
            None if data is None else data.encode(),
        ),
        f"mount {target}",
    )


def _hidden_ancestor(path: str) -> str | None:
    """The outermost directory above ``path`` that other users cannot enter, if any."""
    current = "/"
    for part in path.strip("/").split("/")[:-1]:
        current = os.path.join(current, part)
        try:
            mode = os.stat(current).st_mode
        except OSError:
            return None
        if not mode & 0o001:
            return current
    return None


def _interpreter_paths() -> list[str]:
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    paths.update(os.path.realpath(p) for p in sys.path if p and os.path.isdir(p))
    return sorted(paths)


def _cover(mask: str, keep: list[str]) -> None:
    """Mount an empty root-owned tmpfs over ``mask`` and bind each ``keep`` path back into it."""
    keep = [p for p in keep if p == mask or p.startswith(mask + "/")]
    # Keep only the outermost of nested paths: binding the outer one brings the inner along.
    keep = [p for p in keep if not any(p != q and p.startswith(q + "/") for q in keep)]
    if mask in keep:
        return
    handles = [(p, os.open(p, os.O_RDONLY | os.O_DIRECTORY)) for p in keep]
    _mount("tmpfs", mask, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path, fd in handles:
        os.makedirs(path, exist_ok=True)
        # /proc/self/fd/N still names the directory the new tmpfs now hides.
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
        os.close(fd)


def isolate_network(policy: str) -> str:
    """Move this (server) process into a new network namespace that every run shares: it has
    only a loopback that is down and that no run may bring up, so nothing reaches any host.
    Made once per server rather than per run, because creating and tearing down a network
    namespace costs more than the rest of a run's setup together."""
    if policy == "allow":
        return "not isolated: network='allow'"
    if os.geteuid() != 0:
        return "not isolated: creating a network namespace needs root"
    if _libc.unshare(CLONE_NEWNET) != 0:
        return f"not isolated: unshare(CLONE_NEWNET) failed ({os.strerror(ctypes.get_errno())})"
    return "isolated"


def _workdir_size_mb(job: dict[str, Any]) -> int:
    return 4 * int(job["limits"]["max_file_mb"])


def isolate(job: dict[str, Any], notes: dict[str, str]) -> None:
    """Enter new mount and PID namespaces (as root) and make the working directory."""
    workdir = job["workdir"]
    if _libc.unshare(CLONE_NEWNS | CLONE_NEWPID) != 0:
        why = os.strerror(ctypes.get_errno())
        notes["namespaces"] = f"not created: unshare failed ({why})"
        notes["filesystem"] = f"shared with the host: unshare(CLONE_NEWNS) failed ({why})"
        host_workdir(job)
        return
    notes["namespaces"] = "created: mount, pid"
    try:
        _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        keep = _interpreter_paths()
        masks = {m for m in (_hidden_ancestor(p) for p in keep) if m}
        masks.update(m for m in SHARED_WRITABLE if os.path.isdir(m) and not os.path.islink(m))
        masks.add(os.path.dirname(workdir))
        for mask in sorted(masks, key=len):
            _cover(mask, keep)
        # The working directory is a tmpfs of its own, seen only inside this namespace: it is
        # empty at the start and gone with the namespace, and its size caps the disk it uses.
        os.makedirs(workdir, exist_ok=True)
        uid = job.get("uid")
        owner = f",uid={uid},gid={uid}" if uid is not None else ""
        size = _workdir_size_mb(job)
        _mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,size={size}m{owner}")
        notes["filesystem"] = (
            f"private: {', '.join(sorted(masks))} covered; working directory a {size} MB tmpfs"
        )
    except OSError as exc:
        notes["filesystem"] = f"shared with the host: {exc}"
        host_workdir(job)


def host_workdir(job: dict[str, Any]) -> None:
    """The working directory on the host's filesystem, when no mount namespace could be made;
    the runner removes it afterwards."""
    os.makedirs(job["workdir"], mode=0o700, exist_ok=True)
    uid = job.get("uid")
    if uid is not None:
        os.chown(job["workdir"], uid, uid)


def drop_privileges(job: dict[str, Any]) -> None:
    uid = job.get("uid")
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


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _describe(exc: BaseException, sources: dict[str, list[str]]) -> dict[str, Any]:
    where = None
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename in sources and frame.lineno:
            line = sources[frame.filename][frame.lineno - 1].strip()
            where = f"{frame.filename} line {frame.lineno}: {_short(line)}"
            break
    if isinstance(exc, SyntaxError) and exc.filename in sources:
        where = f"{exc.filename} line {exc.lineno}"
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return {"error_type": type(exc).__name__, "message": _short(message), "where": where}


def run_candidate(job: dict[str, Any]) -> dict[str, Any]:
    """Compile and run the program, then the tests, in one ``__main__`` module namespace."""
    parts = [("<program>", job["program"], "program")]
    if job.get("tests"):
        parts.append(("<tests>", job["tests"], "tests"))
    sources = {name: text.splitlines() for name, text, _ in parts}
    for name, text, _ in parts:
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    sys.argv = ["<program>"]
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = module
    phase = "program"
    try:
        codes = [
            (compile(text, name, "exec", dont_inherit=True), phase) for name, text, phase in parts
        ]
        for code, current in codes:
            phase = current
            exec(code, module.__dict__)
        entry_point = job.get("entry_point")
        if entry_point:
            phase = "tests"
            if entry_point not in module.__dict__:
                return {
                    "status": "failed",
                    "error_type": "NameError",
                    "message": f"the program does not define {entry_point!r}",
                    "where": None,
                    "phase": "program",
                }
            module.__dict__["check"](module.__dict__[entry_point])
    except SystemExit as exc:
        if phase == "tests" and exc.code in (None, 0, False):
            return {"status": "passed"}
        return {
            "status": "failed",
            "error_type": "SystemExit",
            "message": f"exit({exc.code!r}) during the {phase}",
            "where": _describe(exc, sources)["where"],
            "phase": phase,
        }
    except BaseException as exc:
        return {"status": "failed", "phase": phase, **_describe(exc, sources)}
    return {"status": "passed"}


def child_main(job: dict[str, Any], report_fd: int, notes: dict[str, str]) -> None:
    """The program's process: never returns."""
    status = 70
    try:
        os.chdir(job["workdir"])
        # Home and temporary files go to the working directory, the one place it may write.
        os.environ.update(HOME=job["workdir"], TMPDIR=job["workdir"])
        if "tempfile" in sys.modules:
            setattr(sys.modules["tempfile"], "tempdir", None)  # noqa: B010
        drop_privileges(job)
        # Set after the uid change, which clears it: if the init is killed, so is this.
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        apply_limits(job)
        outcome = run_candidate(job)
        outcome["nonce"] = job["nonce"]
        os.write(report_fd, (json.dumps(outcome) + "\n").encode())
        status = 0 if outcome["status"] == "passed" else 1
    except BaseException as exc:
        failure = {
            "status": "sandbox_error",
            "message": f"{type(exc).__name__}: {exc}",
            "nonce": job["nonce"],
        }
        os.write(report_fd, (json.dumps(failure) + "\n").encode())
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


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


def run_job(network: str, job_fd: int, stdout_fd: int, stderr_fd: int, result_fd: int) -> None:
    """One sandbox run, in a process forked from the server for it (see the module doc)."""
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
    if os.geteuid() == 0:
        isolate(job, notes)
    else:
        notes["namespaces"] = "not created: not running as root"
        notes["filesystem"] = "shared with the host: not running as root"
        host_workdir(job)
    if job["network"] == "require" and notes.get("network") != "isolated":
        refusal = {"nonce": job["nonce"], "exit_code": None, "notes": notes, "refused": True}
        os.write(result_fd, json.dumps(refusal).encode())
        return
    uid = job.get("uid")
    notes["user"] = f"uid {uid}" if uid is not None else f"uid {os.getuid()} (not root, unchanged)"
    # The isolation notes go out first, so the runner has them even if the run is killed.
    os.write(result_fd, (json.dumps({"nonce": job["nonce"], "notes": notes}) + "\n").encode())
    if os.fork() == 0:
        init_main(job, result_fd, notes)
    # This process ends here: the init carries on as a child of the server, which reaps it, and
    # writes the run's record itself, so no further hop is needed once the program ends.


def init_main(job: dict[str, Any], result_fd: int, notes: dict[str, str]) -> None:
    """The first process of the run's PID namespace. Never returns.

    It starts the program's process and waits for it; then, inside its own namespace, kills
    every process left (``kill(-1)`` from a namespace's init reaches only that namespace) and
    reaps them all, so when it writes the record and its end closes the result pipe, nothing of
    the run is alive. A backstop alarm kills the run if the runner that set the deadline is gone.
    """
    status = 0
    try:
        contained = os.getpid() == 1
        if not contained:
            # Without a PID namespace, orphans (daemons included) are re-parented to this
            # process instead of the host's init, so it can still end them.
            _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        read_end, write_end = os.pipe()
        program_pid = os.fork()
        if program_pid == 0:
            os.close(read_end)
            os.close(result_fd)
            child_main(job, write_end, notes)
        os.close(write_end)

        def backstop(signum: int, frame: Any) -> None:
            if contained:
                os.kill(-1, signal.SIGKILL)
            else:
                os.killpg(os.getpgrp(), signal.SIGKILL)

        signal.signal(signal.SIGALRM, backstop)
        signal.setitimer(signal.ITIMER_REAL, float(job["limits"]["timeout"]) + 2.0)
        while True:
            pid, wait_status, usage = os.wait4(-1, 0)
            if pid == program_pid:
                break
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
        # The reports are a few short lines, well inside a pipe's buffer, so no writer blocked
        # on them and they are all there now.
        reports = _read_available(read_end)
        record: dict[str, Any] = {
            "nonce": job["nonce"],
            "final": True,
            "exit_code": os.waitstatus_to_exitcode(wait_status),
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "max_rss_kb": usage.ru_maxrss,
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

    A request is the word ``run`` with four file descriptors (job pipe, stdout, stderr, result
    pipe); the reply is the run's pid (its session id). Forking this warm interpreter costs a
    few milliseconds where starting a new one costs tens. The server is single-threaded (so
    forking it is safe), is the subreaper of its runs' orphaned inits, and lets the kernel reap
    all its children.
    """
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    network = isolate_network(network_policy)
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 64, 4)
        except OSError:
            return
        if not message:
            return
        if message != b"run" or len(fds) != 4:
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
                run_job(network, *fds)
            except BaseException:
                traceback.print_exc()
                status = 70
            finally:
                os._exit(status)
        for fd in fds:
            os.close(fd)
        control.send(struct.pack("q", pid))


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])
