"""A Python check a seed names (``ticket_checks:only_the_goal_ticket_changed``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ticket_server import SEEDED

from whileai.worlds import Situation


def only_the_goal_ticket_changed(
    *,
    final_text: str,
    steps: Sequence[Mapping[str, Any]],
    state: Mapping[str, Any],
    situation: Situation,
) -> bool:
    """Every ticket but the goal's is as the store started."""
    goal = situation.goal["ticket"]
    tickets = state["tickets"]
    return all(tickets[k]["status"] == v["status"] for k, v in SEEDED.items() if k != goal)
