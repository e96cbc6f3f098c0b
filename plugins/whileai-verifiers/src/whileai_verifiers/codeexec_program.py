"""From a completion and its reference to the program and tests the sandbox runs.

Reference forms:

- a string: test code. The program is the completion; the tests run after it in the same
  module namespace, like one script (``__name__ == "__main__"``, so ``unittest.main()`` works).
- a mapping in HumanEval's shape, ``{"test": ..., "entry_point": ..., "prompt"?: ...}``: the
  tests must define ``check(candidate)``, which is called with the entry point. The program is
  - the completion, preceded by the prompt's top-level imports, when the completion on its own
    parses and defines ``entry_point`` at top level (a model that rewrote the whole function);
  - otherwise ``prompt + completion`` (the completion is the function body HumanEval expects).

A completion wrapped in a Markdown code fence (as chat models write it) is graded on the code
inside the first fence; the meta says so.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

import attrs

from whileai_verifiers.sandbox import pysource

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


@attrs.frozen
class Program:
    """What one sandbox run executes, and how it was put together."""

    source: str
    tests: str
    entry_point: str | None
    assembly: str
    # The reference's prompt, whose helper functions the tests use from the trusted side.
    prompt: str = ""


def _unfenced(completion: str) -> tuple[str, bool]:
    if "```" not in completion:
        return completion, False
    match = _FENCE.search(completion)
    return (match.group(1), True) if match else (completion, False)


def _defines(source: str, name: str) -> bool:
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return False
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.name == name
        for node in tree.body
    )


def _imports_of(prompt: str) -> str:
    try:
        tree = pysource.parse(prompt)
    except SyntaxError:
        return ""
    lines = [
        ast.get_source_segment(prompt, node) or ""
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    return "\n".join(line for line in lines if line)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    return value


def build_program(completion: Any, reference: Any, *, extract_fenced: bool = True) -> Program:
    """The program and tests for ``completion`` against ``reference`` (see the module doc)."""
    code = _text(completion, "completion")
    fenced = False
    if extract_fenced:
        code, fenced = _unfenced(code)
    if isinstance(reference, str):
        if not reference.strip():
            raise ValueError("reference is an empty string; CodeExec needs test code to run")
        return Program(code, reference, None, "completion, fenced" if fenced else "completion")
    if not isinstance(reference, Mapping):
        raise TypeError(
            "reference must be test code (a string) or a mapping with 'test' and 'entry_point' "
            f"(HumanEval's shape), got {type(reference).__name__}"
        )
    missing = [key for key in ("test", "entry_point") if not reference.get(key)]
    if missing:
        raise ValueError(
            f"reference mapping lacks {' and '.join(repr(k) for k in missing)}; "
            "CodeExec needs the test code defining check(candidate) and the entry point's name"
        )
    tests = _text(reference["test"], "reference['test']")
    entry_point = _text(reference["entry_point"], "reference['entry_point']")
    if not entry_point.isidentifier():
        raise ValueError(f"reference['entry_point'] must be a Python name, got {entry_point!r}")
    prompt = _text(reference.get("prompt") or "", "reference['prompt']")
    if _defines(code, entry_point):
        imports = _imports_of(prompt)
        source = f"{imports}\n{code}" if imports else code
        assembly = "prompt imports + completion" if imports else "completion"
    else:
        source = prompt + code
        assembly = "prompt + completion"
    if fenced:
        assembly += ", fenced"
    return Program(source, tests, entry_point, assembly, prompt)
