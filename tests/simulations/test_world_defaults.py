"""A world carries the defaults of its domain: the deploy prompt, what the simulated user and
the writer are told, and which dimension and value make a situation hard. The core names
none of its own, only domain-free fallbacks for a world that gives none."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import pytest
import sim_doubles as d

import whileai as wai
from whileai import hookimpl
from whileai.testing import BackendsPlugin, ScriptedBackend
from whileai.worlds import GENERIC_SYSTEM_PROMPT, GENERIC_USER_PROMPT, GENERIC_WRITER_PROMPT


@attrs.define
class Library(d.TinyShop):
    """The tiny shop dressed as a library, with defaults of its own."""

    name: str = "library"
    system_prompt: ClassVar[str] = "You are a librarian. Check the catalogue before you answer."
    user_prompt: ClassVar[str] = (
        "You are {persona} at the library desk, asking: {request} You know: {known}. "
        "Say {done} when helped, {give_up} when not."
    )
    writer_prompt: ClassVar[str] = "You write what a reader asks the librarian."
    difficulty_dimension: ClassVar[str] = "status"
    hard_value: ClassVar[str] = "processing"


@attrs.define
class BadUserPrompt(d.TinyShop):
    name: str = "badprompt"
    user_prompt: ClassVar[str] = "You are {persona}; your order number is {order_id}."


class Worlds:
    @hookimpl
    def whileai_register_worlds(self, register: Any) -> None:
        register("library", Library)
        register("badprompt", BadUserPrompt)


def scripts() -> tuple[ScriptedBackend, ScriptedBackend, ScriptedBackend]:
    agent = ScriptedBackend("agent:plain", lambda messages, tools: "Your order is shipped.")
    user = ScriptedBackend("user:plain", lambda messages, tools: "Thanks. [DONE]")

    def write(messages: Sequence[Mapping[str, Any]], tools: Any) -> str:
        return "Where is order A1234, please?"

    writer = ScriptedBackend("writer:plain", write)
    return agent, user, writer


def run(world: str, **given: Any) -> tuple[Any, ScriptedBackend, ScriptedBackend, ScriptedBackend]:
    agent, user, writer = scripts()
    doubles = BackendsPlugin(
        agent=lambda argument=None, **_: agent,
        user=lambda argument=None, **_: user,
        writer=lambda argument=None, **_: writer,
    )
    registry = d.registry(Worlds(), doubles)
    params: dict[str, Any] = {
        "agent_model": "agent",
        "user_model": "user",
        "simulator": "writer",
        "unique": 4,
        "repeats": 1,
        "max_turns": 2,
        "fault_rate": 0.0,
        "hard_share": 0.5,
        **given,
    }
    params["advanced"] = {"world": world, **given.get("advanced", {})}
    return wai.simulate(registry=registry, **params), agent, user, writer


def test_a_run_takes_the_worlds_prompts_and_hard_end_when_the_caller_gives_none() -> None:
    data, agent, user, writer = run("library")
    sha = data.rows[0]["lineage"]["system_prompt_sha"]
    assert data.system_prompts == {sha: Library.system_prompt}
    assert agent.calls[0][0] == {"role": "system", "content": Library.system_prompt}
    assert writer.calls[0][0] == {"role": "system", "content": Library.writer_prompt}
    told = user.calls[0][0]["content"]
    assert told.startswith("You are a hurried customer at the library desk, asking: ")
    assert told.endswith("Say [DONE] when helped, [GIVE UP] when not.")
    knobs = data.report().knobs
    assert (knobs["difficulty_dimension"], knobs["hard_value"]) == ("status", "processing")
    statuses = [r["scenario_dimensions"]["status"] for r in data.rows]
    assert statuses.count("processing") == 2  # hard_share=0.5 of 4 acts on the world's "status"


def test_what_the_caller_gives_wins_over_the_world() -> None:
    data, agent, _, _ = run(
        "library",
        system_prompt="Be brief.",
        advanced={"difficulty_dimension": "difficulty", "hard_value": "hard"},
    )
    assert agent.calls[0][0]["content"] == "Be brief."
    assert [r["scenario_dimensions"]["difficulty"] for r in data.rows].count("hard") == 2
    assert data.report().knobs["difficulty_dimension"] == "difficulty"


def test_a_world_without_defaults_gets_domain_free_ones() -> None:
    data, agent, user, writer = run("tinyshop")
    assert agent.calls[0][0]["content"] == GENERIC_SYSTEM_PROMPT
    assert writer.calls[0][0]["content"] == GENERIC_WRITER_PROMPT
    assert user.calls[0][0]["content"].startswith(GENERIC_USER_PROMPT.split("{persona}")[0])
    for text in (GENERIC_SYSTEM_PROMPT, GENERIC_USER_PROMPT, GENERIC_WRITER_PROMPT):
        assert "customer" not in text and "order" not in text and "support" not in text
    assert data.report().knobs["difficulty_dimension"] == "difficulty"


def test_a_world_whose_user_prompt_names_an_unknown_field_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"world 'badprompt': .*user_prompt may use only"):
        run("badprompt")


def test_world_defaults_reads_what_a_world_carries() -> None:
    defaults = wai.world_defaults(Library())
    assert defaults.system_prompt == Library.system_prompt
    assert defaults.hard_value == "processing"
    assert wai.world_defaults(d.TinyShop()) == wai.WorldDefaults()
