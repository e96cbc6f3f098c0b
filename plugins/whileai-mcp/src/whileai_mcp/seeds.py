"""Seed situations for an MCP world, from the user's file, and the checks that grade them.

A seeds file is JSON Lines (one situation per line) or a JSON list. Each situation::

    {"id": "close-printer-ticket",
     "prompt": "My printer ticket can be closed, the jam is fixed.",
     "phrasings": ["Please close my printer ticket; it works now."],
     "persona": "ana@example.com, a busy office manager", "patience": 2,
     "hidden_state": {"email": "ana@example.com"},
     "goal": {"ticket": "T-100", "status": "closed"},
     "checks": [{"tool": "ticket_status", "arguments": {"ticket_id": "T-100"},
                 "expect": {"status": "closed"}},
                {"python": "my_checks:no_other_ticket_touched"}],
     "dimensions": {"difficulty": "easy"},
     "reference": "...", "principle": "...", "rubric": "..."}

Only ``prompt`` is required. A tool check calls a tool of the server once the conversation is
over and passes when every key of ``expect`` is in the answer with that value (nested records
compared the same way). A Python check names ``module:function``, called as
``function(final_text=, steps=, state=, situation=)`` and returning a ``Verdict``, a bool or a
reward in [0, 1]. Checks are the answer key, so they travel in the situation's ``goal``
(privileged: they reach the grader and never an exported row).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from whileai.schema.wording import named_with_close
from whileai.scoring import Verdict
from whileai.worlds import Situation

_FIELDS = frozenset(
    {
        "id",
        "prompt",
        "phrasings",
        "persona",
        "patience",
        "hidden_state",
        "goal",
        "checks",
        "dimensions",
        "reference",
        "principle",
        "rubric",
    }
)


@attrs.frozen
class ToolCheck:
    """Passes when ``tool(arguments)`` answers with everything in ``expect``."""

    tool: str
    arguments: Mapping[str, Any]
    expect: Any

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.tool}({args})"


@attrs.frozen
class PythonCheck:
    """The user's own function, by ``module:function``."""

    name: str
    function: Callable[..., Any] = attrs.field(eq=False, repr=False)


Check = ToolCheck | PythonCheck


def parse_check(raw: Any, where: str, *, allow_python: bool = True) -> dict[str, Any]:
    """A check as plain data (it rides in the situation's goal), validated; ValueError names
    ``where`` and what is wrong."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: a check is an object, got {raw!r}")
    if "tool" in raw:
        unknown = set(raw) - {"tool", "arguments", "expect"}
        if unknown:
            raise ValueError(
                f"{where}: a tool check takes tool, arguments, expect; not {sorted(unknown)}"
            )
        if not isinstance(raw["tool"], str) or not raw["tool"]:
            raise ValueError(f"{where}: the check's tool must be a tool name, got {raw['tool']!r}")
        arguments = raw.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise ValueError(f"{where}: the check's arguments must be an object, got {arguments!r}")
        if "expect" not in raw:
            raise ValueError(f"{where}: tool check {raw['tool']!r} says nothing to expect")
        return {"tool": raw["tool"], "arguments": dict(arguments), "expect": raw["expect"]}
    if "python" in raw:
        if not allow_python:
            raise ValueError(
                f"{where}: a written situation may check with the server's tools only, "
                "not name Python to run"
            )
        if set(raw) != {"python"}:
            raise ValueError(f"{where}: a python check takes only 'python': 'module:function'")
        resolve_python(raw["python"], where)
        return {"python": raw["python"]}
    raise ValueError(f"{where}: a check names a 'tool' or 'python', got {dict(raw)!r}")


def resolve_python(name: Any, where: str) -> Callable[..., Any]:
    """The function ``module:function`` names, or a ValueError saying why not."""
    if not isinstance(name, str) or name.count(":") != 1:
        raise ValueError(f"{where}: a python check is 'module:function', got {name!r}")
    module_name, attr = name.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"{where}: python check {name!r}: cannot import {module_name!r}: {exc}"
        ) from None
    function = getattr(module, attr, None)
    if not callable(function):
        raise ValueError(f"{where}: python check {name!r}: {module_name} has no function {attr!r}")
    return function  # type: ignore[no-any-return]


def checks_of(goal: Mapping[str, Any]) -> list[Check]:
    """The checks a situation's goal carries, ready to run."""
    out: list[Check] = []
    for raw in goal.get("checks", ()):
        if "tool" in raw:
            out.append(ToolCheck(raw["tool"], dict(raw.get("arguments", {})), raw["expect"]))
        else:
            out.append(PythonCheck(raw["python"], resolve_python(raw["python"], "check")))
    return out


def contains(answer: Any, expect: Any) -> bool:
    """``expect`` is in ``answer``: every key of an expected record there with a matching
    value, a list matched item by item, anything else equal."""
    if isinstance(expect, Mapping):
        return isinstance(answer, Mapping) and all(
            k in answer and contains(answer[k], v) for k, v in expect.items()
        )
    if isinstance(expect, list):
        return (
            isinstance(answer, list)
            and len(answer) == len(expect)
            and all(contains(a, e) for a, e in zip(answer, expect, strict=True))
        )
    return bool(answer == expect and type(answer) is type(expect))


def python_verdict(check: PythonCheck, **context: Any) -> Verdict:
    """Run the user's function; what it returns as a Verdict, a bool or a reward."""
    try:
        value = check.function(**context)
    except Exception as exc:
        return Verdict.error(f"python check {check.name} raised {type(exc).__name__}: {exc}")
    if isinstance(value, Verdict):
        return value
    if isinstance(value, bool):
        return Verdict(1.0 if value else 0.0, f"python check {check.name}: {value}")
    if isinstance(value, int | float) and 0 <= value <= 1:
        return Verdict(float(value), f"python check {check.name}: {value}")
    return Verdict.error(
        f"python check {check.name} returned {value!r}; return a Verdict, a bool or a reward in [0, 1]"
    )


def _situation(raw: Any, where: str, index: int) -> tuple[Situation, tuple[str, ...]]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: a seed situation is an object, got {type(raw).__name__}")
    unknown = set(raw) - _FIELDS
    if unknown:
        raise ValueError(
            f"{where}: unknown fields {named_with_close(sorted(unknown), sorted(_FIELDS))}; "
            f"a seed has {sorted(_FIELDS)}"
        )
    prompt = raw.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"{where}: 'prompt' (the user's first message) is required text")
    phrasings = raw.get("phrasings", [])
    if not isinstance(phrasings, list) or not all(
        isinstance(p, str) and p.strip() for p in phrasings
    ):
        raise ValueError(f"{where}: 'phrasings' must be a list of texts")
    for name in ("hidden_state", "goal", "dimensions"):
        if not isinstance(raw.get(name, {}), Mapping):
            raise ValueError(f"{where}: {name!r} must be an object")
    patience = raw.get("patience", 3)
    if isinstance(patience, bool) or not isinstance(patience, int) or not 0 <= patience <= 50:
        raise ValueError(f"{where}: 'patience' must be a whole number in [0, 50], got {patience!r}")
    checks = raw.get("checks", [])
    if not isinstance(checks, list):
        raise ValueError(f"{where}: 'checks' must be a list")
    goal = dict(raw.get("goal", {}))
    goal["checks"] = [parse_check(c, f"{where} check {i}") for i, c in enumerate(checks)]
    situation_id = raw.get("id", f"seed-{index}")
    if not isinstance(situation_id, str) or not situation_id:
        raise ValueError(f"{where}: 'id' must be text")
    situation = Situation(
        situation_id=situation_id,
        prompt=prompt,
        persona=raw.get("persona", "a user"),
        patience=patience,
        dimensions={"situation": situation_id, **dict(raw.get("dimensions", {}))},
        hidden_state=dict(raw.get("hidden_state", {})),
        goal=goal,
        reference=raw.get("reference"),
        writer_model="seed",
        principle=raw.get("principle"),
        rubric=raw.get("rubric"),
    )
    return situation, (prompt, *phrasings)


@attrs.frozen
class Seeds:
    """The user's situations, each with its phrasings (the first is its prompt)."""

    situations: tuple[Situation, ...]
    phrasings: Mapping[str, tuple[str, ...]]

    @classmethod
    def load(cls, source: str | Path | Sequence[Mapping[str, Any]]) -> Seeds:
        """From a JSONL or JSON file, or a list of situation objects."""
        if isinstance(source, str | Path):
            path = Path(source)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(
                    f"MCP world situations file {str(path)!r}: {exc.strerror}"
                ) from None
            entries = _entries(text, str(path))
        else:
            entries = [(f"situations[{i}]", raw) for i, raw in enumerate(source)]
        if not entries:
            raise ValueError("the MCP world's situations are empty: give at least one")
        situations: list[Situation] = []
        phrasings: dict[str, tuple[str, ...]] = {}
        for index, (where, raw) in enumerate(entries):
            situation, worded = _situation(raw, where, index)
            if situation.situation_id in phrasings:
                raise ValueError(f"{where}: situation id {situation.situation_id!r} is used twice")
            situations.append(situation)
            phrasings[situation.situation_id] = worded
        return cls(tuple(situations), phrasings)

    def by_id(self, situation_id: str) -> Situation:
        for situation in self.situations:
            if situation.situation_id == situation_id:
                return situation
        raise ValueError(
            f"no seed situation {situation_id!r}; seeds are {[s.situation_id for s in self.situations]}"
        )


def _entries(text: str, name: str) -> list[tuple[str, Any]]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{name}: not valid JSON: {exc}") from None
        return [(f"{name} item {i}", raw) for i, raw in enumerate(items)]
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append((f"{name} line {number}", json.loads(line)))
        except ValueError as exc:
            raise ValueError(f"{name} line {number}: not valid JSON: {exc}") from None
    return entries
