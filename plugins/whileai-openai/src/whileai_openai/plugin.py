"""Registers this package's backends through the whileai entry point."""

from __future__ import annotations

from whileai import hookimpl
from whileai.hookspecs import Register
from whileai_openai.specs import openai_backend, url_backend, vllm_backend


@hookimpl
def whileai_register_backends(register: Register) -> None:
    register(
        "openai",
        openai_backend,
        description="OpenAI: openai:<model> (OPENAI_API_KEY, OPENAI_BASE_URL)",
    )
    register(
        "vllm",
        vllm_backend,
        description="an OpenAI-compatible server: vllm:<model>@<url> (WHILEAI_API_KEY)",
    )
    register(
        "url",
        url_backend,
        description="a bare http(s) URL of an OpenAI-compatible server (WHILEAI_API_KEY)",
    )
