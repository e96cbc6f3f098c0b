"""The ``whileai`` command as a user drives it: a run from a TOML config, its report, a
compare against a noise floor, machine-readable output, exit codes and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import whileai as wai
from whileai.cli import main
from whileai.schema.files import sidecar_path

pytestmark = pytest.mark.plugins

HERE = Path(__file__).parent

CONFIG = """
plugins = ["cli_doubles:Doubles"]
agent_model = "{agent}"
user_model = "customer"
simulator = "template"
unique = 6
repeats = 2
seed = {seed}
fault_rate = 0.0
hard_share = 0.0
strategy = "grid"
output = "{output}"

[dimensions]
intent = ["refund", "track", "address_change"]
difficulty = ["easy"]
tone = ["polite", "angry"]

[advanced]
world = "shop"
"""


@pytest.fixture(autouse=True)
def doubles_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("whileai_worlds")
    monkeypatch.syspath_prepend(str(HERE))


def config(tmp_path: Path, name: str, agent: str = "support", seed: int = 3) -> Path:
    path = tmp_path / f"{name}.toml"
    output = tmp_path / f"{name}.jsonl"
    path.write_text(CONFIG.format(agent=agent, seed=seed, output=output))
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def rows_file(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` written to ``path`` a JSON line each, as a rows file holds them."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_run_writes_the_rows_and_prints_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "run", str(config(tmp_path, "first")))
    assert code == 0, err
    assert "pass@1" in out and "12 rows in" in out
    rows = (tmp_path / "first.jsonl").read_text().splitlines()
    assert len(rows) == 12
    assert (tmp_path / "first.meta.json").exists()


def test_json_output_is_json_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "run", str(config(tmp_path, "quiet")), "--json")
    assert code == 0
    made = json.loads(out)
    assert made["rows"] == 12 and made["errored"] == 0
    assert made["reports"][0]["pass_at"]["pass_at_1"] == 1.0
    code, out, _ = cli(capsys, "report", str(tmp_path / "quiet.jsonl"), "--json")
    summary = json.loads(out)
    assert code == 0 and summary["rows"] == 12
    assert summary["provenance"]["world"]["name"] == "shop"
    code, out, _ = cli(capsys, "report", str(tmp_path / "quiet.jsonl"))
    version = summary["provenance"]["world"]["version"]
    assert code == 0 and f"\n  world             shop {version}\n" in out
    assert summary["pass_at"]["ci95"] is not None
    code, out, _ = cli(capsys, "plugins", "--json")
    assert code == 0 and any(p["name"] == "shop" for p in json.loads(out)["plugins"])


def test_the_errored_rollouts_and_only_those_are_played_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import cli_doubles

    path = config(tmp_path, "flaky", agent="flaky")
    cli_doubles.FAILING["on"] = True
    try:
        code, out, _ = cli(capsys, "run", str(path))
    finally:
        cli_doubles.FAILING["on"] = False
    assert code == 1, "rows that ended in an error fail the command"
    assert "rows ended in an error: whileai run --retry-errors" in out
    before = [json.loads(x) for x in (tmp_path / "flaky.jsonl").read_text().splitlines()]
    errored = {r["lineage"]["rollout_key"] for r in before if r.get("error")}
    assert errored and len(errored) < len(before)
    code, out, _ = cli(capsys, "run", str(path), "--retry-errors", "--json")
    assert code == 0
    made = json.loads(out)
    assert made["retried"] == len(errored) and made["errored"] == 0
    after = [json.loads(x) for x in (tmp_path / "flaky.jsonl").read_text().splitlines()]
    assert len(after) == len(before) and not any(r.get("error") for r in after)
    # the rows that were fine were kept as they were, not played again
    kept = {r["lineage"]["rollout_key"]: r for r in before if not r.get("error")}
    assert all(
        kept[r["lineage"]["rollout_key"]] == r for r in after if r["lineage"]["rollout_key"] in kept
    )


def test_a_config_and_an_output_under_the_home_folder_are_found_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import cli_doubles

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    (home / "flaky.toml").write_text(
        config(tmp_path, "flaky", agent="flaky").read_text().replace(str(tmp_path), "~")
    )
    cli_doubles.FAILING["on"] = True
    try:
        assert cli(capsys, "run", "~/flaky.toml")[0] == 1  # quoted: no shell reads the ~
    finally:
        cli_doubles.FAILING["on"] = False
    rows = home / "flaky.jsonl"
    errored = sum(1 for line in rows.read_text().splitlines() if json.loads(line).get("error"))
    assert errored > 0
    code, out, _ = cli(capsys, "run", "~/flaky.toml", "--retry-errors", "--json")
    assert code == 0 and json.loads(out)["retried"] == errored
    # import reads the log's first record to tell its format: from the home folder too
    samples = HERE.parent / "importers" / "samples" / "tau_bench_results.json"
    (home / "tau.json").write_bytes(samples.read_bytes())
    code, out, err = cli(capsys, "import", "~/tau.json", "--output", "~/tau.jsonl", "--json")
    assert code == 0, err
    assert json.loads(out)["rows"] == 3 and (home / "tau.jsonl").is_file()
    assert not (tmp_path / "~").exists()


def test_taking_the_errored_rows_out_reads_a_long_run_a_row_at_a_time(tmp_path: Path) -> None:
    import tracemalloc

    from whileai.commands.run import drop_error_rows

    path = tmp_path / "long.jsonl"
    with path.open("w") as f:
        for i in range(3000):
            row = {"prompt": f"q{i}", "final_text": "x" * 2000, "lineage": {"rollout_key": f"k{i}"}}
            if i % 100 == 7:
                row["error"] = "timeout"
            f.write(json.dumps(row) + "\n")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        dropped = drop_error_rows(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert dropped == 30
    kept = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(kept) == 2970 and not any(r.get("error") for r in kept)
    assert [r["prompt"] for r in kept[:7]] == [f"q{i}" for i in range(7)]
    # the file held whole would be several times its size in memory
    assert peak < size / 10, (peak, size)


def test_the_report_of_a_long_run_reads_its_rows_a_row_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tracemalloc

    from long_runs import long_run

    from whileai.commands.report import summary
    from whileai.schema.files import read_jsonl

    def report_peak(path: Path) -> tuple[dict[str, Any], int]:
        tracemalloc.start()
        try:
            code, out, _ = cli(capsys, "report", str(path), "--json")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert code == 0
        made: dict[str, Any] = json.loads(out)
        expected = summary(read_jsonl(path).rows, {})[0]
        assert made == json.loads(json.dumps(expected, default=str))
        return made, peak

    short, long = long_run(tmp_path / "short.jsonl", 10), long_run(tmp_path / "long.jsonl", 600)
    cli(capsys, "report", str(short))  # (the first report imports what it prints with)
    made, short_peak = report_peak(short)
    assert made["rows"] == 2400 and made["faults"] == {"timeout": 480}
    long_peak = report_peak(long)[1]
    # the same report of rows 60 times as long: held in a list, the extra bytes would cost one
    # and a half times themselves; read a row at a time, next to nothing
    extra = long.stat().st_size - short.stat().st_size
    assert long_peak - short_peak < extra / 20, (short_peak, long_peak, extra)


def test_the_report_reads_the_rows_once_and_says_what_each_measurement_says(
    tmp_path: Path, walked: Any
) -> None:
    # counted, not timed: a file's rows are parsed on every walk, and the report walked them
    # once for its counts, once for pass_at and once for the markers
    from long_runs import long_run

    from whileai.commands.report import summary
    from whileai.measure import marker_summary, pass_at
    from whileai.schema.files import read_jsonl

    rows = read_jsonl(long_run(tmp_path / "run.jsonl", 1)).rows
    counted = walked(rows)
    made, passes, markers = summary(counted, {})
    assert counted.walks == 1
    assert made["pass_at"] == passes.to_dict() == pass_at(rows).to_dict()
    assert made["markers"] == markers.to_dict() == marker_summary(rows).to_dict()
    assert (made["rows"], made["errored"], made["faults"]) == (2400, 0, {"timeout": 480})


def test_compare_pairs_two_runs_and_reads_a_noise_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a", "b", "f1", "f2", "f3"):
        assert cli(capsys, "run", str(config(tmp_path, name)), "--json")[0] == 0
    code, out, _ = cli(
        capsys,
        "compare",
        str(tmp_path / "a.jsonl"),
        str(tmp_path / "b.jsonl"),
        "--floor",
        *(str(tmp_path / f"f{i}.jsonl") for i in (1, 2, 3)),
        "--json",
    )
    assert code == 0
    made: dict[str, Any] = json.loads(out)
    assert made["floor"]["n_runs"] == 3
    assert made["n_paired"] == 6
    code, out, _ = cli(capsys, "compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"))
    assert code == 0 and "compare_runs (b - a, paired by task)" in out


def test_misuse_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('agent_model = "support"\nrepeatz = 3\n')
    code, _, err = cli(capsys, "run", str(bad))
    assert code == 2
    assert err.count("\n") == 1
    assert "unknown keys 'repeatz' (did you mean 'repeats' or 'repeat_policy'?)" in err
    bad.write_text('agent_model = "support"\n')
    code, _, err = cli(capsys, "run", str(bad))
    assert code == 2 and "set output = " in err
    code, _, err = cli(capsys, "report", str(tmp_path / "nothing.jsonl"))
    assert code == 2 and "no such rows file" in err
    # the folder a run was written to, given for the run's rows file in it
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "rows.jsonl").write_text("")
    code, _, err = cli(capsys, "report", str(tmp_path / "runs"))
    assert code == 2 and err == (
        f"whileai report: {str(tmp_path / 'runs')!r} is a folder, not a file of rows: name the "
        "JSONL file itself (it holds rows.jsonl)\n"
    )
    bad.write_text('output = "x.jsonl"\nunique = -1\n')
    code, _, err = cli(capsys, "--debug", "run", str(bad))
    assert code == 2 and "Traceback" in err
    with pytest.raises(SystemExit) as exited:
        main(["run"])
    assert exited.value.code == 2


def test_help_shows_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "(default: 2)" in capsys.readouterr().out


def test_the_config_on_the_cli_page_is_one_the_command_accepts(tmp_path: Path) -> None:
    import re

    from whileai.commands.config import load_config

    page = (HERE.parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```toml\n(.*?)```", page, re.DOTALL)
    path = tmp_path / "support.toml"
    path.write_text(block)
    loaded = load_config(str(path))
    assert loaded["advanced"]["world"] == "bank" and loaded["repeats"] == 4


def test_grade_select_decontaminate_and_rank_take_a_rows_file_and_write_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("whileai_verifiers")
    answers = tmp_path / "answers.jsonl"
    groups = [("What is 2 + 3?", "5", ["5", "4", "5", "5"]), ("What is 7 * 6?", "42", ["42"] * 4)]
    answers.write_text(
        "".join(
            json.dumps(
                {"prompt": p, "privileged": {"reference": ref}, "final_text": a, "task_id": f"t{i}"}
            )
            + "\n"
            for i, (p, ref, said) in enumerate(groups)
            for a in said
        )
    )
    graded = tmp_path / "graded.jsonl"
    code, out, err = cli(
        capsys, "grade", str(answers), "--judge", "MathEqual", "--output", str(graded), "--json"
    )
    assert code == 0, err
    rewards = [json.loads(x)["reward"] for x in graded.read_text().splitlines()]
    assert rewards == [1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert json.loads(out)["rows"] == 8

    kept = tmp_path / "kept.jsonl"
    code, out, _ = cli(capsys, "select", str(graded), "--output", str(kept), "--json")
    assert code == 0
    # only the group that split (3 of 4) carries a gradient
    assert {json.loads(x)["task_id"] for x in kept.read_text().splitlines()} == {"t0"}
    selected = json.loads(out)
    assert selected["report"]["n_groups_kept"] == 1 and selected["rows"] == 4
    # the kept rows are in the file, not repeated on stdout
    assert "rows" not in selected["report"]
    # the modes offered are those select() takes
    with pytest.raises(SystemExit) as refused:
        cli(capsys, "select", str(graded), "--output", str(kept), "--mode", "eval")
    assert refused.value.code == 2 and "invalid choice: 'eval'" in capsys.readouterr().err

    benchmark = tmp_path / "benchmark.txt"
    benchmark.write_text("What is 7 * 6?\n")
    clean = tmp_path / "clean.jsonl"
    code, out, _ = cli(
        capsys,
        "decontaminate",
        str(graded),
        "--against",
        str(benchmark),
        "-n",
        "3",
        "--output",
        str(clean),
        "--json",
    )
    assert code == 0
    assert {json.loads(x)["task_id"] for x in clean.read_text().splitlines()} == {"t0"}
    cleaned = json.loads(out)["report"]
    assert cleaned["n_contaminated"] == 4 and "clean" not in cleaned
    # the contaminated rows are named by their place in the input (a large run's would repeat
    # much of the file on stdout), with what each matched
    assert "contaminated" not in cleaned
    given = graded.read_text().splitlines()
    assert [json.loads(given[i])["task_id"] for i in cleaned["contaminated_indices"]] == ["t1"] * 4
    assert sorted(cleaned["matches"]) == [str(i) for i in cleaned["contaminated_indices"]]

    code, _, err = cli(
        capsys, "grade", str(answers), "--judge", "NoSuchJudge", "--output", str(graded)
    )
    assert code == 2 and err.count("\n") == 1 and "NoSuchJudge" in err
    # options argparse takes but the call refuses are misuse too: one line, exit 2
    code, _, err = cli(capsys, "select", str(graded), "--output", str(kept), "--band", "0.9", "0.1")
    assert (code, err) == (
        2,
        "whileai select: band must be (low, high) with low <= high, got (0.9, 0.1)\n",
    )
    argv = ["decontaminate", str(graded), "--against", str(benchmark), "-n", "0"]
    code, _, err = cli(capsys, *argv, "--output", str(clean))
    assert (code, err) == (2, "whileai decontaminate: n must be a whole number >= 1, got 0\n")


def test_report_measures_a_count_within_the_bounds_its_run_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    errors = {"a": [0, 0, 0, 0], "b": [0, 1, 0, 0], "c": [1, 0, 2, 1]}
    run = rows_file(
        tmp_path / "run.jsonl",
        [
            {"task_id": t, "prompt": t, "final_text": "a", "reward": 1.0, "markers": {"errs": n}}
            for t, counts in errors.items()
            for n in counts
        ],
    )
    sidecar = {"metadata": {"marker_bounds": {"errs": [0, None]}}, "complete": True}
    sidecar_path(run).write_text(json.dumps(sidecar))
    code, out, _ = cli(capsys, "report", str(run), "--json")
    assert code == 0
    low, high = json.loads(out)["markers"]["metrics"]["errs"]["ci95"]
    # Student's t on three tasks alone reaches below 0; a count's mean cannot
    assert low == 0.0 and high == pytest.approx(wai.marker_summary(run).metrics["errs"].ci95[1])


def test_report_of_a_run_still_going_says_so_and_of_a_killed_one_how_to_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "run", str(config(tmp_path, "going")))[0] == 0
    rows, side = tmp_path / "going.jsonl", tmp_path / "going.meta.json"
    side.write_text(json.dumps({**json.loads(side.read_text()), "complete": False}))
    # a run part way: its process alive, its pid in the lock file beside the output
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "going.jsonl.lock").write_text(str(writer.pid))
        code, out, _ = cli(capsys, "report", str(rows))
        assert code == 0
        assert (
            f"(the run is still going: process {writer.pid} is writing it; these are its rows "
            "so far)"
        ) in out
        code, out, _ = cli(capsys, "report", str(rows), "--json")
        assert json.loads(out)["writer_pid"] == writer.pid
    finally:
        writer.kill()
        writer.wait()
    # killed: the lock file names a process that is gone
    code, out, _ = cli(capsys, "report", str(rows))
    assert "(the run did not finish: the same simulate() call with resume=True" in out
    assert "still going" not in out


def test_a_rows_file_with_no_rows_yet_is_named_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a run that has not finished its first rollout: its file is empty, its sidecar unfinished
    rows = tmp_path / "live.jsonl"
    rows.write_text("")
    code, _, err = cli(capsys, "report", str(rows))
    assert code == 2
    assert err == f"whileai report: {rows}: holds no rows, so there is nothing to measure\n"
    (tmp_path / "live.meta.json").write_text(json.dumps({"complete": False}))
    code, _, err = cli(capsys, "compare", str(rows), str(rows))
    assert code == 2 and err.endswith(
        "nothing to measure; its run has not finished a rollout yet (its sidecar says it is "
        "unfinished)\n"
    )
    # training data from no rows is no training data, as a pipeline step may make
    code, _, _ = cli(capsys, "export", str(rows), "--output", str(tmp_path / "none.jsonl"))
    assert code == 0 and (tmp_path / "none.jsonl").read_text() == ""


def test_grade_exits_1_when_the_judge_could_not_grade_a_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the second answer has no reference: MathEqual cannot grade it, and a script must see so
    pytest.importorskip("whileai_verifiers")
    answers = rows_file(
        tmp_path / "answers.jsonl",
        [
            {"prompt": "2 + 3?", "privileged": {"reference": "5"}, "final_text": "5"},
            {"prompt": "7 * 6?", "final_text": "42"},
        ],
    )
    graded = tmp_path / "graded.jsonl"
    code, out, _ = cli(
        capsys, "grade", str(answers), "--judge", "MathEqual", "--output", str(graded)
    )
    assert code == 1
    assert out.endswith(
        "\n2 rows in " + str(graded) + "\n1 row the judge could not grade (judge_status error, "
        "reward None; each row's reason says why)\n"
    )
    written = [json.loads(x) for x in graded.read_text().splitlines()]
    assert [(r["reward"], r["judge_status"]) for r in written] == [(1.0, "ok"), (None, "error")]
    code, out, _ = cli(
        capsys, "grade", str(answers), "--judge", "MathEqual", "--output", str(graded), "--json"
    )
    assert code == 1 and json.loads(out)["report"]["n_errors"] == 1


def test_grade_stopped_by_a_full_disk_goes_on_with_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("whileai_verifiers")
    answers = rows_file(
        tmp_path / "answers.jsonl",
        [
            {
                "prompt": f"What is {i} + 1? " + "Think it through. " * 20,
                "privileged": {"reference": str(i + 1)},
                "final_text": str(i + 1 if i % 3 else i),
                "task_id": f"t{i}",
            }
            for i in range(120)
        ],
    )
    graded = tmp_path / "graded.jsonl"
    argv = ["grade", str(answers), "--judge", "MathEqual", "--output", str(graded)]
    # a file size limit stands in for a full disk part way through
    full = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, signal, sys\n"
            "from whileai.cli import main\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))\n"
            "sys.exit(main(sys.argv[1:]))\n",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert full.returncode == 1 and "File too large" in full.stderr
    assert not graded.exists()
    # the same command again is told of the rows kept, and how to go on
    code, _, err = cli(capsys, *argv)
    assert code == 1 and "--resume" in err and "graded rows in" in err
    code, out, err = cli(capsys, *argv, "--resume")
    assert code == 0, err
    assert "went on after the" in out
    rewards = [json.loads(x)["reward"] for x in graded.read_text().splitlines()]
    assert rewards == [0.0 if i % 3 == 0 else 1.0 for i in range(120)]


def test_decontaminate_reads_a_benchmarks_records_on_the_field_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = Path(__file__).parents[2] / "recipes/02-measure/public-benchmark/gsm8k_test_200.jsonl"
    question = json.loads(shipped.read_text().splitlines()[7])["question"]
    run = tmp_path / "run.jsonl"
    run.write_text(
        "".join(
            json.dumps({"prompt": p, "final_text": "42", "task_id": f"t{i}"}) + "\n"
            for i, p in enumerate([question, "How many goats are in the field at noon today?"])
        )
    )
    clean = tmp_path / "clean.jsonl"
    argv = ["decontaminate", str(run), "--against", str(shipped), "--output", str(clean)]
    # GSM8K's records hold their text in "question": the rows' field is not there
    code, _, err = cli(capsys, *argv)
    assert code == 2 and err.count("\n") == 1
    assert "gsm8k_test_200.jsonl, line 1: no text in field 'prompt' (its fields: answer, " in err
    assert "--against-field names the field" in err
    code, out, _ = cli(capsys, *argv, "--against-field", "question", "--json")
    assert code == 0
    report = json.loads(out)["report"]
    assert report["contaminated_indices"] == [0]
    assert report["per_source"] == {"gsm8k_test_200.jsonl": 1}
    assert [json.loads(x)["task_id"] for x in clean.read_text().splitlines()] == ["t1"]


def test_rank_adds_quality_within_each_task_with_a_plugin_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.jsonl"
    replies = ["ok", "a longer reply", "the longest reply of the three"]
    rows.write_text(
        "".join(
            json.dumps({"prompt": "Say something.", "final_text": r, "task_id": "t"}) + "\n"
            for r in replies
        )
    )
    ranked = tmp_path / "ranked.jsonl"
    code, out, err = cli(
        capsys,
        "--plugin",
        "cli_doubles:Doubles",
        "rank",
        str(rows),
        "--judge",
        "longer",
        "--output",
        str(ranked),
        "--json",
    )
    assert code == 0, err
    quality = [json.loads(x)["quality"] for x in ranked.read_text().splitlines()]
    assert quality == sorted(quality) and quality[0] < quality[-1]
    assert "report" in json.loads(out)


def test_import_turns_another_tools_log_into_a_rows_file_report_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = HERE.parent / "importers" / "samples" / "tau_bench_results.json"
    out = tmp_path / "tau.jsonl"
    code, printed, err = cli(capsys, "import", str(samples), "--output", str(out), "--json")
    assert code == 0, err
    assert json.loads(printed) == {"format": "tau_bench", "rows": 3, "tasks": 2, "output": str(out)}
    code, printed, _ = cli(capsys, "report", str(out), "--json")
    assert code == 0 and json.loads(printed)["pass_at"]["pass_at_1"] == 0.75
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"foo": 1}\n')
    code, _, err = cli(capsys, "import", str(odd), "--output", str(out))
    assert code == 2 and "not a file wai.load reads" in err
    # a folder of logs is named with what is in it
    code, _, err = cli(capsys, "import", str(tmp_path), "--output", str(out))
    assert code == 2
    assert err.startswith(f"whileai import: {str(tmp_path)!r} is a folder, not a log: name one")
    assert "(it holds 2 logs, newest first: " in err


def test_a_rows_file_cut_by_a_kill_is_named_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path, "killed")
    assert cli(capsys, "run", str(path))[0] == 0
    rows = tmp_path / "killed.jsonl"
    whole = rows.read_bytes()
    # the run killed while it wrote its last row: half of that line, no newline after it
    last = whole.rstrip(b"\n").rsplit(b"\n", 1)[1]
    rows.write_bytes(whole[: len(whole) - len(last) // 2 - 1])
    code, _, err = cli(capsys, "report", str(rows))
    assert code != 0
    assert "killed.jsonl, line 12: not valid JSON" in err
    assert "no newline ends it" in err and "whileai run --resume" in err
    code, out, _ = cli(capsys, "run", str(path), "--resume", "--json")
    assert code == 0 and json.loads(out)["rows"] == 12
    assert rows.read_bytes().count(b"\n") == 12
    assert cli(capsys, "report", str(rows))[0] == 0


def test_a_bad_row_is_named_by_its_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "bad.jsonl"
    good = {"prompt": "2+2?", "final_text": "4", "reward": 1.0}
    rows.write_text(
        json.dumps(good) + "\n\n" + json.dumps({"final_text": "5", "reward": 0.0}) + "\n"
    )
    code, _, err = cli(capsys, "report", str(rows))
    assert code != 0
    assert f"{rows}, line 3: missing required field 'prompt'" in err
    rows.write_text(json.dumps({**good, "reward": 2}) + "\n")
    code, _, err = cli(capsys, "report", str(rows))
    assert code != 0 and f"{rows}, line 1: reward is 2, outside [0, 1]" in err


def test_a_broken_sidecar_is_named_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "run.jsonl"
    rows.write_text(json.dumps({"prompt": "2+2?", "final_text": "4", "reward": 1.0}) + "\n")
    side = tmp_path / "run.meta.json"
    side.write_text('{"run_id": ')
    code, _, err = cli(capsys, "report", str(rows))
    assert code != 0
    assert f"{side} is not a readable whileai run sidecar" in err and "remove it" in err


def test_export_writes_a_rows_file_as_training_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import whileai as wai

    run = tmp_path / "run.jsonl"
    rows = [
        {
            "prompt": f"What is {t} + {t}?",
            "final_text": str(2 * t + r % 2),
            "task_id": f"t{t}",
            "reward": float(r % 2 == 0),
            "lineage": {"rollout_key": f"t{t}/{r}"},
            "privileged": {"reference": str(2 * t)},
        }
        for r in range(4)
        for t in range(3)
    ]
    run.write_text("".join(json.dumps(r) + "\n" for r in rows))

    groups = tmp_path / "groups.jsonl"
    code, out, err = cli(capsys, "export", str(run), "--shape", "grpo", "--output", str(groups))
    assert code == 0, err
    assert out.strip() == f"3 grpo records (jsonl) in {groups}"
    written = [json.loads(line) for line in groups.read_text().splitlines()]
    assert written == wai.export(rows, shape="grpo")
    assert written[0]["rewards"] == [1.0, 0.0, 1.0, 0.0]
    assert '"reference"' not in groups.read_text()  # the answer key stays out

    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    prompts = tmp_path / "prompts.parquet"
    code, out, _ = cli(
        capsys, "export", str(run), "--output", str(prompts), "--conversational", "--json"
    )
    assert code == 0
    said = json.loads(out)
    assert said == {"output": str(prompts), "records": 3, "shape": "trl", "format": "parquet"}
    table = pq.read_table(prompts).to_pylist()
    assert table[0] == {"prompt": [{"role": "user", "content": "What is 0 + 0?"}], "task_id": "t0"}

    # said in one line: a missing file is misuse (2), a row that is not a row a failure (1)
    code, _, err = cli(capsys, "export", str(tmp_path / "none.jsonl"), "--output", str(groups))
    assert code == 2 and "none.jsonl" in err
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"final_text": "x", "prompt": 3}) + "\n")
    code, _, err = cli(capsys, "export", str(broken), "--output", str(groups))
    assert code == 1 and err.count("\n") == 1 and "broken.jsonl, line 1" in err
    assert len(groups.read_text().splitlines()) == 3  # left as it was


def stopped_part_way(tmp_path: Path, name: str, interrupt: Any, **popen: Any) -> Any:
    """``whileai run`` of a slow run in a process of its own, sent SIGTERM once two rows are
    on disk: how it ended."""
    import os
    import signal
    import sys

    out = tmp_path / f"{name}.jsonl"
    return interrupt(
        [sys.executable, "-m", "whileai.cli", "run", str(config(tmp_path, name, "slow-support"))],
        lambda: out.exists() and out.read_bytes().count(b"\n") >= 2,
        signal.SIGTERM,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        },
        **popen,
    )


def test_sigterm_stops_a_run_as_ctrl_c_does_and_it_resumes(tmp_path: Path, interrupt: Any) -> None:
    # a scheduler preempting the job sends SIGTERM: the run says what is on disk and how to
    # go on, and its sidecar says it did not finish
    stopped = stopped_part_way(tmp_path, "preempted", interrupt)
    out = tmp_path / "preempted.jsonl"
    assert stopped.returncode == 1
    on_disk = len(out.read_bytes().splitlines())
    assert 2 <= on_disk < 12 and out.read_bytes().endswith(b"\n")
    assert stopped.stderr.splitlines()[-2:] == [
        f"whileai: stopped at {on_disk}/12 rollouts: the {on_disk} finished are in "
        f"output={str(out)!r}; the same simulate() call with resume=True, or whileai run "
        "CONFIG.toml --resume, continues it with the rest",
        "whileai run: interrupted",
    ]
    assert json.loads(out.with_suffix(".meta.json").read_text())["complete"] is False
    assert main(["run", str(tmp_path / "preempted.toml"), "--resume"]) == 0
    keys = [json.loads(line)["lineage"]["rollout_key"] for line in out.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 12


def test_sigterm_still_ends_a_run_started_with_ctrl_c_ignored(
    tmp_path: Path, interrupt: Any
) -> None:
    # a script's background job (nohup, `cmd &`) starts with SIGINT ignored: SIGTERM must not
    # be handed on to a signal that is dropped
    import signal

    stopped = stopped_part_way(
        tmp_path,
        "background",
        interrupt,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert stopped.returncode == -signal.SIGTERM
    sidecar = json.loads((tmp_path / "background.meta.json").read_text())
    assert sidecar["complete"] is False
