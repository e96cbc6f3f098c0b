"""Registers the built-in verifiers through the same entry point a third party would use."""

from __future__ import annotations

from whileai import hookimpl
from whileai.hookspecs import Register
from whileai_verifiers.exact import ExactMatch
from whileai_verifiers.mathequal import MathEqual
from whileai_verifiers.numeric import Numeric


@hookimpl
def whileai_register_verifiers(register: Register) -> None:
    register(
        "ExactMatch",
        ExactMatch,
        aliases=("exact_match", "exact"),
        description="string equality after configurable normalisation",
    )
    register(
        "MathEqual",
        MathEqual,
        aliases=("math_equal", "math"),
        description="mathematical equality of final answers (math-verify, exact fast path)",
    )
    register(
        "Numeric",
        Numeric,
        aliases=("numeric",),
        description="the answer's number within relative/absolute tolerance",
    )
    from whileai_verifiers.codeexec import CodeExec

    register(
        "CodeExec",
        CodeExec,
        aliases=("code_exec", "code"),
        description="runs the program with its reference tests in a sandboxed process",
    )
