"""Registers this package's backends through the whileai entry point."""

from __future__ import annotations

from whileai import hookimpl
from whileai.hookspecs import Register


@hookimpl
def whileai_register_backends(register: Register) -> None:
    # by their paths: the openai client and its transports take a third of a second to import,
    # and every process that loads the registry imports this module
    register(
        "openai",
        "whileai_openai.specs:openai_backend",
        description="OpenAI: openai:<model> (OPENAI_API_KEY, OPENAI_BASE_URL)",
    )
    register(
        "vllm",
        "whileai_openai.specs:vllm_backend",
        description="an OpenAI-compatible server: vllm:<model>@<url> (WHILEAI_API_KEY)",
    )
    register(
        "url",
        "whileai_openai.specs:url_backend",
        description="a bare http(s) URL of an OpenAI-compatible server (WHILEAI_API_KEY)",
    )
