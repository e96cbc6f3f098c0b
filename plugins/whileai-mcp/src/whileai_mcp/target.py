"""Where an MCP server is: a command to start over stdio, a streamable-HTTP URL, or a server
named in an MCP client's config file (the ``{"mcpServers": {name: {...}}}`` JSON that MCP
clients share: ``command``, ``args``, ``env``, ``cwd``, or ``url``)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

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


def named_target(config: str | os.PathLike[str], name: str) -> Target:
    """The server ``name`` in the MCP config file ``config``; a ValueError names the file and
    what is missing or wrong."""
    where = str(config)
    try:
        data = json.loads(Path(config).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"MCP config {where!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise ValueError(f"MCP config {where!r} is not valid JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ValueError(f"MCP config {where!r} has no 'mcpServers' object")
    if name not in servers:
        raise ValueError(f"MCP config {where!r} names no server {name!r}; it has {sorted(servers)}")
    entry = servers[name]
    if not isinstance(entry, dict):
        raise ValueError(f"MCP config {where!r}: server {name!r} is not an object")
    if "url" in entry:
        return parse_target(str(entry["url"]))
    if "command" not in entry:
        raise ValueError(f"MCP config {where!r}: server {name!r} has neither 'command' nor 'url'")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError(f"MCP config {where!r}: server {name!r}'s 'args' must be a list of text")
    env = entry.get("env", {})
    if not isinstance(env, dict):
        raise ValueError(f"MCP config {where!r}: server {name!r}'s 'env' must be an object")
    command = str(entry["command"])
    if shutil.which(command) is None and not os.path.isfile(command):
        raise ValueError(
            f"MCP config {where!r}: server {name!r}'s command {command!r} is neither on PATH "
            "nor a file"
        )
    spec = " ".join([name, "=", command, *args])
    cwd = entry.get("cwd")
    return Target(
        spec,
        command=command,
        args=tuple(args),
        env={str(k): str(v) for k, v in env.items()},
        cwd=str(cwd) if cwd else None,
    )
