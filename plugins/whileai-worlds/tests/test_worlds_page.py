"""docs/worlds.md runs as written: its code blocks, in order, in one namespace, from the
repository's root (the MCP example starts the ticket server shipped in whileai-mcp's tests)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "worlds.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)


def test_the_page_shows_every_world_and_how_to_write_one() -> None:
    text = "\n".join(BLOCKS)
    for needed in ("BankWorld()", "whileai_register_worlds", '"mcp:', "wai.simulate("):
        assert needed in text, needed


def test_the_examples_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("whileai_mcp")
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {}
    for block in BLOCKS:
        exec(compile(block, str(PAGE), "exec"), namespace)
    out = capsys.readouterr().out
    assert "find_customer" in out and "pass@1" in out
    loans = namespace["loans"].rows()  # type: ignore[attr-defined]
    assert [r["reward"] for r in loans] == [1.0] * 4
    served = namespace["served"].trajectories  # type: ignore[attr-defined]
    assert [r["reward"] for r in served] == [1.0, 1.0]
    bank = namespace["data"].rows()  # type: ignore[attr-defined]
    assert len(bank) == 12 and {r["world"] for r in bank} == {"bank"}
