"""A small stateful MCP server, written with the official SDK: a support desk's ticket store.

Run as ``python ticket_server.py`` it serves over stdio; ``python ticket_server.py --http PORT``
serves streamable HTTP on 127.0.0.1. Its state lives in the process, so the MCP world starts
a fresh process per episode over stdio; over HTTP it offers ``reset_store`` for the same end.
``dump_state`` and ``ticket_status`` are what a run reads as final state and checks against.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("ticket-desk", version="1.2.0")

SEEDED = {
    "T-100": {"customer": "ana@example.com", "subject": "printer jams", "status": "open"},
    "T-101": {"customer": "bo@example.com", "subject": "vpn drops", "status": "open"},
    "T-102": {"customer": "ana@example.com", "subject": "refund for seat", "status": "pending"},
}
tickets: dict[str, dict[str, Any]] = {}
notes: dict[str, list[str]] = {}


def _reset() -> None:
    tickets.clear()
    tickets.update({k: dict(v) for k, v in SEEDED.items()})
    notes.clear()


_reset()


@server.tool()
def find_tickets(customer: str) -> dict[str, Any]:
    """The tickets a customer (by email) has open or pending."""
    found = [{"ticket_id": k, **v} for k, v in sorted(tickets.items()) if v["customer"] == customer]
    return {"tickets": found}


@server.tool()
def get_ticket(ticket_id: str) -> dict[str, Any]:
    """One ticket with its notes."""
    if ticket_id not in tickets:
        raise ToolError(f"no ticket {ticket_id}")
    return {"ticket_id": ticket_id, **tickets[ticket_id], "notes": notes.get(ticket_id, [])}


@server.tool()
def add_note(ticket_id: str, text: str) -> dict[str, Any]:
    """Add a note to a ticket."""
    if ticket_id not in tickets:
        raise ToolError(f"no ticket {ticket_id}")
    notes.setdefault(ticket_id, []).append(text)
    return {"ticket_id": ticket_id, "notes": len(notes[ticket_id])}


@server.tool()
def close_ticket(ticket_id: str, resolution: str) -> dict[str, Any]:
    """Close a ticket with a resolution."""
    if ticket_id not in tickets:
        raise ToolError(f"no ticket {ticket_id}")
    if os.environ.get("TICKET_SERVER_DIE_ON_CLOSE"):
        os._exit(3)  # the test's way of killing the server mid-episode
    tickets[ticket_id]["status"] = "closed"
    tickets[ticket_id]["resolution"] = resolution
    return {"ticket_id": ticket_id, "status": "closed"}


@server.tool()
def ticket_status(ticket_id: str) -> dict[str, Any]:
    """A ticket's status (what a check reads)."""
    return {"status": tickets[ticket_id]["status"]} if ticket_id in tickets else {"status": None}


@server.tool()
def dump_state() -> dict[str, Any]:
    """The whole store, for the run's world_state (after TICKET_SERVER_HOLD_S seconds, when
    set: a test's episodes then outlast the jitter of their servers' starts)."""
    time.sleep(float(os.environ.get("TICKET_SERVER_HOLD_S") or 0))
    return {"tickets": tickets, "notes": notes}


@server.tool()
def reset_store() -> dict[str, Any]:
    """Put the store back as it started (for servers shared between episodes)."""
    _reset()
    return {"reset": True}


def _count_live_servers(directory: str) -> None:
    """With TICKET_SERVER_DIR set, note this process there and how many noted servers are
    alive as it starts, so a test can read how many ran at once."""
    import atexit
    from pathlib import Path

    here = Path(directory)
    mine = here / f"{os.getpid()}.pid"
    mine.write_text(str(os.getpid()))
    atexit.register(mine.unlink, missing_ok=True)
    live = 0
    for noted in here.glob("*.pid"):
        try:
            os.kill(int(noted.stem), 0)
        except (ProcessLookupError, ValueError):
            continue
        live += 1
    with open(here / "seen", "a", encoding="utf-8") as seen:
        seen.write(f"{live}\n")


if __name__ == "__main__":
    if os.environ.get("TICKET_SERVER_DIR"):
        _count_live_servers(os.environ["TICKET_SERVER_DIR"])
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
