#!/usr/bin/env python3
"""The project's own runner: needs only python3 (3.11+) and pip.

    python3 dev.py demo    # the offline demo (the main job)
    python3 dev.py test    # lint, type check, every test, and the core-only check
    python3 dev.py bench NAME   # one benchmark from benchmarks/, peers installed beside it

It installs a pinned uv into .cache/bootstrap, syncs the workspace into .venv (uv caches the
llama-cpp-python build, so only the first sync compiles it), and runs inside that environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
UV_VERSION = "0.13.9"
BOOTSTRAP = ROOT / ".cache" / "bootstrap"
ENV = ROOT / ".venv"
CORE_ONLY = ROOT / ".cache" / "core-only"
TEST_TOOLS = ["pytest>=8", "hypothesis>=6.100", "jsonschema>=4.20"]


def run(*cmd: str | os.PathLike[str], env: dict[str, str] | None = None) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    result = subprocess.run([str(c) for c in cmd], cwd=ROOT, env=env)
    if result.returncode != 0:
        sys.exit(result.returncode)


def uv() -> Path:
    exe = BOOTSTRAP / "bin" / "uv"
    if not exe.exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(BOOTSTRAP)
        run(BOOTSTRAP / "bin" / "python", "-m", "pip", "install", "-q", f"uv=={UV_VERSION}")
    return exe


def sync(*groups: str) -> None:
    # In CI the lock file must already agree with the pyproject files; locally it is refreshed.
    locked = ["--locked"] if os.environ.get("CI") else []
    args = ["sync", "--all-packages", *locked, *[f"--group={g}" for g in groups]]
    args += ["--python", sys.executable]
    # Offline first: online, uv re-validates llama-cpp-python's source archive with the index,
    # which here yields a new cache revision each time and so a fresh 5-minute compile. Offline
    # it trusts the cached archive and the wheel already built from it. A cold cache or a new
    # dependency makes the offline attempt fail, and the online sync below does the work.
    offline = subprocess.run(
        [str(uv()), *args, "--offline"], cwd=ROOT, capture_output=True, text=True
    )
    if offline.returncode == 0:
        print(f"+ uv {' '.join(args)} --offline (from the cache)", flush=True)
        return
    run(uv(), *args)


def bin_(name: str) -> Path:
    return ENV / "bin" / name


def demo(extra: list[str]) -> None:
    sync()
    run(bin_("whileai"), "demo", *extra)


def lint() -> None:
    run(bin_("ruff"), "check", ".")
    run(bin_("ruff"), "format", "--check", ".")
    run(bin_("mypy"))


def core_only() -> None:
    """whileai-core alone, with no plugin installed, must import and pass its own tests."""
    if not (CORE_ONLY / "bin" / "python").exists():
        run(uv(), "venv", "-q", "--python", sys.executable, CORE_ONLY)
    python = CORE_ONLY / "bin" / "python"
    run(uv(), "pip", "install", "-q", "--python", python, "./whileai_core", *TEST_TOOLS)
    env = {**os.environ, "WHILEAI_CORE_ONLY": "1"}
    run(
        python,
        "-m",
        "pytest",
        "-q",
        "-m",
        "not plugins",
        "-p",
        "no:cacheprovider",
        "tests",
        env=env,
    )


def test(extra: list[str]) -> None:
    sync()
    lint()
    run(bin_("python"), "-m", "pytest", *(extra or ["-q"]))
    core_only()


def bench(extra: list[str]) -> None:
    """Run one benchmark (benchmarks/<name>.py) with its peers installed beside whileai."""
    if not extra:
        names = sorted(p.stem for p in (ROOT / "benchmarks").glob("bench_*.py"))
        print("benchmarks:", ", ".join(names) or "(none)")
        return
    sync("bench")
    # lm-evaluation-harness's 13-gram Janitor is pure Python, but the package pulls in torch:
    # take the package alone, the way the decontamination benchmark imports it.
    run(uv(), "pip", "install", "-q", "--python", bin_("python"), "--no-deps", "lm-eval==0.4.13")
    name = extra[0] if extra[0].endswith(".py") else f"{extra[0]}.py"
    run(bin_("python"), ROOT / "benchmarks" / Path(name).name, *extra[1:])


def main(argv: list[str]) -> None:
    commands = {
        "demo": lambda: demo(argv[1:]),
        "test": lambda: test(argv[1:]),
        "sync": sync,
        "lint": lambda: (sync(), lint()),
        "core-only": core_only,
        "bench": lambda: bench(argv[1:]),
    }
    if not argv or argv[0] not in commands:
        print(f"usage: python3 dev.py {{{'|'.join(commands)}}} [args]", file=sys.stderr)
        sys.exit(2)
    commands[argv[0]]()


if __name__ == "__main__":
    main(sys.argv[1:])
