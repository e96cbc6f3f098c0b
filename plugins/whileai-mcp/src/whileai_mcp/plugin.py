"""Registers the MCP world through the same entry point a third party would use."""

from __future__ import annotations

from whileai import hookimpl
from whileai.hookspecs import Register


@hookimpl
def whileai_register_worlds(register: Register) -> None:
    # by its path: the mcp SDK takes over half a second to import, and every process that
    # loads the registry imports this module
    register(
        "mcp",
        "whileai_mcp.world:make_mcp",
        description="any MCP server's tools (mcp:<command> over stdio, or mcp:<url>), "
        "with faults injected between the agent and the server",
    )
