"""decontaminate: GPT-3 appendix C n-gram overlap, checked against what lm-eval's Janitor flags."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

import whileai as wai
from whileai.measure.decontaminate import normalize_tokens
from whileai.registry import Registry

SOURCE = "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat."

# What lm-evaluation-harness's Janitor (ngram_n=13, python mode) flags on each prompt, worked
# out by running it: register_contaminant(SOURCE), then the 13-gram test clean() makes.
JANITOR_FLAGS = {
    "Yesterday, THE quick brown fox jumps over the lazy dog while the cat sleeps!": True,
    "prefix words here: quick brown fox jumps over the lazy dog while the cat sleeps on the "
    "warm mat. suffix": True,
    # 12 tokens: no 13-gram to form
    "the quick brown fox jumps over the lazy dog while the cat": False,
    # a lone "-" splits the run for the Janitor, which normalises after splitting
    "the quick brown fox - jumps over the lazy dog while the cat sleeps on": False,
    "nothing in this sentence comes from the source text at all, not one run of thirteen "
    "words": False,
}
JANITOR_NGRAMS = {
    "the quick brown fox jumps over the lazy dog while the cat sleeps",
    "quick brown fox jumps over the lazy dog while the cat sleeps on",
    "brown fox jumps over the lazy dog while the cat sleeps on the",
    "fox jumps over the lazy dog while the cat sleeps on the warm",
    "jumps over the lazy dog while the cat sleeps on the warm mat",
}


def rows_of(prompts: list[str]) -> list[dict[str, str]]:
    return [{"prompt": p, "final_text": ""} for p in prompts]


def test_normalisation_is_the_janitors() -> None:
    assert normalize_tokens("Yesterday, THE quick-brown fox!  ") == [
        "yesterday",
        "the",
        "quickbrown",
        "fox",
    ]
    source = normalize_tokens(SOURCE)
    grams = {" ".join(source[i : i + 13]) for i in range(len(source) - 12)}
    assert grams == JANITOR_NGRAMS


def test_full_13_grams_flag_what_the_janitor_flags() -> None:
    prompts = list(JANITOR_FLAGS)
    report = wai.decontaminate(rows_of(prompts), [SOURCE], min_n=13)
    flagged = {prompts[i] for i in report.contaminated_indices}
    expected = {p for p, hit in JANITOR_FLAGS.items() if hit}
    # The one documented difference: the lone "-" is deleted before splitting here.
    assert flagged == expected | {prompts[3]}
    assert report.n_contaminated == 3 and report.n_clean == 2
    assert [r["prompt"] for r in report.clean] == [prompts[2], prompts[4]]


def test_report_names_source_item_and_shared_ngram() -> None:
    against = {"gsm8k": ["unrelated item one two three four five six seven", SOURCE]}
    report = wai.decontaminate(rows_of(list(JANITOR_FLAGS)), against, min_n=13)
    first = report.matches[0][0]
    assert (first.source, first.item, first.field) == ("gsm8k", 1, "prompt")
    assert first.ngram == "the quick brown fox jumps over the lazy dog while the cat sleeps"
    assert report.matches[1][0].ngram == (
        "quick brown fox jumps over the lazy dog while the cat sleeps on"
    )
    assert report.per_source == {"gsm8k": 3}
    assert report["n_contaminated"] == 3


def test_short_text_is_compared_whole() -> None:
    prompts = list(JANITOR_FLAGS)
    report = wai.decontaminate(rows_of(prompts), [SOURCE])  # default min_n=8
    # The 12-token prompt lies whole inside the source item: GPT-3 counts it.
    assert 2 in report.contaminated_indices
    # A source item of 9 tokens is matched whole inside a longer prompt.
    short = wai.decontaminate(
        rows_of(["well, now: the lazy dog while the cat sleeps on it, then more words"]),
        {"short": ["The lazy dog while the cat sleeps on it"]},
    )
    assert short.contaminated_indices == [0]
    assert short.matches[0][0].ngram == "the lazy dog while the cat sleeps on it"


def test_too_short_text_is_counted_not_hidden() -> None:
    report = wai.decontaminate(
        rows_of(["the lazy dog", SOURCE]), {"a": ["the lazy dog", SOURCE]}, min_n=8
    )
    assert report.rows_too_short == [0]
    assert report.source_items_too_short == {"a": 1}
    assert 0 in report.clean_indices
    assert any("fewer than 8 tokens" in note and "not compared" in note for note in report.notes)


def test_against_takes_strings_rows_and_mappings() -> None:
    rows = rows_of([SOURCE, "another prompt that shares nothing with anything at all here ok"])
    for against in (SOURCE, [SOURCE], [{"prompt": SOURCE}], {"bench": [SOURCE]}):
        report = wai.decontaminate(rows, against)
        assert report.contaminated_indices == [0]


def test_several_fields_and_items() -> None:
    rows = [
        {"prompt": "clean prompt text with nothing copied", "final_text": SOURCE},
        {"prompt": "clean prompt text with nothing copied", "final_text": "short"},
    ]
    report = wai.decontaminate(
        rows, {"a": [SOURCE], "b": [SOURCE]}, fields=("prompt", "final_text")
    )
    assert report.contaminated_indices == [0]
    assert {(m.source, m.field) for m in report.matches[0]} == {
        ("a", "final_text"),
        ("b", "final_text"),
    }


def test_unicode_whitespace_and_case() -> None:
    text = "THE\u00a0QUICK brown fox jumps over the lazy dog while the cat sleeps\u3000ÉTÉ"
    report = wai.decontaminate(rows_of([text]), [SOURCE])
    assert report.contaminated_indices == [0]
    assert normalize_tokens("ÉTÉ\u2003été") == ["été", "été"]


def test_missing_field_names_the_row() -> None:
    rows = [{"prompt": SOURCE}, {"final_text": "x"}]
    with pytest.raises(
        wai.RowError, match=r"row 1: no field 'prompt' \(its fields: 'final_text'\)$"
    ):
        wai.decontaminate(rows, [SOURCE])
    with pytest.raises(wai.RowError, match=r"row 0: field 'prompt' must be a string"):
        wai.decontaminate([{"prompt": 3}], [SOURCE])
    with pytest.raises(
        wai.RowError,
        match=r"against\['gsm8k'\]\[0\]: no field 'prompt' \(its fields: 'question'\); "
        "against_fields names",
    ):
        wai.decontaminate(rows_of([SOURCE]), {"gsm8k": [{"question": SOURCE}]})
    with pytest.raises(wai.RowError, match=r"^against\[1\]: no field 'question'"):
        wai.decontaminate(rows_of([SOURCE]), [{"question": "x"}, {}], against_fields="question")
    with pytest.raises(ValueError, match="against_fields must name at least one row field"):
        wai.decontaminate(rows_of([SOURCE]), [SOURCE], against_fields=())


def test_empty_inputs() -> None:
    assert wai.decontaminate([], [SOURCE]).n_rows == 0
    with pytest.raises(ValueError, match="against holds no texts"):
        wai.decontaminate(rows_of([SOURCE]), [])
    with pytest.raises(ValueError, match="empty mapping"):
        wai.decontaminate(rows_of([SOURCE]), {})
    report = wai.decontaminate(rows_of(["", SOURCE]), {"a": [SOURCE, ""]})
    assert report.contaminated_indices == [1] and report.rows_too_short == [0]


def test_bad_settings() -> None:
    with pytest.raises(ValueError, match="min_n"):
        wai.decontaminate(rows_of([SOURCE]), [SOURCE], n=13, min_n=14)
    with pytest.raises(ValueError, match="n must be"):
        wai.decontaminate(rows_of([SOURCE]), [SOURCE], n=0)
    with pytest.raises(TypeError, match="rows must be a list"):
        wai.decontaminate({"prompt": SOURCE}, [SOURCE])


@pytest.mark.parametrize("chunk", [7, 4096])
def test_many_rows_agree_with_a_plain_set_of_ngrams(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hashed scan must find exactly what a plain set of 13-gram tuples finds.
    import random

    rng = random.Random(3)
    words = [f"w{i}" for i in range(40)]
    sources = [" ".join(rng.choice(words) for _ in range(30)) for _ in range(20)]
    prompts = []
    for _ in range(400):
        tokens = [rng.choice(words) for _ in range(rng.randint(13, 40))]
        if rng.random() < 0.3:
            donor = rng.choice(sources).split()
            start = rng.randint(0, len(donor) - 13)
            tokens[5:5] = donor[start : start + rng.randint(12, 16)]
        prompts.append(" ".join(tokens))
    # Rows are scanned in chunks; a small chunk puts many boundaries in the way.
    module = importlib.import_module("whileai.measure.decontaminate")
    monkeypatch.setattr(module, "_CHUNK_TEXTS", chunk)
    report = wai.decontaminate(rows_of(prompts), sources, min_n=13)
    grams: set[tuple[str, ...]] = set()
    for s in sources:
        t = s.split()
        grams.update(tuple(t[i : i + 13]) for i in range(len(t) - 12))
    expected = [
        i
        for i, p in enumerate(prompts)
        if any(tuple(p.split()[j : j + 13]) in grams for j in range(len(p.split()) - 12))
    ]
    assert report.contaminated_indices == expected
    assert 0 < len(expected) < len(prompts)


def test_hash_collisions_neither_make_nor_hide_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    # The module, not the function of the same name the package exports.
    module = importlib.import_module("whileai.measure.decontaminate")

    prompts = [
        *JANITOR_FLAGS,
        "zero one two three four five six seven eight nine ten eleven twelve thirteen",
    ]
    against = {"a": [SOURCE, "zero one two three four five six seven eight nine ten eleven twelve"]}
    honest = wai.decontaminate(rows_of(prompts), against)
    # Every token hashes alike, so every window collides with every source window.
    monkeypatch.setattr(module, "_mix", lambda z: np.zeros_like(z))
    colliding = wai.decontaminate(rows_of(prompts), against)
    assert colliding.contaminated_indices == honest.contaminated_indices == [0, 1, 2, 3, 5]
    assert colliding.matches == honest.matches


def test_report_prints_readably() -> None:
    report = wai.decontaminate(rows_of(list(JANITOR_FLAGS)), {"gsm8k": [SOURCE]})
    text = str(report)
    assert text.startswith("decontaminate")
    assert "4 of 5 rows overlap a source" in text
    assert "gsm8k" in text and "row 0 ~ gsm8k[0]" in text
    assert "note:" in text
    assert report.to_dict()["n_rows"] == 5


def test_rows_from_wai_rows_against_the_shipped_gsm8k_questions() -> None:
    import json
    from pathlib import Path

    shipped = Path(__file__).parents[2] / "recipes/02-measure/public-benchmark/gsm8k_test_200.jsonl"
    questions = [json.loads(line)["question"] for line in shipped.read_text().splitlines() if line]
    prompts = [
        questions[3].upper(),  # re-cased copy
        "Please solve: " + questions[10].replace(",", ";") + " Show your work.",
        "A farmer has 3 goats and buys 2 more; how many goats does the farmer have now in total?",
        questions[42],
    ]
    rows = wai.rows(prompts, [["42"]] * len(prompts), [[1.0]] * len(prompts))
    report = wai.decontaminate(rows, {"gsm8k": questions})
    assert report.contaminated_indices == [0, 1, 3]
    assert [m.item for i in (0, 1, 3) for m in report.matches[i]] == [3, 10, 42]
    assert report.clean == [rows[2]]
    # the benchmark's own records, read on the field they hold their text in
    records = [json.loads(line) for line in shipped.read_text().splitlines() if line]
    as_given = wai.decontaminate(rows, {"gsm8k": records}, against_fields="question")
    assert as_given.contaminated_indices == [0, 1, 3]
    assert [m.field for m in as_given.matches[3]] == ["prompt"]


def test_against_a_benchmarks_file_or_a_run() -> None:
    import json
    from pathlib import Path

    shipped = Path(__file__).parents[2] / "recipes/02-measure/public-benchmark/gsm8k_test_200.jsonl"
    questions = [json.loads(line)["question"] for line in shipped.read_text().splitlines() if line]
    prompts = [questions[5], "How many goats does the farmer have at noon on a Sunday?"]
    rows = wai.rows(prompts, [["42"]] * 2, [[1.0]] * 2)
    # the file as it ships: its records, read on the field they hold their text in, the
    # source named by the file (as `whileai decontaminate --against` names it)
    report = wai.decontaminate(rows, shipped, against_fields="question")
    assert report.contaminated_indices == [0]
    assert report.per_source == {"gsm8k_test_200.jsonl": 1}
    assert [(m.source, m.item) for m in report.matches[0]] == [("gsm8k_test_200.jsonl", 5)]
    # under a name of the caller's choosing
    named = wai.decontaminate(rows, {"gsm8k": shipped}, against_fields="question")
    assert named.per_source == {"gsm8k": 1}
    # another run (a training set that must not hold the eval's prompts): its rows
    train = wai.evaluate(
        lambda prompt: "42",
        [questions[5], questions[6]],
        judge=lambda prompt, completion: True,
        repeats=1,
        registry=Registry.from_plugins(),
    )
    assert wai.decontaminate(rows, train).contaminated_indices == [0]


def test_a_benchmark_file_that_cannot_be_read_is_named(tmp_path: Any) -> None:
    from pathlib import Path

    rows = rows_of([SOURCE])
    with pytest.raises(FileNotFoundError, match=r"^against='.*nothing.jsonl': no such file$"):
        wai.decontaminate(rows, tmp_path / "nothing.jsonl")
    texts = tmp_path / "bench.txt"
    texts.write_text(f"\n{SOURCE}\n\nan unrelated line\n")
    assert wai.decontaminate(rows, texts).per_source == {"bench.txt": 1}
    records = tmp_path / "bench.jsonl"
    records.write_text('{"question": "x"}\n[1, 2]\n')
    with pytest.raises(
        ValueError,
        match=r"bench.jsonl', line 1: no text in field 'prompt' \(its fields: question\); "
        "against_fields names",
    ):
        wai.decontaminate(rows, records)
    with pytest.raises(ValueError, match=r"bench.jsonl', line 2: a JSON list, not a record$"):
        wai.decontaminate(rows, Path(records), against_fields="question")
    with pytest.raises(TypeError, match=r"^against must be .* a file's path"):
        wai.decontaminate(rows, 42)


def test_a_run_file_keeps_its_clean_rows_on_disk(tmp_path: Any) -> None:
    import json

    path = tmp_path / "run.jsonl"
    rows = [
        {"prompt": text, "final_text": "an answer", "reward": 1.0}
        for text in ("the cat sat on the mat today", "a dog ran far away from home", "blue")
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = wai.decontaminate(str(path), ["the cat sat on the mat"], n=4)
    assert type(report.clean) is not list
    assert list(report.clean) == rows[1:] and list(report.contaminated) == rows[:1]
    assert report.to_dict() == wai.decontaminate(rows, ["the cat sat on the mat"], n=4).to_dict()


def test_a_long_run_file_is_checked_a_chunk_of_texts_at_a_time(tmp_path: Any) -> None:
    # the prompts of a million rollouts are gigabytes: a file's are read as they are checked,
    # in chunks of a bounded number of characters, so more rows cost no more memory
    import json
    import tracemalloc

    benchmark = ["what is the capital city of france and why is it there"]

    def run_file(name: str, rows: int) -> Any:
        path = tmp_path / f"{name}.jsonl"
        with path.open("w") as f:
            for i in range(rows):
                leak = benchmark[0] if i % 50 == 0 else f"question {i}"
                row = {"prompt": f"{leak} " + f"w{i % 13} " * 150, "final_text": "x"}
                f.write(json.dumps(row) + "\n")
        return path

    def peak(path: Any) -> tuple[Any, int]:
        tracemalloc.start()
        try:
            report = wai.decontaminate(str(path), benchmark)
            return report, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    wai.decontaminate(str(run_file("warm", 10)), benchmark)
    few, many = run_file("few", 6000), run_file("many", 24000)
    (few_report, few_peak), (many_report, many_peak) = peak(few), peak(many)
    assert many_report.contaminated_indices == list(range(0, 24000, 50))
    assert few_report.contaminated_indices == list(range(0, 6000, 50))
    # the same report from the rows in memory
    held = [json.loads(line) for line in many.read_text().splitlines()]
    assert many_report.to_dict() == wai.decontaminate(held, benchmark).to_dict()
    # four times the rows: held, the prompts alone would grow the peak by more than the extra
    # bytes; read a chunk at a time, only what the report keeps per row grows (its indices,
    # each text's row: some 70 bytes a row against 540 of prompt)
    extra = many.stat().st_size - few.stat().st_size
    assert many_peak - few_peak < extra / 4, (few_peak, many_peak, extra)
