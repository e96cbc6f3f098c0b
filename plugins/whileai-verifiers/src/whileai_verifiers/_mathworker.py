"""MathEqual's slow path: math-verify's parse and verify, in-process or as a worker process.

Run as ``python -m whileai_verifiers._mathworker``, it reads one JSON request per line on stdin
(``{"answer": ..., "references": [...]}``) and writes one JSON reply per line on stdout, after a
first ``{"ready": ...}`` line once its imports are done. math-verify's own timeouts are off here
(they use ``signal.alarm``, which only works in the main thread): the caller enforces a wall-clock
deadline and kills this process when it passes.
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from importlib.metadata import version
from typing import Any

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

MATH_VERIFY_VERSION = version("math-verify")
#: The process id of the pool that started this worker.
PARENT_ENV = "WHILEAI_WORKER_PARENT"
_PR_SET_PDEATHSIG = 1
_DECIMAL = re.compile(r"-?\d+\.\d+")
CONFIGS = {
    "any": (LatexExtractionConfig(), ExprExtractionConfig()),
    "latex": (LatexExtractionConfig(),),
}
# A completion with none of these and no word is one bare expression ("x^2+2x+1",
# "10\sqrt3 + \sqrt{4}", "[1,2)"): math-verify reads it whole inside $...$, where on its own
# it would pick out one number from it.
# Digits split by white space ("1 000") are a grouped number to math-verify's plain reading and
# a product inside $...$, so such a text is not read whole.
_DELIMITED = re.compile(r"\$|\\boxed|\\\(|\\\[|#|\*\*|\d\s+\d")
_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")

# math-verify warns once that its timeout is off; the deadline is enforced by the caller.
logging.getLogger("math_verify").setLevel(logging.ERROR)


def _parse_text(text: str, extraction: str = "any") -> list[Any]:
    return list(parse(text, extraction_config=CONFIGS[extraction], parsing_timeout=None))


def is_bare(answer: str) -> bool:
    """Whether ``answer`` is one expression and nothing else (no prose, no delimiters)."""
    return not _DELIMITED.search(answer) and not _WORD.search(_COMMAND.sub(" ", answer))


@functools.lru_cache(maxsize=4096)
def parse_reference(reference: str, extraction: str = "any") -> tuple[Any, ...]:
    """A reference parsed once per distinct string.

    A reference is the answer alone, so bare LaTeX (``\\{1,2\\}``, ``[1,2)``) is read as math:
    it is parsed inside ``$...$`` first, as written second.
    """
    parsed: list[Any] = []
    if "$" not in reference:
        parsed = _parse_text(f"${reference}$", extraction)
    if not parsed:
        parsed = _parse_text(reference, extraction)
    return tuple(parsed)


def parse_answer(answer: str, extraction: str = "any") -> list[Any]:
    """The answer a completion gives: a bare expression read whole; otherwise math-verify's
    extraction (anchors, boxed, last match)."""
    if is_bare(answer):
        whole = _parse_text(f"${answer}$", extraction)
        if whole:
            return whole
    parsed = _parse_text(answer, extraction)
    if not parsed and "$" not in answer and ("\\" in answer or "{" in answer):
        parsed = _parse_text(f"${answer}$", extraction)
    return parsed


def _shown(parsed: Any) -> str:
    """The first parsed value as a person reads it (``0.8``, not ``0.800000000000000``)."""
    if not parsed:
        return ""
    text = str(parsed[0])
    if _DECIMAL.fullmatch(text):
        text = text.rstrip("0").rstrip(".")
    return text


def compare(
    answer: str, references: list[str], strict: bool = True, **options: Any
) -> dict[str, Any]:
    """Whether ``answer`` equals any reference; what each side parsed to. ``options``:
    ``extraction`` ("any" or "latex") and math-verify's ``float_rounding``,
    ``numeric_precision`` and ``allow_set_relation_comp``."""
    extraction = options.pop("extraction", "any")
    got = parse_answer(answer, extraction)
    unparsed = []
    last_gold = ""
    for reference in references:
        gold = parse_reference(reference, extraction)
        # Only the raw string came back (math-verify's fallback): nothing was read as math.
        if all(isinstance(g, str) for g in gold):
            unparsed.append(reference)
            continue
        last_gold = _shown(gold)
        if got and verify(list(gold), got, strict=strict, timeout_seconds=None, **options):
            return {"equal": True, "answer": _shown(got), "reference": last_gold}
    return {
        "equal": False,
        "answer": _shown(got),
        "reference": last_gold,
        "unparsed_references": unparsed,
        "answer_found": bool(got),
    }


def _die_with_parent() -> None:
    """Never outlive the pool that started this worker, even mid-comparison.

    A comparison can sit in one C call (a huge integer power) holding the GIL, so no thread of
    this process can notice the parent is gone: the kernel sends SIGKILL instead
    (``PR_SET_PDEATHSIG``; it fires when the parent's spawning thread ends, and the pool starts
    workers from a thread that lives as long as it does). Where prctl is missing, a thread
    checks the parent every second.
    """
    parent = int(os.environ.get(PARENT_ENV, "0")) or os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def serve() -> None:
    _die_with_parent()
    out = sys.stdout
    # Parsing LaTeX the first time loads the grammar; do it before saying ready, so the first
    # request's deadline measures the comparison, not the warm-up.
    compare("$\\frac{1}{2}$", ["0.5"])
    out.write(json.dumps({"ready": True, "math_verify": MATH_VERIFY_VERSION}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            reply = compare(
                request["answer"],
                request["references"],
                request.get("strict", True),
                **request.get("options", {}),
            )
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    serve()
