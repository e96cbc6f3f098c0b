"""Where an MCP server is: a command to start over stdio, or a streamable-HTTP URL."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping

import attrs


@attrs.frozen
class Target:
    """A server to start (``command`` and ``args``) or to reach (``url``)."""

    spec: str
    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    #: extra environment variables for a started server
    env: Mapping[str, str] = attrs.field(factory=dict)
    cwd: str | None = None

    @property
    def starts_a_process(self) -> bool:
        return self.command is not None


def parse_target(spec: str, env: Mapping[str, str] | None = None, cwd: str | None = None) -> Target:
    """``"python server.py --flag"`` (split as a shell would, never run through one) or
    ``"http://127.0.0.1:8000/mcp"``. A ValueError names what is wrong with ``spec``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(
            "the MCP world needs a server: 'mcp:<command>' (started over stdio) or "
            f"'mcp:http://127.0.0.1:<port>/mcp' (streamable HTTP), got {spec!r}"
        )
    spec = spec.strip()
    if spec.startswith(("http://", "https://")):
        if env:
            raise ValueError(f"MCP server {spec!r} is a URL: env= applies only to a started server")
        return Target(spec, url=spec)
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        raise ValueError(f"MCP server command {spec!r} does not parse: {exc}") from None
    command, *args = words
    if shutil.which(command) is None and not os.path.isfile(command):
        raise ValueError(f"MCP server command {spec!r}: {command!r} is neither on PATH nor a file")
    return Target(spec, command=command, args=tuple(args), env=dict(env or {}), cwd=cwd)
