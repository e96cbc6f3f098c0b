"""Parsing Python source from any thread.

CPython 3.11 keeps the AST builder's recursion counter in per-interpreter state, not per
thread, so two threads parsing at once can fail with ``SystemError: AST constructor recursion
depth mismatch`` (python/cpython#106905). CodeExec parses tests and prompts from its worker
threads, so every parse goes through one lock; a parse takes microseconds next to a sandboxed
run.
"""

from __future__ import annotations

import ast
import threading

_PARSE = threading.Lock()


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, one thread at a time."""
    with _PARSE:
        return ast.parse(source)
