"""MathEqual: is the completion's final answer mathematically equal to the reference?

Two paths:

- Fast path, in the calling thread: a reference that is a plainly written number (``18``,
  ``1,000``, ``#### 18``, ``$18.00``) against an answer written the GSM8K way (``#### 18``,
  "The answer is 18.", ``\\boxed{18}``, or prose whose last number is the answer) is compared as
  exact decimals, so ``18``, ``18.0`` and ``$18.00`` are equal and ``18.01`` is not. Equal
  strings are equal without parsing. Parsed references are cached (an LRU keyed on the
  reference string), since k completions of a prompt share one reference.
- Everything else (LaTeX, ``\\frac``, boxed expressions, percentages, sets, intervals, units,
  algebra) goes to ``math-verify`` (``parse`` then ``verify``; its extraction decides which part
  of the completion is the answer). Its own timeout is signal-based and works only in the main
  thread, so it is switched off and MathEqual enforces ``timeout`` itself: the slow path runs in
  worker processes (at most ``workers`` of them, started on first need), and a worker that
  misses the deadline is killed and replaced. This works from any thread and any process.
  ``timeout=None`` runs math-verify in the calling thread with no deadline.

A timed-out or crashed comparison is not a 0: the verdict has ``status="error"`` and a reason
such as ``"timeout after 5.0s"`` (``on_timeout="fail"`` scores it 0.0 instead, with the same
reason). A reference math-verify cannot parse is an error too; an answer it cannot find scores
0.0 ("no answer found"). Reasons name the answer first, then the reference:
``"18 == 18"``, ``"17 != 18"``, ``"parsed 0.8 vs 3/4: not equal"``.
"""

from __future__ import annotations

import functools
import os
import re
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from fractions import Fraction
from importlib.metadata import version
from typing import Any

from whileai.scoring import Verdict
from whileai_verifiers import __version__
from whileai_verifiers import _rationals as rationals
from whileai_verifiers._numbers import decimal_places, plain_answer, plain_decimal, shown
from whileai_verifiers._pairs import batch_pairs
from whileai_verifiers._workers import WorkerCrashed, WorkerPool, WorkerTimeout

_WORKER_MODULE = "whileai_verifiers._mathworker"


@functools.lru_cache(maxsize=65536)
def _reference_number(reference: str) -> Decimal | None:
    return plain_decimal(reference)


# A comma, an apostrophe, white space between digits or a second decimal point: math-verify may
# read such a text as a set, a decimal, a product or a grouped number depending on its context,
# so equal text proves nothing.
_AMBIGUOUS = re.compile(r"[,'’]|\d\s+\d|\d\.\d*\.")
# LaTeX markup: two identical LaTeX expressions are the same expression wherever they stand.
_LATEX = re.compile(r"\\[A-Za-z]+|[{}^_]")


def _same_text(a: str, b: str) -> bool:
    """Equal as written, up to whitespace, enclosing ``$`` and a final full stop, for a LaTeX
    expression or a number the fast path reads, whose reading does not depend on its context."""
    if _AMBIGUOUS.search(b) or not (_LATEX.search(b) or _reference_number(b) is not None):
        return False

    def norm(text: str) -> str:
        text = " ".join(text.split()).strip("$ ")
        return text[:-1] if text.endswith(".") else text

    return norm(a) == norm(b)


def default_workers() -> int:
    """Slow-path workers: one per CPU this process may use, at most 4 (each holds SymPy)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


class MathEqual:
    """1.0 when the completion's answer equals the reference (or any of a list of them)."""

    name = "MathEqual"
    version = __version__

    def __init__(
        self,
        *,
        timeout: float | None = 5.0,
        workers: int | None = None,
        on_timeout: str = "error",
        strict: bool = True,
        fast_path: bool = True,
        float_rounding: int = 6,
        numeric_precision: int = 15,
        allow_set_relation_comp: bool = False,
        extraction: str = "any",
    ) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError(
                f"timeout must be a positive number of seconds or None, got {timeout!r}"
            )
        if on_timeout not in ("error", "fail"):
            raise ValueError(f"on_timeout must be 'error' or 'fail', got {on_timeout!r}")
        for name, value in (
            ("float_rounding", float_rounding),
            ("numeric_precision", numeric_precision),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
        if extraction not in ("any", "latex"):
            raise ValueError(f"extraction must be 'any' or 'latex', got {extraction!r}")
        workers = default_workers() if workers is None else workers
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.timeout = float(timeout) if timeout is not None else None
        self.workers = workers
        self.on_timeout = on_timeout
        self.strict = strict
        # The fast path reads plain numbers the way math-verify's plain-text extraction does;
        # with LaTeX-only extraction that reading is not math-verify's, so it stays off.
        self.fast_path = fast_path and extraction == "any"
        self.float_rounding = float_rounding
        self.math_verify_options = {
            "extraction": extraction,
            "float_rounding": float_rounding,
            "numeric_precision": numeric_precision,
            "allow_set_relation_comp": allow_set_relation_comp,
        }
        self.options = {
            "timeout": self.timeout,
            "workers": workers,
            "on_timeout": on_timeout,
            "strict": strict,
            "fast_path": fast_path,
            **self.math_verify_options,
        }
        self.meta = {"math_verify": version("math-verify"), "options": dict(self.options)}
        self._pool: WorkerPool | None = None

    # A verifier travels to executor processes; its worker pool does not.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_pool"] = None
        return state

    def close(self) -> None:
        """Stop the slow-path workers (they also stop when the verifier is collected)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> MathEqual:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the slow-path workers running now."""
        return self._pool.running if self._pool is not None else []

    def verify(self, completion: str, reference: Any, prompt: str | None = None) -> Verdict:
        decided, references = self._decide_fast(completion, reference)
        return decided if decided is not None else self._slow(completion, references)

    def _decide_fast(self, completion: Any, reference: Any) -> tuple[Verdict | None, list[str]]:
        """The verdict when it needs no math-verify (bad input, the fast path), and the
        references as text for the slow path otherwise."""
        if reference is None:
            return Verdict.error("no reference to compare with (privileged.reference is empty)"), []
        if not isinstance(completion, str):
            return Verdict.error(
                f"the completion is a {type(completion).__name__}, not a string"
            ), []
        references = [
            _reference_text(r)
            for r in (reference if isinstance(reference, list | tuple) else [reference])
        ]
        if not references:
            return Verdict.error("the reference list is empty"), []
        if self.fast_path:
            fast = self._fast(completion, references)
            if fast is not None:
                return fast, references
        return None, references

    def verify_many(self, pairs: Iterable[Sequence[Any]]) -> list[Verdict]:
        """Verdicts for ``(completion, reference[, prompt])`` pairs, in order.

        The fast path decides what it can in this thread; the rest go to the slow path's
        ``workers`` processes at once, so a batch of LaTeX answers uses every core. Every
        pair is checked before any is decided, so a malformed one fails the call at once,
        naming its index. The verdicts are the ones ``verify`` gives, pair by pair.
        """
        checked = batch_pairs(pairs)
        verdicts: list[Verdict | None] = [None] * len(checked)
        slow: list[tuple[int, str, list[str]]] = []
        for index, (completion, reference) in enumerate(checked):
            decided, references = self._decide_fast(completion, reference)
            if decided is not None:
                verdicts[index] = decided
            else:
                slow.append((index, completion, references))
        if len(slow) > 1 and self.timeout is not None and self.workers > 1:
            # One thread per worker, each reference's pairs on one worker: it parses the
            # reference once and its parser is warm for the answers written like it.
            groups: dict[int, list[tuple[int, str, list[str]]]] = {}
            for job in slow:
                groups.setdefault(_slot_of(job[2], self.workers), []).append(job)
            self._workers()

            def run_group(slot: int) -> list[tuple[int, Verdict]]:
                return [(i, self._slow(c, refs, slot=slot)) for i, c, refs in groups[slot]]

            with ThreadPoolExecutor(max_workers=len(groups)) as pool:
                for group_verdicts in pool.map(run_group, sorted(groups)):
                    for index, verdict in group_verdicts:
                        verdicts[index] = verdict
        else:
            for index, completion, refs in slow:
                verdicts[index] = self._slow(completion, refs)
        return [v for v in verdicts if v is not None]

    def _workers(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(_WORKER_MODULE, self.workers)
        return self._pool

    def _fast(self, completion: str, references: Sequence[str]) -> Verdict | None:
        for ref in references:
            if _same_text(completion, ref):
                return Verdict(
                    1.0, f"{ref.strip()} == {ref.strip()}", meta={"path": "fast"}, quotes=(ref,)
                )
        plain = self._fast_number(completion, references)
        return plain if plain is not None else self._fast_rational(completion, references)

    def _fast_number(self, completion: str, references: Sequence[str]) -> Verdict | None:
        """A plainly written reference number against an answer written the GSM8K way."""
        numbers = [_reference_number(ref) for ref in references]
        if any(n is None for n in numbers):
            return None
        answer = plain_answer(completion)
        if answer is None:
            return None
        # math-verify rounds to float_rounding places: past them its equality is not exact
        # decimal equality, so only it decides.
        places = self.float_rounding
        if any(decimal_places(n) > places for n in (answer, *numbers) if n is not None):
            return None
        for number in numbers:
            if answer == number:
                return Verdict(
                    1.0,
                    f"{shown(answer)} == {shown(answer)}",
                    meta={"path": "fast"},
                    quotes=(shown(answer),),
                )
        wanted = [shown(n) for n in numbers if n is not None]
        return Verdict(
            0.0,
            f"{shown(answer)} != {' or '.join(wanted)}",
            meta={"path": "fast"},
            quotes=wanted,
        )

    def _fast_rational(self, completion: str, references: Sequence[str]) -> Verdict | None:
        """Exact rationals written in LaTeX on every side (``_rationals``)."""
        decided = rationals.compare(completion, list(references))
        if decided is None:
            return None
        equal, answer, golds = decided
        shown_answer = _shown_fraction(answer)
        if equal:
            return Verdict(
                1.0,
                f"{shown_answer} == {shown_answer}",
                meta={"path": "fast"},
                quotes=(shown_answer,),
            )
        wanted = [_shown_fraction(g) for g in golds]
        return Verdict(
            0.0,
            f"{shown_answer} != {' or '.join(wanted)}",
            meta={"path": "fast"},
            quotes=wanted,
        )

    def _slow(self, completion: str, references: list[str], slot: int | None = None) -> Verdict:
        payload = {
            "answer": completion,
            "references": references,
            "strict": self.strict,
            "options": self.math_verify_options,
        }
        if self.timeout is None:
            from whileai_verifiers import _mathworker

            reply = _mathworker.compare(
                completion, references, self.strict, **self.math_verify_options
            )
        else:
            try:
                reply = self._workers().request(payload, self.timeout, slot=slot)
            except WorkerTimeout:
                reason = f"timeout after {self.timeout}s"
                if self.on_timeout == "fail":
                    return Verdict(0.0, reason, meta={"path": "math-verify", "timeout": True})
                return Verdict.error(reason, path="math-verify", timeout=True)
            except WorkerCrashed as exc:
                return Verdict.error(f"math-verify worker failed: {exc}", path="math-verify")
        return _verdict(reply, references)


def _slot_of(references: list[str], workers: int) -> int:
    """The worker a reference's pairs go to in a batch: stable across batches and processes."""
    return zlib.crc32("\x00".join(references).encode("utf-8")) % workers


def _shown_fraction(value: Fraction) -> str:
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


def _reference_text(reference: Any) -> str:
    if isinstance(reference, bool):
        raise TypeError(f"a reference is a string or a number, got {reference!r}")
    return reference if isinstance(reference, str) else str(reference)


def _verdict(reply: dict[str, Any], references: list[str]) -> Verdict:
    meta = {"path": "math-verify"}
    # what math-verify parsed the reference to, and the answer it found equal to it
    quotes = [str(reply[k]) for k in ("reference", "answer") if reply.get(k) is not None]
    if not reply.get("equal"):
        quotes = quotes[:1]
    if "error" in reply:
        return Verdict.error(f"math-verify failed: {reply['error']}", **meta)
    if reply["equal"]:
        return Verdict(
            1.0,
            f"parsed {reply['answer']} vs {reply['reference']}: equal",
            meta=meta,
            quotes=quotes,
        )
    unparsed = reply.get("unparsed_references") or []
    if len(unparsed) == len(references):
        shown_refs = ", ".join(repr(r) for r in unparsed)
        return Verdict.error(f"math-verify could not parse the reference {shown_refs}", **meta)
    if not reply.get("answer_found"):
        return Verdict(
            0.0,
            f"no answer found in the completion (reference {reply['reference']})",
            meta=meta,
            quotes=quotes,
        )
    return Verdict(
        0.0,
        f"parsed {reply['answer']} vs {reply['reference']}: not equal",
        meta=meta,
        quotes=quotes,
    )
