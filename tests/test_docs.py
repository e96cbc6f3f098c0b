"""A hook cannot land without a test named after it and its signature in docs/plugins.md."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from whileai import hookspecs

ROOT = Path(__file__).resolve().parents[1]
HOOKS = sorted(name for name in vars(hookspecs) if name.startswith("whileai_"))


def _signature(name: str) -> str:
    sig = inspect.signature(getattr(hookspecs, name))
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"{name}({params}) -> {sig.return_annotation}"


def test_there_are_hooks_to_check() -> None:
    assert len(HOOKS) == 10


@pytest.mark.parametrize("hook", HOOKS)
def test_plugin_hooks_are_documented(hook: str) -> None:
    docs = (ROOT / "docs" / "plugins.md").read_text()
    assert f"`{_signature(hook)}`" in docs, f"docs/plugins.md lacks `{_signature(hook)}`"


@pytest.mark.parametrize("hook", HOOKS)
def test_plugin_hooks_have_tests(hook: str) -> None:
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    assert re.search(rf"^def test_{hook}\(", sources, re.MULTILINE), f"no test_{hook} in tests/"


@pytest.mark.parametrize("hook", HOOKS)
def test_plugin_hooks_are_fully_annotated(hook: str) -> None:
    sig = inspect.signature(getattr(hookspecs, hook))
    assert sig.return_annotation is not inspect.Signature.empty
    assert all(p.annotation is not inspect.Parameter.empty for p in sig.parameters.values())
    assert (getattr(hookspecs, hook).__doc__ or "").strip(), f"{hook} has no docstring"
