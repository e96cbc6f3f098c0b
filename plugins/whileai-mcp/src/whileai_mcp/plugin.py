"""Registers the MCP world through the same entry point a third party would use."""

from __future__ import annotations

from whileai import hookimpl
from whileai.hookspecs import Register
from whileai_mcp.world import make_mcp


@hookimpl
def whileai_register_worlds(register: Register) -> None:
    register(
        "mcp",
        make_mcp,
        description="any MCP server's tools (mcp:<command> over stdio, or mcp:<url>), "
        "with faults injected between the agent and the server",
    )
