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
_CONFIG = (LatexExtractionConfig(), ExprExtractionConfig())

# math-verify warns once that its timeout is off; the deadline is enforced by the caller.
logging.getLogger("math_verify").setLevel(logging.ERROR)


def _parse_text(text: str) -> list[Any]:
    return list(parse(text, extraction_config=_CONFIG, parsing_timeout=None))


@functools.lru_cache(maxsize=4096)
def parse_reference(reference: str) -> tuple[Any, ...]:
    """A reference parsed once per distinct string.

    A reference is the answer alone, so bare LaTeX (``\\{1,2\\}``, ``[1,2)``) is read as math:
    it is parsed inside ``$...$`` first, as written second.
    """
    parsed: list[Any] = []
    if "$" not in reference:
        parsed = _parse_text(f"${reference}$")
    if not parsed:
        parsed = _parse_text(reference)
    return tuple(parsed)


def parse_answer(answer: str) -> list[Any]:
    """The answer a completion gives (math-verify's extraction: anchors, boxed, last match)."""
    parsed = _parse_text(answer)
    if not parsed and "$" not in answer and ("\\" in answer or "{" in answer):
        parsed = _parse_text(f"${answer}$")
    return parsed


def _shown(parsed: Any) -> str:
    """The first parsed value as a person reads it (``0.8``, not ``0.800000000000000``)."""
    if not parsed:
        return ""
    text = str(parsed[0])
    if _DECIMAL.fullmatch(text):
        text = text.rstrip("0").rstrip(".")
    return text


def compare(answer: str, references: list[str], strict: bool = True) -> dict[str, Any]:
    """Whether ``answer`` equals any reference; what each side parsed to."""
    got = parse_answer(answer)
    unparsed = []
    last_gold = ""
    for reference in references:
        gold = parse_reference(reference)
        # Only the raw string came back (math-verify's fallback): nothing was read as math.
        if all(isinstance(g, str) for g in gold):
            unparsed.append(reference)
            continue
        last_gold = _shown(gold)
        if got and verify(list(gold), got, strict=strict, timeout_seconds=None):
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
            reply = compare(request["answer"], request["references"], request.get("strict", True))
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    serve()
