"""Other tools' logs in, as an eval team meets them: an Inspect AI log the real package wrote,
lm-evaluation-harness samples, tau-bench and tau2-bench results, a verifiers run, and our own
rows and Parquet, each read into rows with provenance that every measurement works on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import whileai as wai

SAMPLES = Path(__file__).parent / "samples"


def test_lm_eval_samples_become_rows_with_their_metric_and_target() -> None:
    rows = wai.load(SAMPLES / "samples_arith_2026-11-30T10-00-00.000000.jsonl")
    assert [r["reward"] for r in rows] == [1.0, 0.0]
    assert rows[0]["prompt"] == "Question: What is 2 + 3?\nAnswer:"
    assert rows[1]["prompt"] == "Question: What is 7 * 6?\nAnswer:"  # the older arguments shape
    assert rows[1]["final_text"] == "41"
    assert rows[0]["task_id"] == "arith:0" and rows[0]["label_source"] == "lm_eval"
    assert rows[0]["privileged"] == {"reference": "5"}
    assert rows[0]["lineage"]["source"]["metric"] == "exact_match"
    assert wai.pass_at(rows).pass_at_1 == 0.5


def test_tau_bench_and_tau2_bench_results_become_grouped_rows() -> None:
    tau = wai.load(SAMPLES / "tau_bench_results.json")
    assert [(r["task_id"], r["lineage"]["repeat"], r["reward"]) for r in tau] == [
        ("tau_bench:0", 0, 1.0),
        ("tau_bench:0", 1, 0.0),
        ("tau_bench:1", 0, 1.0),
    ]
    assert (
        tau[0]["prompt"] == "Hi, cancel my order #W1."
        and tau[1]["final_text"] == "I cannot do that."
    )
    report = wai.pass_at(tau)
    assert report.pass_at_1 == 0.75  # mean over tasks: (0.5 + 1.0) / 2
    tau2 = wai.load(SAMPLES / "tau2_bench_results.json")
    assert [r["reward"] for r in tau2] == [1.0, 0.0]
    assert tau2[0]["task_id"] == "airline:7" and tau2[0]["model_version"] == "gpt-4.1"
    assert tau2[1]["lineage"]["source"]["termination_reason"] == "max_steps"


def test_a_verifiers_run_reads_with_its_metadata() -> None:
    rows = wai.load(SAMPLES / "verifiers" / "results.jsonl")
    # the run's folder, as vf-eval writes it, is the same run
    assert wai.load(SAMPLES / "verifiers") == rows
    assert [r["reward"] for r in rows] == [1.0, 0.0]
    assert [r["lineage"]["repeat"] for r in rows] == [0, 1]
    assert rows[0]["prompt"] == "What is 2 + 3?" and rows[1]["final_text"] == "6"
    assert rows[0]["model_version"] == "gpt-4.1-mini"
    assert rows[0]["task_id"] == "vf-arith:default:0"


def test_our_own_rows_and_parquet_come_back_as_written(tmp_path: Path) -> None:
    rows = wai.rows(["What is 2 + 3?"], [["5", "4"]], lambda row: wai.Verdict(1.0))
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in wai.export(rows, shape="rows")))
    assert [r["final_text"] for r in wai.load(path)] == ["5", "4"]
    pytest.importorskip("pyarrow")
    parquet = wai.export(rows, "parquet", shape="rows", path=tmp_path / "rows.parquet")
    assert [r["final_text"] for r in wai.load(parquet)] == ["5", "4"]


def test_a_file_no_reader_knows_or_a_bad_score_is_named(tmp_path: Path) -> None:
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"foo": 1}\n')
    with pytest.raises(ValueError, match=r"not a file wai\.load reads"):
        wai.load(odd)
    bad = tmp_path / "samples_x_2026-01-01T00-00-00.jsonl"
    bad.write_text(
        json.dumps({"doc_id": 0, "resps": [["a"]], "metrics": ["acc"], "acc": 3.0}) + "\n"
    )
    with pytest.raises(ValueError, match=r"line 1 acc: score 3.0 is not a reward in \[0, 1\]"):
        wai.load(bad)
    with pytest.raises(FileNotFoundError, match="no such file"):
        wai.load(tmp_path / "missing.json")


def inspect_log(tmp_path: Path, name: str, outputs: list[str], log_samples: bool = True) -> Path:
    """A real Inspect AI eval: mockllm answers ``outputs`` in turn, match() scores them."""
    pytest.importorskip("inspect_ai")
    import tiktoken
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    class Words:
        def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]:
            return [0] * len(text.split())

    # Inspect counts tokens with tiktoken, whose encodings download at first use: offline here
    tiktoken.get_encoding = lambda *a, **k: Words()  # type: ignore[assignment]
    tiktoken.encoding_for_model = lambda *a, **k: Words()  # type: ignore[assignment]
    samples = [Sample(input=f"What is {i} + {i}?", target=str(2 * i), id=i) for i in range(4)]
    model = get_model(
        "mockllm/model",
        custom_outputs=[ModelOutput.from_content("mockllm/model", o) for o in outputs],
    )
    task = Task(dataset=samples, solver=generate(), scorer=match(), name=name)
    (log,) = inspect_eval(
        task, model=model, log_dir=str(tmp_path / name), display="none", log_samples=log_samples
    )
    return Path(log.location)


def test_an_inspect_log_reads_through_inspects_own_reader_and_two_compare(
    tmp_path: Path,
) -> None:
    before = inspect_log(tmp_path, "arith", ["0", "2", "5", "6"])
    after = inspect_log(tmp_path, "arith", ["0", "2", "4", "6"])
    a, b = wai.load(before), wai.load(after)
    assert [r["reward"] for r in sorted(a, key=lambda r: r["task_id"])] == [1.0, 1.0, 0.0, 1.0]
    assert all(r["label_source"] == "inspect_ai" for r in a)
    assert (
        a[0]["lineage"]["source"]["tool"] == "inspect_ai" and a[0]["lineage"]["source"]["version"]
    )
    assert {r["task_id"] for r in a} == {r["task_id"] for r in b}
    delta = wai.compare(a, b)
    assert delta.n_paired == 4
    assert "reward" in str(delta)
    # Inspect's log_dir holds both evals: each is read on its own, never the two as one
    with pytest.raises(IsADirectoryError) as refused:
        wai.load(before.parent)
    assert str(refused.value) == (
        f"wai.load: {str(before.parent)!r} is a folder, not a log: name one log in it (it holds "
        f"2 logs, newest first: {str(after)!r}, {str(before)!r}); each is an eval of its own, "
        "to import and measure apart"
    )


def test_an_inspect_log_without_its_samples_says_so(tmp_path: Path) -> None:
    bare = inspect_log(tmp_path, "arith", ["0", "2", "4", "6"], log_samples=False)
    with pytest.raises(ValueError, match="the log holds no samples"):
        wai.load(bare)


def test_a_long_log_imports_a_row_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an RL run's vf-eval results: read whole and listed, the rows were all held before the
    # first was written. Four times the rollouts of the same 100 tasks: the same peak
    import tracemalloc

    from whileai.cli import main

    def results(n: int) -> Path:
        run = tmp_path / f"run-{n}"
        run.mkdir()
        (run / "metadata.json").write_text(json.dumps({"env": "vf-long", "model": "m"}))
        with (run / "results.jsonl").open("w") as f:
            for i in range(n):
                record = {
                    "id": i % 100,
                    "prompt": [{"role": "user", "content": f"task {i % 100} " + "c" * 200}],
                    "completion": [{"role": "assistant", "content": f"{i} " + "x" * 400}],
                    "task": "default",
                    "answer": "5",
                    "reward": float(i % 2),
                }
                f.write(json.dumps(record) + "\n")
        return run / "results.jsonl"

    def peak(n: int) -> tuple[int, int]:
        log, out = results(n), tmp_path / f"rows-{n}.jsonl"
        tracemalloc.start()
        try:
            code = main(["import", str(log), "--output", str(out), "--json"])
            top = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert code == 0
        said = json.loads(capsys.readouterr().out)
        assert said == {"format": "verifiers", "rows": n, "tasks": 100, "output": str(out)}
        assert wai.load(out)[-1]["final_text"] == f"{n - 1} " + "x" * 400
        return top, log.stat().st_size + out.stat().st_size

    peak(100)  # (the first import loads what it writes with)
    (short, short_bytes), (long, long_bytes) = peak(1000), peak(4000)
    extra = long_bytes - short_bytes
    assert long - short < extra / 20, (short, long, extra)


def test_a_bad_record_part_way_leaves_the_import_file_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from whileai.cli import main

    log = tmp_path / "samples_arith_2026-11-30T10-00-00.000000.jsonl"
    good = (SAMPLES / log.name).read_text().splitlines()
    log.write_text("\n".join([*good, '{"doc_id": 9, "resps": [["a"]], "acc": 7}']) + "\n")
    out = tmp_path / "rows.jsonl"
    out.write_text("yesterday's rows\n")
    assert main(["import", str(log), "--output", str(out)]) == 2
    assert f"line {len(good) + 1} acc: score 7 is not a reward" in capsys.readouterr().err
    assert out.read_text() == "yesterday's rows\n"


def test_the_loading_page_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import re

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "loading.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    monkeypatch.chdir(root)
    exec(compile(block, "docs/loading.md", "exec"), {})
    assert "pass@1" in capsys.readouterr().out
