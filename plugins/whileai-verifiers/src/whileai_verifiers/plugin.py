"""Registers the built-in verifiers through the same entry point a third party would use."""

from __future__ import annotations

from whileai import hookimpl
from whileai.hookspecs import Register

from whileai_verifiers.exact import ExactMatch


@hookimpl
def whileai_register_verifiers(register: Register) -> None:
    register(
        "ExactMatch",
        ExactMatch,
        aliases=("exact_match", "exact"),
        description="string equality after configurable normalisation",
    )
