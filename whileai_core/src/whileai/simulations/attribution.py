"""Whose failure a failed rollout was: the agent's, the simulated user's, or the world's.

Simulated users cause a real share of failures in agent benchmarks, so a pass rate means
little until the failures the agent did not cause are counted apart. The evidence is
programmatic, read off the row and its situation, in this order:

- **world**: every call the agent made to one tool met a fault that withholds the answer
  (timeout, error, rate limit, malformed payload), so the agent never saw what it needed;
- **user**: the simulated user left before its patience ran out; or named a value of the
  same shape as one in the hidden state but another one (an order id that is not the
  customer's); or said a value of the goal only the grader holds (an outcome label, the
  goal's summary) that neither the prompt nor any tool result showed; or broke down into
  repetition (one phrase of up to four words said six or more times in a row, making up
  half its turn or more: ``I'm sorry, I'm sorry, ...``), which no customer writes;
- **agent**: anything else. The agent had what it needed and a user that kept to its part.

Each failed row gets ``failure_owner``: ``{"owner", "reason", "source": "rules"}``. A row
that passed, was not graded, or ended in an error has none. With
``advanced["attribution_model"]`` the rows these rules leave to the agent go to a judge as
well (``whileai.simulations.attribution_judge``), and its verdict is recorded with its source.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.schema.records import situation_key
from whileai.worlds import Situation

#: Fault kinds that withhold a tool's answer altogether (stale and partial data still answer).
WITHHOLDING = frozenset({"timeout", "error", "rate_limit", "malformed"})

#: Goal and hidden values shorter than this are ordinary words a user may say.
MIN_VALUE = 4

_TOKEN = re.compile(r"[\w@.+-]+")


def failure_owner(
    row: Mapping[str, Any], situation: Situation, patience: int
) -> dict[str, Any] | None:
    """Whose failure ``row`` was, and why; None when the row did not fail."""
    reward = row.get("reward")
    if row.get("error") or row.get("judge_status") != "ok" or reward is None or reward >= 0.5:
        return None
    steps: Sequence[Mapping[str, Any]] = row.get("steps") or []
    for reason in (
        _blocked_by_faults(steps, row.get("faults") or []),
        _user_left_early(steps, patience),
        _user_contradicted(steps, situation),
        _user_leaked(steps, situation, str(row.get("prompt") or "")),
        _user_repeated(steps),
    ):
        if reason is not None:
            owner, why = reason
            return {"owner": owner, "reason": why, "source": "rules"}
    return {
        "owner": "agent",
        "reason": "no fault withheld an answer and the simulated user kept to its situation",
        "source": "rules",
    }


def _blocked_by_faults(
    steps: Sequence[Mapping[str, Any]], faults: Sequence[Mapping[str, Any]]
) -> tuple[str, str] | None:
    calls: dict[str, int] = {}
    for step in steps:
        for call in step.get("tool_calls") or []:
            name = str(call.get("name"))
            calls[name] = calls.get(name, 0) + 1
    withheld: dict[str, list[str]] = {}
    for fault in faults:
        kind = str(fault.get("kind"))
        if kind in WITHHOLDING:
            withheld.setdefault(str(fault.get("tool")), []).append(kind)
    for tool, kinds in withheld.items():
        if calls.get(tool) and len(kinds) >= calls[tool]:
            shown = ", ".join(sorted(set(kinds)))
            return "world", (
                f"every call to {tool} ({calls[tool]}) met a fault that withholds the answer "
                f"({shown}), so the agent never saw it"
            )
    return None


def _user_turns(steps: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [s for s in steps if s.get("role") == "user"]


def _user_left_early(steps: Sequence[Mapping[str, Any]], patience: int) -> tuple[str, str] | None:
    turns = _user_turns(steps)
    for n, turn in enumerate(turns, start=1):
        if turn.get("user_status") == "gave_up" and n < patience:
            return "user", (
                f"the simulated user gave up on its follow-up {n}, before its patience of "
                f"{patience} ran out"
            )
    return None


_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[A-Za-z]")


def _shape(value: str) -> str:
    return _LETTER.sub("a", _DIGIT.sub("9", value))


def _user_contradicted(
    steps: Sequence[Mapping[str, Any]], situation: Situation
) -> tuple[str, str] | None:
    named = {
        str(name): str(value)
        for name, value in situation.hidden_state.items()
        if isinstance(value, str)
        and len(value) >= MIN_VALUE
        and _DIGIT.search(value)
        and _LETTER.search(value)
    }
    if not named:
        return None
    # each id's shape, made once: every token the user said is held against each
    ids = [(name, value, _shape(value)) for name, value in named.items()]
    known = {str(v) for v in situation.hidden_state.values()}
    for turn in _user_turns(steps):
        for found in _TOKEN.findall(str(turn.get("content") or "")):
            # a sentence's full stop or dash is not part of the id
            token = found.strip(".+-")
            if token in known:
                continue
            shape = _shape(token)
            for name, value, value_shape in ids:
                if token != value and shape == value_shape:
                    return "user", (
                        f"the simulated user named {name} {token!r}; its situation says {value!r}"
                    )
    return None


def _user_leaked(
    steps: Sequence[Mapping[str, Any]], situation: Situation, prompt: str
) -> tuple[str, str] | None:
    seen = (
        prompt.lower()
        + "\n"
        + "\n".join(str(s.get("content") or "").lower() for s in steps if s.get("role") == "tool")
    )
    goal = {
        str(k): str(v)
        for k, v in situation.goal.items()
        if isinstance(v, str) and len(v) >= MIN_VALUE and v.lower() not in seen
    }
    for turn in _user_turns(steps):
        said = str(turn.get("content") or "").lower()
        for key, value in goal.items():
            if value.lower() in said:
                return "user", (
                    f"the simulated user said the goal's {key} ({value!r}), which only the "
                    "grader holds"
                )
    return None


#: A phrase said this many times in a row is a simulator looping, not a customer insisting
#: ("no, no, no" is three; a model stuck on a phrase says it dozens of times)
LOOP_REPEATS = 6
#: the longest phrase, in words, checked for repeats
LOOP_PHRASE_WORDS = 4


def _user_repeated(steps: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    for n, turn in enumerate(_user_turns(steps), start=1):
        words = str(turn.get("content") or "").split()
        found = _loop_in([w.lower() for w in words])
        if found is not None:
            start, size, times = found
            phrase = " ".join(words[start : start + size])
            return "user", (
                f"the simulated user's follow-up {n} says {phrase!r} {times} times in a row: "
                "the simulator broke down, which no customer does"
            )
    return None


def _loop_in(words: Sequence[str]) -> tuple[int, int, int] | None:
    """Where the phrase of up to LOOP_PHRASE_WORDS words said LOOP_REPEATS or more times in a
    row that makes up half of ``words`` or more starts, its length in words, and how many
    times it is said; None when there is none."""
    for size in range(1, LOOP_PHRASE_WORDS + 1):
        start = 0
        while start + size * LOOP_REPEATS <= len(words):
            phrase = words[start : start + size]
            times = 1
            while words[start + times * size : start + (times + 1) * size] == phrase:
                times += 1
            if times >= LOOP_REPEATS and 2 * times * size >= len(words):
                return start, size, times
            # a start inside this run finds the same run, shorter
            start += (times - 1) * size if times >= LOOP_REPEATS else 1
    return None


def owner_shares(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``report()["failures"]``: how many failed rollouts each owner had, and the share with
    its 95% interval over tasks (a failure's owner is a property of its task's rollouts, so
    the rollouts of one task count together, and those of one situation's phrasings)."""
    # here, not at the top: importing the engine must not import scipy (tests/test_layers.py)
    from whileai.measure.proportions import clustered_share

    owned = [r for r in rows if isinstance(r.get("failure_owner"), Mapping)]
    if not owned:
        return None
    out: dict[str, Any] = {"failed": len(owned)}
    sources = [str(r["failure_owner"].get("source", "rules")) for r in owned]
    out["by_source"] = {s: sources.count(s) for s in sorted(set(sources))}
    for owner in ("agent", "user", "world"):
        flags = [(_unit(r), r["failure_owner"]["owner"] == owner) for r in owned]
        share, low, high = clustered_share(flags)
        out[owner] = {
            "n": sum(f for _, f in flags),
            "share": share,
            "ci95": (low, high),
        }
    return out


def _unit(row: Mapping[str, Any]) -> tuple[str, str]:
    """What a failed row's owner is counted over: its situation when its phrasing names one
    (:func:`~whileai.schema.records.situation_key`), else its task."""
    situation = situation_key(row)
    if situation is not None:
        return ("situation", situation)
    return ("task", str(row.get("scenario_id") or row.get("task_id")))
