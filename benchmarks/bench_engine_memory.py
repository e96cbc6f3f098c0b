"""Engine memory: peak RSS growth of a single-turn shop run writing ``output=``, at 10,000,
100,000 and 1,000,000 rollouts.

    python3 dev.py bench bench_engine_memory            # 10k, 100k, 1M rollouts
    python3 dev.py bench bench_engine_memory --quick    # 2k, 10k

Each size runs in a fresh process: it imports whileai, warms up with a small run, reads its
resident set (``/proc/self/statm``), runs ``simulate()`` and reads the peak (``VmHWM`` in
``/proc/self/status``). The growth is peak minus start. Target: under 200 MiB at every size.

The rollouts grow with the repeats over a fixed 2,500 situations (4, 40, 400 repeats): what a
run keeps per situation (its plan, its privileged block, one entry in the report's per-group
table) is not per rollout. A second table, labelled, holds the repeats at 4 and grows the
situations instead, to show what a situation costs.

A labelled line resumes the largest run after cutting its file three quarters of the way
through, mid-line, as a kill leaves it: the resume's peak RSS growth, and a check that every
rollout is on disk once. Others run ``whileai report``, ``view``, ``grade`` and ``export``
(GRPO groups) on that file, each in a process of its own: the peak RSS growth of reading a
million rows back (and, for grade and export, writing what they make of them).

Before the table is printed, the smallest size's rows on disk are checked against the same
run held in memory (``data.rows`` without ``output=``): the same rows, every one.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
TARGET_MIB = 200
SITUATIONS = 2500


def rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def rss_peak() -> int:
    """This process's peak resident set (VmHWM). Not ``ru_maxrss``: Linux carries that over
    from the parent through fork and exec, so a child of a large parent reports the parent's."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def simulate(situations: int, repeats: int, output: str | None, resume: bool = False) -> Any:
    from bench_engine_overhead import shop_registry

    import whileai as wai

    return wai.simulate(
        # the engine-overhead benchmark's shop doubles: the scripted agent, the pleased user
        registry=shop_registry(),
        agent_model="support:scripted",
        user_model="customer:pleased",
        simulator="template",
        unique=situations,
        repeats=repeats,
        max_turns=1,
        fault_rate=0.2,
        seed=5,
        output=output,
        resume=resume,
        advanced={"max_concurrency": 64},
    )


def child(situations: int, repeats: int, output: str, resume: bool = False) -> None:
    """One measured run in this process (``resume``: of the killed run in ``output``); prints
    a JSON line."""
    with tempfile.TemporaryDirectory() as warm:
        simulate(20, 2, f"{warm}/warm.jsonl")
    start = rss_now()
    began = time.perf_counter()
    data = simulate(situations, repeats, output, resume)
    seconds = time.perf_counter() - began
    peak = rss_peak()
    report = data.report()
    print(
        json.dumps(
            {
                "rollouts": len(data),
                "start": start,
                "peak": peak,
                "seconds": seconds,
                "n_traces": report.n_traces,
                "errors": report.n_errors,
            }
        )
    )


#: What reads the largest run's file back, each in a process of its own (information): the
#: command line, with ``{rows}`` the rows file and ``{dir}`` a scratch folder for what it writes
READERS = {
    "whileai report": ["report", "{rows}", "--json"],
    "whileai view": ["view", "{rows}", "--out", "{dir}/page.html", "--json"],
    "whileai grade": [
        "grade", "{rows}", "--judge", "ExactMatch", "--output", "{dir}/graded.jsonl", "--json"
    ],
    "whileai export": [
        "export", "{rows}", "--shape", "grpo", "--output", "{dir}/groups.jsonl", "--json"
    ],
}  # fmt: skip


def child_reader(name: str, path: str) -> None:
    """The reader ``name`` on ``path`` in this process; prints a JSON line with the peak RSS
    growth it cost and the rows it said it read, if it says."""
    import contextlib
    import io

    from whileai.cli import main

    def argv(rows: Path | str, folder: str) -> list[str]:
        return [a.replace("{rows}", str(rows)).replace("{dir}", folder) for a in READERS[name]]

    with tempfile.TemporaryDirectory() as warm, tempfile.TemporaryDirectory() as out:
        # warm up on the file's first rows: the reader's imports are a cost of the process
        with open(path, encoding="utf-8") as rows:
            head = Path(warm) / "head.jsonl"
            head.write_text("".join(next(rows) for _ in range(20)), encoding="utf-8")
        with contextlib.redirect_stdout(io.StringIO()):
            main(argv(head, warm))
        start = rss_now()
        began = time.perf_counter()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(argv(path, out))
        seconds = time.perf_counter() - began
    # (a shop row on disk carries no reference, so ExactMatch cannot grade one: grade writes
    # each as a judge error and exits 1; what is measured is the memory of the whole pass)
    assert code == 0 or (name == "whileai grade" and code == 1), f"{name} exited {code}"
    made = json.loads(printed.getvalue())
    print(
        json.dumps(
            {"start": start, "peak": rss_peak(), "seconds": seconds, "rows": made.get("rows")}
        )
    )


def read_back(run: dict[str, Any], name: str) -> None:
    """(information) the reader ``name`` on the largest run's file, in a process of its own:
    the peak RSS growth of reading every row back."""
    done = subprocess.run(
        [sys.executable, __file__, "--reader", name, run["path"]],
        check=True,
        capture_output=True,
        text=True,
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["rows"] in (None, run["rollouts"]), (got["rows"], run["rollouts"])
    size = Path(run["path"]).stat().st_size / MIB
    growth = (got["peak"] - got["start"]) / MIB
    print(
        f"  (information) {name} on that file ({size:,.0f} MiB, {run['rollouts']:,} rows): "
        f"{got['seconds']:.1f} s, peak RSS growth {growth:.1f} MiB"
    )


def measure(situations: int, repeats: int, output: str, resume: bool = False) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(situations), str(repeats), output]
        + (["--resume"] if resume else []),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def same_as_in_memory(path: str, situations: int, repeats: int) -> int:
    """The rows on disk are the in-memory run's rows (run ids aside); returns how many."""

    def key(row: dict[str, Any]) -> str:
        row = {k: v for k, v in row.items() if k != "run_id"}
        row["lineage"] = {k: v for k, v in row["lineage"].items() if k != "run_id"}
        return json.dumps(row, sort_keys=True)

    on_disk = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    held = list(simulate(situations, repeats, None).rows)
    assert sorted(map(key, on_disk)) == sorted(map(key, held)), "rows on disk differ"
    return len(on_disk)


def table(title: str, runs: list[tuple[int, int]], scratch: str) -> list[dict[str, Any]]:
    print(title)
    folder = tempfile.mkdtemp(dir=scratch)
    print(f"  {'rollouts':>10} {'situations':>10} {'repeats':>7} {'seconds':>8} "
          f"{'rollouts/s':>10} {'RSS growth':>11}")  # fmt: skip
    out = []
    for situations, repeats in runs:
        path = f"{folder}/rows-{situations}-{repeats}.jsonl"
        got = measure(situations, repeats, path)
        assert got["rollouts"] == got["n_traces"] == situations * repeats
        with open(path, encoding="utf-8") as f:
            written = sum(1 for _ in f)
        assert written == got["rollouts"], f"{written} rows on disk of {got['rollouts']}"
        growth = (got["peak"] - got["start"]) / MIB
        got.update(situations=situations, repeats=repeats, growth_mib=growth, path=path)
        print(
            f"  {got['rollouts']:>10,} {situations:>10,} {repeats:>7} {got['seconds']:>8.1f} "
            f"{got['rollouts'] / got['seconds']:>10,.0f} {growth:>8.1f} MiB"
        )
        out.append(got)
    return out


def resumed(run: dict[str, Any]) -> None:
    """(information) The largest run killed three quarters of the way through its file (cut
    mid-line, as a kill leaves it) and resumed: the resume's peak RSS growth, and a check
    that it wrote every rollout once."""
    path = Path(run["path"])
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size * 3 // 4)
    with open(path, "rb") as f:
        found = sum(1 for _ in f) - 1  # the last line is the cut one
    got = measure(run["situations"], run["repeats"], str(path), resume=True)
    keys = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            keys.add(json.loads(line)["lineage"]["rollout_key"])
    assert len(keys) == got["rollouts"] == run["rollouts"], (len(keys), got["rollouts"])
    growth = (got["peak"] - got["start"]) / MIB
    print(
        f"  (information) resumed after a kill with {found:,} of its {run['rollouts']:,} rows "
        f"on disk: {got['seconds']:.1f} s, peak RSS growth {growth:.1f} MiB; every rollout "
        "on disk once"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("SITUATIONS", "REPEATS", "OUTPUT"))
    parser.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reader", nargs=2, metavar=("NAME", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reader:
        child_reader(*args.reader)
        return
    if args.child:
        child(int(args.child[0]), int(args.child[1]), args.child[2], args.resume)
        return
    repeats = [4, 20] if args.quick else [4, 40, 400]
    situations = 500 if args.quick else SITUATIONS
    with tempfile.TemporaryDirectory() as scratch:
        rows = table(
            f"single-turn shop world, fault_rate 0.2, output= JSONL, {situations:,} situations:",
            [(situations, r) for r in repeats],
            scratch,
        )
        worst = max(r["growth_mib"] for r in rows)
        print(
            f"  peak RSS growth at most {worst:.1f} MiB (target < {TARGET_MIB} MiB at every "
            f"size: {'met' if worst < TARGET_MIB else 'NOT met'})"
        )
        resumed(rows[-1])
        for name in READERS:
            read_back(rows[-1], name)
        per = table(
            "(information, not the target) repeats fixed at 4, situations growing:",
            [(situations, 4), (situations * 10, 4)],
            scratch,
        )
        cost = (per[1]["growth_mib"] - per[0]["growth_mib"]) * MIB / (situations * 9)
        print(f"  about {cost / 1024:.1f} KiB per situation (its plan, privileged block, "
              "report entry and the rows of its repeats)")  # fmt: skip
        # last: it holds a run in this process's memory
        checked = same_as_in_memory(rows[0]["path"], situations, repeats[0])
        print(f"rows on disk at {rows[0]['rollouts']:,} rollouts: the in-memory run's rows, "
              f"all {checked:,} (run ids aside)")  # fmt: skip


if __name__ == "__main__":
    main()
