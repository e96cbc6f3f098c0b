"""decontaminate against lm-evaluation-harness's 13-gram Janitor (python mode), same data.

100,000 synthetic prompts (``--quick``: 5,000) are checked against the GSM8K test questions and
the HumanEval prompts. A share of them embed a span of a GSM8K question or a HumanEval prompt
(re-cased, sometimes with punctuation changed); the rest are random text drawn from the same
vocabulary, so they share words but not 13-grams.

Both sides do the whole job: build their n-gram table from the two benchmarks, then decide for
every prompt whether it overlaps. The Janitor's check stops at a prompt's first matching n-gram
(the most favourable way to run it); ``decontaminate`` finds every source item a prompt overlaps.

Agreement is asserted before speed is compared. The one documented difference (see
``whileai.measure.decontaminate``): the Janitor splits the text it checks before normalising it,
so a token made only of punctuation (HumanEval's ``->``, ``>>>``, ``\"\"\"``) leaves an empty
token and the windows around it never match. So: every prompt the Janitor flags is flagged
here, on prompts without such tokens the two agree exactly, and every prompt flagged only here is
one the Janitor flags too once its punctuation-only tokens are removed.

    python3 dev.py bench bench_decontaminate [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import random
import string
import sys
from pathlib import Path
from typing import Any

from _harness import ratio_line, timed

from whileai.measure.decontaminate import decontaminate

GSM8K = Path("/work/shared/data/gsm8k/test.jsonl")
HUMANEVAL = Path("/work/shared/data/humaneval/HumanEval.jsonl.gz")
N = 13
_PUNCT = set(string.punctuation)


def load_sources() -> dict[str, list[str]]:
    with GSM8K.open(encoding="utf-8") as fh:
        questions = [json.loads(line)["question"] for line in fh if line.strip()]
    with gzip.open(HUMANEVAL, "rt", encoding="utf-8") as fh:
        prompts = [json.loads(line)["prompt"] for line in fh if line.strip()]
    return {"gsm8k": questions, "humaneval": prompts}


def _mangle(words: list[str], rng: random.Random) -> list[str]:
    """Change case and punctuation the way a paraphrased copy would; 13-grams survive it."""
    out = []
    for w in words:
        roll = rng.random()
        if roll < 0.1:
            w = w.upper()
        elif roll < 0.2:
            w = w.strip(string.punctuation) or w
        elif roll < 0.25:
            w = w + ","
        out.append(w)
    return out


def make_prompts(sources: dict[str, list[str]], count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    vocabulary = sorted({w for texts in sources.values() for t in texts for w in t.split()})
    prompts = []
    for _ in range(count):
        filler = [rng.choice(vocabulary) for _ in range(rng.randint(15, 45))]
        roll = rng.random()
        if roll < 0.25:
            donor = rng.choice(sources["gsm8k"]).split()
        elif roll < 0.30:
            donor = rng.choice(sources["humaneval"]).split()
        else:
            prompts.append(" ".join(filler))
            continue
        # A span of 10-20 donor words: shorter than 13 after normalising often enough that
        # near misses are part of the test, not only clear hits.
        span = rng.randint(10, min(20, len(donor)))
        start = rng.randint(0, len(donor) - span)
        piece = _mangle(donor[start : start + span], rng)
        cut = rng.randint(0, len(filler))
        prompts.append(" ".join([*filler[:cut], *piece, *filler[cut:]]))
    return prompts


def import_janitor() -> Any:
    # The module prints a traceback when its optional C++ helper is missing: that is python
    # mode, the mode a pip install gets, and the one measured here.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from lm_eval.decontamination import janitor
    if janitor.JANITOR_CPP:
        sys.exit("lm-eval's C++ janitor_util is importable; this benchmark measures python mode")
    return janitor


def janitor_flags(janitor: Any, sources: dict[str, list[str]], prompts: list[str]) -> list[bool]:
    jan = janitor.Janitor(ngram_n=N)
    for texts in sources.values():
        for text in texts:
            jan.register_contaminant_python(text)  # register_contaminant() prints per call
    dirt = jan.dirt_ngrams
    norm = jan.normalize_string
    ngrams = janitor.word_ngrams_indices
    # clean_python()'s own test, stopped at the first hit.
    return [any(norm(g) in dirt for g, _ in ngrams(p, N)) for p in prompts]


def whileai_flags(sources: dict[str, list[str]], prompts: list[str]) -> list[bool]:
    report = decontaminate([{"prompt": p} for p in prompts], sources, n=N)
    flags = [False] * len(prompts)
    for i in report.contaminated_indices:
        flags[i] = True
    return flags


def has_punctuation_token(text: str) -> bool:
    return any(all(c in _PUNCT for c in w) for w in text.split())


def without_punctuation_tokens(text: str) -> str:
    return " ".join(w for w in text.split() if not all(c in _PUNCT for c in w))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 prompts instead of 100,000")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side; the best counts")
    args = parser.parse_args()
    count = 5_000 if args.quick else 100_000

    janitor = import_janitor()
    sources = load_sources()
    prompts = make_prompts(sources, count)
    print(
        f"{count:,} prompts against {len(sources['gsm8k']):,} GSM8K questions and "
        f"{len(sources['humaneval'])} HumanEval prompts, {N}-grams"
    )

    # Best of --repeat runs each, alternating, so a busy machine or a cold cache weighs on
    # neither side more than the other.
    ours_runs, peer_runs = [], []
    for _ in range(args.repeat):
        ours_runs.append(timed("whileai", lambda: whileai_flags(sources, prompts)))
        peer_runs.append(timed("Janitor", lambda: janitor_flags(janitor, sources, prompts)))
    ours = min(ours_runs, key=lambda t: t.seconds)
    peer = min(peer_runs, key=lambda t: t.seconds)
    a: list[bool] = ours.result
    b: list[bool] = peer.result

    missed = [i for i in range(count) if b[i] and not a[i]]
    assert not missed, f"Janitor flags {len(missed)} prompts decontaminate does not: {missed[:5]}"
    plain = [i for i in range(count) if not has_punctuation_token(prompts[i])]
    differ_plain = [i for i in plain if a[i] != b[i]]
    assert not differ_plain, (
        f"disagreement on prompts without punctuation tokens: {differ_plain[:5]}"
    )
    only_ours = [i for i in range(count) if a[i] and not b[i]]
    recheck = janitor_flags(
        janitor, sources, [without_punctuation_tokens(prompts[i]) for i in only_ours]
    )
    unexplained = [i for i, ok in zip(only_ours, recheck, strict=True) if not ok]
    assert not unexplained, f"flagged here only, not explained: {unexplained[:5]}"
    print(
        f"agreement: whileai flags {sum(a):,}, Janitor {sum(b):,}; equal on all "
        f"{len(plain):,} prompts without punctuation-only tokens; the {len(only_ours)} flagged "
        "here only are the Janitor's own matches once their punctuation-only tokens go"
    )
    print(
        f"best of {args.repeat}: whileai {ours.seconds:.2f}s, Janitor {peer.seconds:.2f}s "
        f"(all runs: {', '.join(f'{t.seconds:.2f}' for t in ours_runs)} / "
        f"{', '.join(f'{t.seconds:.2f}' for t in peer_runs)})"
    )
    print(
        ratio_line(
            "decontaminate prompts",
            ours.rate(count),
            peer.rate(count),
            "lm-eval Janitor",
            target=5,
        )
    )


if __name__ == "__main__":
    main()
