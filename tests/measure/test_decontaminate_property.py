"""decontaminate against a plain reference, on generated text: every separator str.split()
knows, punctuation, non-ASCII letters, and the record separator the fast path joins on."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import whileai as wai
from whileai.measure.decontaminate import normalize_tokens

WORDS = st.sampled_from(["a", "B", "é", "É", "x-y", "z!", "--", "qq", "naïve", "ß"])
SPACES = st.sampled_from([" ", "  ", "\t", "\n", "\xa0", "\u3000", "\u2003", "\x1c", "\x1e"])


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(WORDS, min_size=0, max_size=12))
    out = ""
    for word in words:
        out += word + draw(SPACES)
    return out


def windows(tokens: list[str], k: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + k]) for i in range(len(tokens) - k + 1)}


def reference(prompts: list[str], sources: list[str], n: int, min_n: int) -> list[int]:
    """The rule the module docstring states, written the slow and obvious way."""
    source_tokens = [normalize_tokens(s) for s in sources]
    full = set().union(*(windows(t, n) for t in source_tokens if len(t) >= n))
    short = {tuple(t) for t in source_tokens if min_n <= len(t) < n}
    flagged = []
    for i, prompt in enumerate(prompts):
        tokens = normalize_tokens(prompt)
        if len(tokens) < min_n:
            continue
        hit = bool(windows(tokens, n) & full)
        hit |= any(windows(tokens, len(s)) & {s} for s in short)
        if len(tokens) < n:
            whole = tuple(tokens)
            hit |= any(whole in windows(t, len(whole)) for t in source_tokens)
        if hit:
            flagged.append(i)
    return flagged


@settings(max_examples=150, deadline=None)
@given(
    prompts=st.lists(texts(), min_size=1, max_size=8),
    sources=st.lists(texts(), min_size=1, max_size=4),
)
def test_matches_the_plain_reference(prompts: list[str], sources: list[str]) -> None:
    rows = [{"prompt": p, "final_text": ""} for p in prompts]
    report = wai.decontaminate(rows, {"s": sources}, n=4, min_n=2)
    assert report.contaminated_indices == reference(prompts, sources, n=4, min_n=2)
    for index, found in report.matches.items():
        tokens = normalize_tokens(prompts[index])
        for match in found:
            gram = tuple(match.ngram.split())
            assert gram in windows(tokens, len(gram))
            assert gram in windows(normalize_tokens(sources[match.item]), len(gram))
