"""Registers the built-in judges through the same entry point a third party would use."""

from __future__ import annotations

from whileai import hookimpl
from whileai.hookspecs import Register


@hookimpl
def whileai_register_judges(register: Register) -> None:
    # by their paths: the pairwise judge's ranking imports numpy, and every process that loads
    # the registry imports this module
    register(
        "rubric",
        "whileai_judges.rubric:make_rubric_judge",
        aliases=("llm", "llm_rubric"),
        description="an LLM grades a rollout against a rubric, JSON verdict with provenance",
    )
    register(
        "pairwise",
        "whileai_judges.pairwise:make_pairwise_judge",
        aliases=("llm_pairwise",),
        description="an LLM picks the better of two replies, asked in both orders (wai.rank)",
    )
