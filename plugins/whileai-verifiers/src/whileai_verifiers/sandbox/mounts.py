"""The runs' view of the filesystem: laid out once by the sandbox server, as root, in a mount
namespace of its own, which every run's mount namespace starts as a copy of.

- Every host mount is remounted read-only (and nosuid) there, found from
  ``/proc/self/mountinfo``, so a world-writable directory anywhere (``/run/lock``, one a
  package made) takes no write: there is no list of writable places to keep up to date. A mount
  the host makes later does not propagate into the server's namespace (it is private), so runs
  never see it at all.
- The directories anyone may write to and the directories the sandbox users could not read
  anyway (``/root``) are covered by empty root-owned tmpfs, with the interpreter's own files
  bound back in, so what other users left there is not read.
- Each run mounts a fresh tmpfs, owned by its uid, on one fixed directory inside the covered
  /tmp, in its own namespace: its working directory, the only writable place, so its size is
  the cap on everything the run writes. Doing the rest once keeps a run to two mounts.
- ``/proc`` is mounted anew by each run's init, inside its PID namespace, so it lists the run's
  own processes and nothing of the host's.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
# Directories anyone may write to that are worth covering for privacy (other users' files);
# writes anywhere are stopped by the read-only remount, whether listed here or not.
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
# Mount options that a bind remount must repeat, or the kernel clears them.
_KEPT_OPTIONS = {
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}

libc = ctypes.CDLL(None, use_errno=True)


def check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    check(
        libc.mount(
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


@functools.cache
def _interpreter_paths() -> list[str]:
    # Computed once in the server, before it forks: every run inherits the answer.
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
    mount("tmpfs", mask, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path, fd in handles:
        os.makedirs(path, exist_ok=True)
        # /proc/self/fd/N still names the directory the new tmpfs now hides.
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
        os.close(fd)


_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash in a path as octal escapes.
    if "\\" not in field:
        return field
    raw = _OCTAL.sub(lambda m: chr(int(m[1], 8)), field)
    return raw.encode("latin-1", "surrogateescape").decode("utf-8", "replace")


def mount_points() -> list[tuple[str, int]]:
    """Every mount point of this namespace, with the per-mount flags a remount must keep."""
    found = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            target = _unescape(fields[4])
            flags = 0
            for option in fields[5].split(","):
                flags |= _KEPT_OPTIONS.get(option, 0)
            found.append((target, flags))
    return found


def make_read_only(except_for: str) -> list[str]:
    """Remount every mount read-only and nosuid but ``except_for``; the ones that refused.

    Parents before children (mountinfo's order), so a child remounted later keeps its own."""
    refused = []
    for target, flags in mount_points():
        if target == except_for:
            continue
        try:
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | flags, None)
        except OSError as exc:
            if os.path.exists(target):
                refused.append(f"{target} ({os.strerror(exc.errno or 0)})")
    return refused


# Where every run's working directory is mounted, each in its own mount namespace.
RUN_WORKDIR = "/tmp/whileai-codeexec-run"


def prepare_server() -> tuple[str | None, str]:
    """In the server, once: a mount namespace of its own laid out as above. The directory runs
    mount their working directory on (None when the machine did not allow it), and a note."""
    if libc.unshare(CLONE_NEWNS) != 0:
        return (
            None,
            f"shared with the host: unshare(CLONE_NEWNS) failed ({os.strerror(ctypes.get_errno())})",
        )
    try:
        mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        keep = _interpreter_paths()
        masks = {m for m in (_hidden_ancestor(p) for p in keep) if m}
        masks.update(m for m in SHARED_WRITABLE if os.path.isdir(m) and not os.path.islink(m))
        if os.path.dirname(RUN_WORKDIR) not in masks:
            return None, f"shared with the host: {os.path.dirname(RUN_WORKDIR)} cannot be covered"
        for mask in sorted(masks, key=len):
            _cover(mask, keep)
        os.makedirs(RUN_WORKDIR)
        refused = make_read_only(except_for="")
    except OSError as exc:
        return None, f"shared with the host: {exc}"
    read_only = "every other mount read-only" + (f" but {', '.join(refused)}" if refused else "")
    return RUN_WORKDIR, f"private: {', '.join(sorted(masks))} covered; {read_only}"


def make_filesystem(
    job: dict[str, Any], notes: dict[str, str], workdir: str | None, layout: str
) -> bool:
    """Enter new mount and PID namespaces (copies of the server's) and mount the run's working
    directory; False when the machine did not allow it, and the notes say why."""
    if workdir is None:
        notes["namespaces"] = "not created: the server's filesystem could not be laid out"
        notes["filesystem"] = layout
        return False
    if libc.unshare(CLONE_NEWNS | CLONE_NEWPID) != 0:
        why = os.strerror(ctypes.get_errno())
        notes["namespaces"] = f"not created: unshare failed ({why})"
        notes["filesystem"] = f"shared with the host: unshare(CLONE_NEWNS) failed ({why})"
        return False
    notes["namespaces"] = "created: mount, pid"
    uid = job.get("uid")
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    size = int(job["limits"]["max_written_mb"])
    try:
        mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,size={size}m{owner}")
    except OSError as exc:
        notes["filesystem"] = f"shared with the host: {exc}"
        return False
    job["workdir"] = workdir
    notes["filesystem"] = f"{layout}; working directory a {size} MB tmpfs, the only writable place"
    return True


def mount_proc(notes: dict[str, str]) -> None:
    """A /proc of the run's own PID namespace; called by the run's init (PID 1 there)."""
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    except OSError as exc:
        notes["proc"] = f"the host's: {exc}"
    else:
        notes["proc"] = "private: the run's processes only"


def host_workdir(job: dict[str, Any]) -> None:
    """The working directory on the host's filesystem, when no mount namespace could be made;
    the runner removes it afterwards."""
    os.makedirs(job["workdir"], mode=0o700, exist_ok=True)
    uid = job.get("uid")
    if uid is not None:
        os.chown(job["workdir"], uid, uid)
