"""ExactMatch: string equality after normalisation.

Defaults follow the SQuAD evaluation script's ``normalize_answer`` (lower case, punctuation and
the articles a/an/the removed, whitespace collapsed), the convention most QA benchmarks grade by.
Each step can be switched off.

One departure from that script: removing punctuation or articles never empties a text that had
something in it. A multiple-choice reference ``"A"`` would otherwise normalise to ``""`` and be
matched by an empty completion, by ``"the"`` or by ``"."``; with the step skipped for such a text,
``"A"``, ``"a."`` and ``"(A)"`` still match it and nothing else does. An empty reference (SQuAD
2.0's "no answer") is still matched by an empty or all-whitespace completion only.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence
from typing import Any, Literal

from whileai.scoring import Verdict
from whileai_verifiers import __version__

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.IGNORECASE)
_PUNCT = str.maketrans("", "", string.punctuation)


class ExactMatch:
    """1.0 when the completion equals the reference (or any of a list of references)."""

    name = "ExactMatch"
    version = __version__

    def __init__(
        self,
        *,
        ignore_case: bool = True,
        ignore_punctuation: bool = True,
        ignore_articles: bool = True,
        collapse_whitespace: bool = True,
        strip: bool = True,
        unicode_normalize: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = "NFKC",
    ) -> None:
        if unicode_normalize not in (None, "NFC", "NFD", "NFKC", "NFKD"):
            raise ValueError(
                f"unicode_normalize must be None, NFC, NFD, NFKC or NFKD, got {unicode_normalize!r}"
            )
        self.options = {
            "ignore_case": ignore_case,
            "ignore_punctuation": ignore_punctuation,
            "ignore_articles": ignore_articles,
            "collapse_whitespace": collapse_whitespace,
            "strip": strip,
            "unicode_normalize": unicode_normalize,
        }
        self.meta = {"options": dict(self.options)}
        self._unicode_form: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = unicode_normalize

    def normalize(self, text: str) -> str:
        o = self.options
        if self._unicode_form:
            text = unicodedata.normalize(self._unicode_form, text)
        if o["ignore_case"]:
            text = text.lower()
        if o["ignore_punctuation"]:
            text = _unless_emptied(text, text.translate(_PUNCT))
        if o["ignore_articles"]:
            text = _unless_emptied(text, _ARTICLES.sub(" ", text))
        if o["collapse_whitespace"]:
            text = " ".join(text.split())
        elif o["strip"]:
            text = text.strip()
        return text

    def verify(self, completion: str, reference: Any, prompt: str | None = None) -> Verdict:
        if reference is None:
            return Verdict.error("no reference to compare with (privileged.reference is empty)")
        references: Sequence[Any] = (
            reference if isinstance(reference, list | tuple) else [reference]
        )
        got = self.normalize(completion)
        normalised = tuple(self.normalize(str(ref)) for ref in references)
        for ref, wanted in zip(references, normalised, strict=True):
            if got == wanted:
                return Verdict(1.0, f"matches {str(ref)!r}", quotes=(got,))
        shown = str(references[0]) if len(references) == 1 else f"any of {len(references)}"
        return Verdict(
            0.0, f"{got!r} does not match {shown!r} after normalisation", quotes=normalised
        )


def _unless_emptied(before: str, after: str) -> str:
    """``after``, unless the step took away everything ``before`` had to say."""
    if before.strip() and not after.strip():
        return before
    return after
