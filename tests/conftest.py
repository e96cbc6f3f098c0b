"""Fixtures shared by the core tests.

``inline_registry`` is a registry built from a plugin defined in the test module itself,
registered through the real hooks: the same path a third-party package takes, minus the
entry point. ``installed_dist`` writes a real ``*.dist-info`` with entry points onto
``sys.path``, so entry-point loading is exercised without installing anything. ``walked``
makes a list of rows that counts how often it is walked: a file's rows are parsed on every
walk, so a measurement's walks are counted, not timed. ``interrupt`` starts a command, waits
until it is part way (a condition of the test's), and stops it with a signal, as a person or a
scheduler would.
"""

from __future__ import annotations

import importlib
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from whileai import hookimpl
from whileai.hookspecs import Register
from whileai.registry import Registry
from whileai.scoring import Verdict


class EchoVerifier:
    """A verifier that passes when the completion equals the reference exactly."""

    name = "Echo"
    version = "1.0"

    def verify(self, completion: str, reference: Any, prompt: str | None = None) -> Verdict:
        return Verdict(1.0 if completion == reference else 0.0)


class InlinePlugin:
    """Registers one thing of every kind, so every registration hook is exercised."""

    @hookimpl
    def whileai_register_verifiers(self, register: Register) -> None:
        register("Echo", EchoVerifier, aliases=("echo",), description="equality, no normalising")

    @hookimpl
    def whileai_register_backends(self, register: Register) -> None:
        register("fake", lambda argument=None, **options: ("fake-backend", argument, options))

    @hookimpl
    def whileai_register_judges(self, register: Register) -> None:
        register("always-pass", lambda **options: lambda row: Verdict(1.0, "always"))

    @hookimpl
    def whileai_register_markers(self, register: Register) -> None:
        register("chars", lambda **options: lambda row: len(row["final_text"]))

    @hookimpl
    def whileai_register_strategies(self, register: Register) -> None:
        register("first", lambda **options: "first-strategy")

    @hookimpl
    def whileai_register_worlds(self, register: Register) -> None:
        register("empty", lambda **options: "empty-world")

    @hookimpl
    def whileai_register_executors(self, register: Register) -> None:
        register("inline", lambda **options: "inline-executor")


class WalkedRows(list):  # type: ignore[type-arg]
    """Rows that count the walks made over them (``walks``)."""

    def __init__(self, rows: Any) -> None:
        super().__init__(rows)
        self.walks = 0

    def __iter__(self) -> Any:
        self.walks += 1
        return super().__iter__()


@pytest.fixture
def walked() -> type[WalkedRows]:
    return WalkedRows


@pytest.fixture
def inline_registry() -> Registry:
    return Registry.from_plugins(InlinePlugin(), names=["inline"])


@pytest.fixture
def installed_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Install a fake distribution: ``installed_dist(name, version, {ep_name: (module, source)})``."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(dist: str, version: str, plugins: dict[str, tuple[str, str]]) -> None:
        info = tmp_path / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        lines = ["[whileai]"]
        for ep_name, (module, source) in plugins.items():
            (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
            lines.append(f"{ep_name} = {module}")
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        importlib.invalidate_caches()

    return install


@pytest.fixture(autouse=True)
def _forget_fake_modules() -> Iterator[None]:
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("fake_whileai_"):
            del sys.modules[name]


@attrs.frozen
class Stopped:
    """How a command stopped by :func:`interrupt` ended."""

    returncode: int
    stdout: str
    stderr: str


def _interrupt(
    argv: list[str],
    part_way: Callable[[], bool],
    sig: int = signal.SIGINT,
    **popen: Any,
) -> Stopped:
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not part_way():
            time.sleep(0.01)
        assert proc.poll() is None, "the command finished before it could be stopped"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    return Stopped(proc.returncode, out, err)


@pytest.fixture
def interrupt() -> Callable[..., Stopped]:
    """``interrupt(argv, part_way, sig=SIGINT, **popen)``: run ``argv``, send ``sig`` once
    ``part_way()`` holds, and return how it ended (no process is left behind)."""
    return _interrupt
