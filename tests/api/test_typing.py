"""A user's script type-checks against the installed package (it ships ``py.typed``): the
facade's names are the real functions and classes to mypy, not modules or ``Any``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

SCRIPT = """\
import whileai as wai
import whileai.build_rows
import whileai.registry

table = wai.plugins()
reveal_type(table)
rows = wai.rows(["2+2?"], ["4"], [1.0])
reveal_type(rows)
reveal_type(wai.pass_at(rows).pass_at_1)
reveal_type(wai.simulate)
"""


def test_mypy_passes_on_a_script_calling_wai_plugins_and_wai_rows(tmp_path: Path) -> None:
    script = tmp_path / "user.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    revealed = [
        line.split("Revealed type is ", 1)[1]
        for line in out.stdout.splitlines()
        if "Revealed type" in line
    ]
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert errors == []
    assert revealed[0] == '"whileai.registry.PluginTable"'
    assert revealed[1] == '"list[dict[str, Any]]"'
    assert "Any" not in revealed[2]
    assert revealed[3].startswith('"def (system_prompt:')


def test_the_type_checking_block_names_every_public_name() -> None:
    """The facade's names for type checkers and its lazy table stay one list."""
    import ast

    import whileai

    tree = ast.parse(Path(whileai.__file__).read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    )
    typed = {
        alias.asname or alias.name
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == set(whileai._EXPORTS)
