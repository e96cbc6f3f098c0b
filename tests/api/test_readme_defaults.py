"""docs/parameters.md is checked against the code: every public parameter of simulate() with
its default and aliases, and every RunKnobs field with its default and bounds. A parameter or
knob on one side and not the other fails, and so does any default that disagrees."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import attrs
import pytest

from whileai.simulations.defaults import EXPERIMENT_KNOBS, RunKnobs
from whileai.simulations.engine import simulate
from whileai.simulations.params import ALIASES, PARAMETERS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "parameters.md"


def section_table(heading: str) -> dict[str, list[str]]:
    """The first table under ``## heading``: {first cell without backticks: other cells}."""
    text = PAGE.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/parameters.md has no section {heading!r}"
    rows: dict[str, list[str]] = {}
    for line in match.group(1).splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        rows[cells[0].strip("`")] = cells[1:]
    assert rows, f"section {heading!r} has no table rows"
    return rows


def literal(cell: str) -> Any:
    assert cell.startswith("`") and cell.endswith("`"), f"default {cell!r} is not a `literal`"
    return ast.literal_eval(cell[1:-1])


def test_every_parameter_is_on_the_page_with_its_default_and_aliases() -> None:
    page = section_table("Parameters")
    code = {p.name: p for p in PARAMETERS}
    assert sorted(page) == sorted(code), "parameters on the page and in the code differ"
    for name, (default, aliases, meaning) in page.items():
        assert literal(default) == code[name].default, f"{name}: page default differs from code"
        documented = re.findall(r"`(\w+)=`", aliases)
        assert documented == list(code[name].aliases), f"{name}: aliases differ"
        assert meaning, f"{name}: no meaning on the page"


def test_the_signature_is_the_parameter_table_plus_aliases() -> None:
    signature = inspect.signature(simulate).parameters
    assert set(signature) == {p.name for p in PARAMETERS} | set(ALIASES)
    for p in PARAMETERS:
        expected = None if p.aliases else p.default
        assert signature[p.name].default == expected, f"{p.name}: signature default differs"


@pytest.mark.parametrize(
    ("heading", "in_section"),
    [("Experiment knobs", True), ("Engine internals", False)],
)
def test_every_knob_is_on_the_page_with_default_and_bounds(heading: str, in_section: bool) -> None:
    page = section_table(heading)
    fields = {
        f.name: f for f in attrs.fields(RunKnobs) if (f.name in EXPERIMENT_KNOBS) == in_section
    }
    assert sorted(page) == sorted(fields), f"{heading}: knobs on the page and in RunKnobs differ"
    defaults = RunKnobs.defaults()
    for name, (default, bounds, why) in page.items():
        value = literal(default)
        expected = defaults[name]
        if isinstance(value, tuple):
            value = list(value)
        assert value == expected, f"{name}: page default {value!r}, code {expected!r}"
        assert bounds == fields[name].metadata["bounds"], f"{name}: bounds differ"
        assert why, f"{name}: the page does not say why the default is what it is"


def test_every_knob_has_a_comment_saying_why() -> None:
    source = inspect.getsource(RunKnobs).splitlines()
    for field in attrs.fields(RunKnobs):
        index = next(
            i for i, line in enumerate(source) if line.strip().startswith(f"{field.name}:")
        )
        above = source[index - 1].strip()
        assert above.startswith("#") and not above.startswith("# --"), field.name
        lines = []
        for line in reversed(source[:index]):
            if not line.strip().startswith("#") or line.strip().startswith("# --"):
                break
            lines.insert(0, line.strip("# ").strip())
        comment = " ".join(lines)
        assert re.search(r"convention|arXiv:\d|rlhfbook\.com|measure|documents", comment, re.I), (
            f"{field.name}: the comment above it does not say where its default comes from"
        )


def test_every_branch_parameter_is_on_the_page_with_its_default() -> None:
    from whileai.simulations.engine import branch

    page = section_table("wai.branch")
    signature = inspect.signature(branch).parameters
    own = {n: p for n, p in signature.items() if n not in ("source", "at")}
    assert sorted(page) == sorted(own), "branch() parameters on the page and in the code differ"
    for name, (default, meaning) in page.items():
        assert literal(default) == own[name].default, f"{name}: page default differs from code"
        assert meaning, f"{name}: no meaning on the page"
