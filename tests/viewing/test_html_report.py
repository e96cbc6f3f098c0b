"""``wai.html_report`` and ``whileai view``: one self-contained page per run, every section,
the numbers the measurements give, nothing privileged, and clear errors for bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import whileai as wai
from whileai.cli import main
from whileai.schema.files import sidecar_path

pytestmark = pytest.mark.plugins

SECTIONS = (
    "summary",
    "knobs",
    "pass-at-k",
    "by-arm",
    "by-dimension",
    "faults",
    "markers",
    "judge",
    "transcripts",
)


def sections_of(page: str) -> list[str]:
    return re.findall(r"<section id='([^']+)'", page)


def test_a_run_file_becomes_one_page_with_every_section(shop_runs: dict[str, Any]) -> None:
    rows_file = Path(shop_runs["on"].output)
    path = wai.html_report(rows_file)
    # beside the rows by default, named after them: another run in the folder keeps its own
    assert path == rows_file.with_name(rows_file.name.replace(".jsonl", ".report.html"))
    page = path.read_text(encoding="utf-8")
    assert sections_of(page) == list(SECTIONS)
    # the numbers are the measurements' own: pass@1 and its interval as pass_at gives them
    report = wai.pass_at(str(rows_file), repeat_policy="rl")
    assert f"{report.pass_at_1:.3f}" in page
    assert f"[{report.ci95[0]:.3f}, {report.ci95[1]:.3f}]" in page
    # knobs and provenance from the sidecar
    assert shop_runs["on"].metadata["run_id"] in page
    # the world as a person names it, the same under the title and in the table
    world = shop_runs["on"].metadata["world"]
    assert f"world {world['name']} {world['version']} · " in page
    assert f"<td>world</td><td>{world['name']} {world['version']}</td>" in page
    assert ">fault_rate<" in page and ">0.6<" in page
    # every rollout has a transcript, each with its verdict
    assert page.count("<details class='rollout") == len(shop_runs["on"].rows)
    assert page.count("<b>verdict</b>") == len(shop_runs["on"].rows)
    # rows carry arms (a bandit ran) and dimensions: one plot per dimension
    for arm in {r["arm"] for r in shop_runs["on"].rows}:
        assert f">{arm}<" in page
    assert "mean reward by intent" in page and "mean reward by tone" in page


def test_the_markers_are_measured_within_the_bounds_their_run_recorded(
    shop_runs: dict[str, Any], tmp_path: Path
) -> None:
    # the built-in markers declare their bounds; the page's intervals are marker_summary's on
    # the same file, a count's never below 0
    rows_file = Path(shop_runs["on"].output)
    recorded = shop_runs["on"].metadata["marker_bounds"]
    assert recorded["tool_errors"] == [0.0, None] and recorded["refusal"] == [0.0, 1.0]
    page = wai.html_report(rows_file, tmp_path / "page.html").read_text(encoding="utf-8")
    markers = page[page.index("<section id='markers'") : page.index("<section id='judge'")]
    for name, line in wai.marker_summary(str(rows_file)).metrics.items():
        assert line.ci95 is None or line.ci95[0] >= 0, name
        if line.ci95 is not None:
            assert f"[{line.ci95[0]:.3f}, {line.ci95[1]:.3f}]" in markers, name


def test_two_runs_in_one_folder_keep_a_page_each(shop_runs: dict[str, Any], tmp_path: Path) -> None:
    # runs/first.jsonl and runs/second.jsonl, as the README's examples lay runs out
    pages = {}
    for name in ("off", "on"):
        rows = Path(shop_runs[name].output)
        for part in (rows, sidecar_path(rows)):
            shutil.copy(part, tmp_path / part.name.replace("rows", name))
        pages[name] = wai.html_report(tmp_path / f"{name}.jsonl")
    assert pages == {"off": tmp_path / "off.report.html", "on": tmp_path / "on.report.html"}
    for name, page in pages.items():
        assert shop_runs[name].metadata["run_id"] in page.read_text(encoding="utf-8")


def test_the_page_fetches_nothing(shop_runs: dict[str, Any], tmp_path: Path) -> None:
    page = wai.html_report(shop_runs["on"], tmp_path / "r.html").read_text(encoding="utf-8")
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=", page)
    assert "url(" not in page and "@import" not in page
    # the only address on the page is the SVG namespace (a name, never fetched)
    addresses = set(re.findall(r"https?://[^\s'\"<>]+", page))
    assert addresses <= {"http://www.w3.org/2000/svg"}
    assert "default-src 'none'" in page  # and the browser is told so


def test_fault_kinds_against_outcome_count_every_rollout(shop_runs: dict[str, Any]) -> None:
    rows = shop_runs["on"].rows
    page = wai.html_report(rows, shop_runs["root"] / "faults.html").read_text(encoding="utf-8")
    faults = page[page.index("<section id='faults'") : page.index("<section id='markers'")]
    for kind in {f["kind"] for r in rows for f in r["faults"]}:
        met = sum(1 for r in rows if any(f["kind"] == kind for f in r["faults"]))
        assert f"<td>{kind}</td><td class='num'>{met}</td>" in faults
    clean = sum(1 for r in rows if not r["faults"])
    assert f"<td>no fault</td><td class='num'>{clean}</td>" in faults


def rerun(rows: list[dict[str, Any]], flip: int) -> list[dict[str, Any]]:
    """The baseline as a re-run might score it: the ``flip``th task's first reward flipped."""
    out = [dict(r) for r in rows]
    tasks = sorted({r["task_id"] for r in out})
    if flip < len(tasks):
        first = next(r for r in out if r["task_id"] == tasks[flip] and r["reward"] is not None)
        first["reward"] = 1.0 - first["reward"]
    return out


def test_a_run_of_two_repeats_says_why_its_curve_is_pass_at_1_alone(tmp_path: Path) -> None:
    rows = wai.rows(
        ["What is 2 + 3?", "What is 7 * 6?"], [["5", "4"], ["42", "42"]], [[1, 0], [1, 1]]
    )
    page = wai.html_report(rows, tmp_path / "two.html").read_text(encoding="utf-8")
    section = page[page.index("<section id='pass-at-k'") : page.index("<section id='by-arm'")]
    assert (
        "the largest group has 2 attempts: for k&gt;1 only tasks with at least 4 count, so the "
        "curve is pass@1 alone (run 4 or more repeats for the rest)"
    ) in section


def test_judge_agreement_and_its_confusion_show_where_rows_carry_gold(
    shop_runs: dict[str, Any], tmp_path: Path
) -> None:
    rows = [dict(r) for r in shop_runs["on"].rows if r["reward"] is not None]
    for i, row in enumerate(rows):  # a gold label that disagrees with the judge on every 5th
        row["gold_reward"] = 1.0 - row["reward"] if i % 5 == 0 else row["reward"]
    page = wai.html_report(rows, tmp_path / "gold.html").read_text(encoding="utf-8")
    judge = page[page.index("<section id='judge'") : page.index("<section id='transcripts'")]
    expected = wai.judge_agreement(rows)
    count, share, ci = expected.agreement.cells()
    assert f"<td>agreement</td><td class='num'>{count}</td><td class='num'>{share}</td>" in judge
    assert ci in judge
    (pp, pf), (fp, ff) = expected.confusion.as_table()
    assert f"<th>judge pass</th><td>{pp}</td><td>{pf}</td>" in judge
    assert f"<th>judge fail</th><td>{fp}</td><td>{ff}</td>" in judge
    assert pf + fp == len(range(0, len(rows), 5))


def test_a_comparison_adds_a_forest_plot_with_the_noise_band(
    shop_runs: dict[str, Any], tmp_path: Path
) -> None:
    off, on = shop_runs["off"], shop_runs["on"]
    # three re-runs of the baseline that differ a little: a run-to-run spread above 0
    floor = [rerun(list(off.rows), flip) for flip in (0, 1, 9)]
    path = wai.html_report(
        on.output, tmp_path / "cmp.html", baseline=off.output, floor=floor, proxy="reward"
    )
    page = path.read_text(encoding="utf-8")
    assert sections_of(page) == [*SECTIONS[:-1], "compare", "transcripts"]
    expected = wai.compare_runs(
        off.rows,
        on.rows,
        proxy="reward",
        run_std=wai.eval_variance(*floor).run_std,
        run_std_runs=3,
    )
    compare = page[page.index("<section id='compare'") :]
    assert f"Headline (reward): {expected.delta:+.3f}" in compare
    assert expected.noise_band is not None and expected.noise_band > 0
    assert f"noise band +/-{expected.noise_band:.3f}" in compare
    assert compare.count("<title>noise band") == 1  # shaded on the headline's row only
    faults = expected.metrics["faults_met"]
    assert f"{faults.delta:+.3f} [{faults.ci95[0]:+.3f}, {faults.ci95[1]:+.3f}]" in compare


def test_nothing_privileged_reaches_the_page(shop_runs: dict[str, Any], tmp_path: Path) -> None:
    run = shop_runs["on"]
    assert all(t.get("privileged") for t in run.trajectories)  # in memory, the answer key
    planted = [dict(t) for t in run.trajectories]
    planted[0]["privileged"] = {**planted[0]["privileged"], "reference": "GOLD-7741-KEY"}
    from_memory = wai.html_report(planted, tmp_path / "memory.html").read_text(encoding="utf-8")
    assert "privileged" not in from_memory and "GOLD-7741-KEY" not in from_memory
    assert "hidden_state" not in from_memory
    # the page built from the trajectories is the page built from the exported rows: nothing
    # the rows file would not hold reaches it
    exported = wai.html_report(list(run.rows), tmp_path / "rows.html").read_text(encoding="utf-8")
    assert from_memory == exported


def test_text_from_the_rollout_is_escaped(shop_runs: dict[str, Any], tmp_path: Path) -> None:
    row = dict(shop_runs["on"].rows[0])
    row["final_text"] = "<script>alert('x')</script>"
    row["steps"] = [{"role": "assistant", "content": "<img src=x onerror=alert(1)>"}]
    page = wai.html_report([row], tmp_path / "e.html").read_text(encoding="utf-8")
    assert "<img src=x" not in page and "alert(1)" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_transcripts_beyond_the_limit_are_said_not_dropped(
    shop_runs: dict[str, Any], tmp_path: Path
) -> None:
    rows = shop_runs["on"].rows
    page = wai.html_report(rows, tmp_path / "l.html", max_transcripts=5).read_text(encoding="utf-8")
    assert page.count("<details class='rollout") == 5
    assert f"{len(rows) - 5} more rollouts are not shown here (max_transcripts=5)" in page


def test_bad_input_is_refused_naming_the_argument(
    shop_runs: dict[str, Any], tmp_path: Path
) -> None:
    rows = shop_runs["on"].rows
    with pytest.raises(ValueError, match="holds no rows"):
        wai.html_report([], tmp_path / "x.html")
    with pytest.raises(ValueError, match="max_transcripts must be 0 or more"):
        wai.html_report(rows, tmp_path / "x.html", max_transcripts=-1)
    with pytest.raises(TypeError, match="max_transcripts must be a whole number"):
        wai.html_report(rows, tmp_path / "x.html", max_transcripts=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="floor= needs baseline="):
        wai.html_report(rows, tmp_path / "x.html", floor=[rows, rows, rows])
    with pytest.raises(ValueError, match="three or more re-runs"):
        wai.html_report(rows, tmp_path / "x.html", baseline=rows, floor=[rows])
    with pytest.raises(TypeError, match="run must be a list of rows"):
        wai.html_report(42, tmp_path / "x.html")
    assert not (tmp_path / "x.html").exists()


def test_view_writes_the_page_and_prints_its_path(
    shop_runs: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    on, off = shop_runs["on"].output, shop_runs["off"].output
    out = tmp_path / "view.html"
    assert main(["view", on, "--baseline", off, "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert "<section id='compare'" in out.read_text(encoding="utf-8")
    assert main(["view", on, "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"path": str(out.resolve())}
    # misuse: one line on stderr, exit 2
    for argv, said in (
        (["view", str(tmp_path / "none.jsonl")], "no such rows file"),
        (["view", on, "--floor", off, off, off], "--floor needs --baseline"),
        (["view", on, "--baseline", off, "--floor", off], "three or more runs"),
        (["view", on, "--max-transcripts", "-3"], "--max-transcripts must be 0 or more"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1


def test_every_parameter_is_in_the_docs_table_with_its_default() -> None:
    import ast
    import inspect

    page = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text()
    table = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", page, re.MULTILINE))
    signature = inspect.signature(wai.html_report).parameters
    assert sorted(table) == sorted(signature)
    for name, parameter in signature.items():
        written = table[name].strip().strip("`")
        if parameter.default is inspect.Parameter.empty:
            assert written == "(required)", name
        else:
            assert ast.literal_eval(written) == parameter.default, name


def test_the_page_of_a_long_run_reads_its_rows_a_row_at_a_time(tmp_path: Path) -> None:
    # a run of a million rollouts must make its page: the page may not hold the run's rows
    import tracemalloc

    from long_runs import long_run

    def run_file(name: str, padding: int) -> Path:
        # arms, dimensions and gold labels too: every section reads the rows
        return long_run(
            tmp_path / f"{name}.jsonl",
            padding,
            lambda s, i: {
                "task_id": f"s{s}",
                "arm": f"arm{i % 3}",
                "scenario_dimensions": {"tone": ["calm", "angry"][s % 2], "size": s % 3},
                "markers": {"tool_errors": i % 2, "turns": i % 4},
                "gold_reward": float(i % 4 == 0),
            },
        )

    def page_peak(path: Path) -> tuple[str, int]:
        tracemalloc.start()
        try:
            out = wai.html_report(path, tmp_path / "page.html", baseline=path, max_transcripts=3)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return out.read_text(encoding="utf-8"), peak

    short, long = run_file("short", 10), run_file("long", 600)
    wai.html_report(short, tmp_path / "warm.html")  # (the first page imports what it draws with)
    page, short_peak = page_peak(short)
    # every section is there, from the same numbers the rows in memory give
    assert sections_of(page) == [*SECTIONS[:-1], "compare", "transcripts"]
    held = [json.loads(line) for line in short.read_text().splitlines()]
    in_memory = wai.html_report(held, tmp_path / "held.html", baseline=held, max_transcripts=3)
    # the same page but for what names the run: its path, or "2400 rows"
    named = in_memory.read_text(encoding="utf-8").replace("2400 rows</", f"{short}</")
    assert page == named
    assert f"{wai.pass_at(held).pass_at_1:.3f}" in page
    long_peak = page_peak(long)[1]
    # rows 60 times as long: held in a list, the extra bytes would cost more than themselves;
    # read a row at a time, next to nothing
    extra = long.stat().st_size - short.stat().st_size
    assert long_peak - short_peak < extra / 20, (short_peak, long_peak, extra)


def test_a_group_whose_judge_failed_on_every_row_reads_unjudged(tmp_path: Path) -> None:
    rows = [
        {
            "prompt": "p",
            "final_text": "x",
            "scenario_id": f"s{i}",
            "arm": "broken" if i < 3 else "fine",
            "reward": 0.0,
            # the judge of the first arm errored: its rewards are no verdict
            "judge_status": "error" if i < 3 else "ok",
        }
        for i in range(6)
    ]
    page = wai.html_report(rows, tmp_path / "p.html").read_text(encoding="utf-8")
    arms = page[page.index("<section id='by-arm'") : page.index("<section id='by-dimension'")]
    assert "unjudged (3 rows)" in arms
