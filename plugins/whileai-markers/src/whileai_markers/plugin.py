"""Registers the built-in markers through the same entry point a third party would use."""

from __future__ import annotations

from whileai import hookimpl
from whileai.hookspecs import Register
from whileai_markers.markers import MARKERS

DESCRIPTIONS: dict[str, str] = {
    "refusal": "the final answer refuses the request (documented pattern list)",
    "tool_errors": "tool results that came back as an error or with a fault",
    "faults_met": "tool results the world's fault plan shaped",
    "length": "characters in the final answer",
    "turns": "agent turns",
    "truncated": "a turn was cut at the token cap",
    "gave_up": "the simulated user gave up (step user_status)",
}


@hookimpl
def whileai_register_markers(register: Register) -> None:
    for name, cls in MARKERS.items():
        register(name, cls, description=DESCRIPTIONS[name])
