"""``whileai report RUN.jsonl``: what a run measured, from its rows file and sidecar."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from whileai.commands.common import OK, print_json, read_run
from whileai.schema.files import RESUME_HINT, user_path, writer_of
from whileai.schema.provenance import RUN_PROVENANCE, provenance_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a rows file simulate(output=) wrote")
    parser.add_argument("--json", action="store_true", help="print the report as JSON only")


def summary(
    rows: Sequence[Mapping[str, Any]], meta: dict[str, Any], path: Path | None = None
) -> tuple[dict[str, Any], Any, Any]:
    """pass@1, pass^k and pass@k with their intervals, the faults, the markers, whose failures,
    the warnings, where the run came from and, for a run still being written to ``path``, the
    pid of its process; with the pass@k and marker reports it was made
    from (None without markers). One walk over the rows (a file's are parsed on each walk):
    the task table both measurements are made from, and the counts beside it."""
    from whileai.measure._tasks import task_table
    from whileai.measure.pass_at import pass_at_from_table
    from whileai.measure.summaries import marker_summary_from_table
    from whileai.schema.marker_bounds import recorded_bounds

    faults: Counter[str] = Counter()
    owners: Counter[str] = Counter()
    errored = 0
    marked = False

    def counted() -> Iterator[Mapping[str, Any]]:
        nonlocal errored, marked
        for r in rows:
            yield r
            # counted once the table's pass has checked the row
            for f in r.get("faults") or []:
                faults[str(f.get("kind"))] += 1
            owner = r.get("failure_owner")
            if isinstance(owner, dict):
                owners[str(owner["owner"])] += 1
            errored += bool(r.get("error"))
            marked = marked or bool(r.get("markers"))

    table = task_table(counted())
    passes = pass_at_from_table(table)
    bounds = recorded_bounds(meta.get("metadata"))
    markers = marker_summary_from_table(table, bounds=bounds) if marked else None
    side_report = meta.get("report") or {}
    made = {
        "rows": len(rows),
        "errored": errored,
        "pass_at": passes.to_dict(),
        "faults": dict(sorted(faults.items())),
        "markers": markers.to_dict() if markers is not None else None,
        "failure_owners": dict(sorted(owners.items())),
        "cost": side_report.get("cost"),
        "warnings": list(meta.get("warnings") or []),
        "complete": meta.get("complete"),
        "writer_pid": writer_of(path)
        if path is not None and meta.get("complete") is False
        else None,
        "provenance": {k: (meta.get("metadata") or {}).get(k) for k in RUN_PROVENANCE},
    }
    return made, passes, markers


def report_command(args: argparse.Namespace) -> int:
    rows, meta = read_run(args.run)
    made, passes, markers = summary(rows, meta, user_path(args.run))
    if args.json:
        print_json(made)
        return OK
    print(f"run {args.run}")
    for key, value in made["provenance"].items():
        if value is not None:
            print(f"  {key:<18}{provenance_text(key, value)}")
    if made["writer_pid"] is not None:
        print(
            f"  (the run is still going: process {made['writer_pid']} is writing it; these are "
            "its rows so far)"
        )
    elif made["complete"] is False:
        print(f"  (the run did not finish: {RESUME_HINT})")
    print(passes)
    if made["faults"]:
        print("faults fired: " + ", ".join(f"{k} {v}" for k, v in made["faults"].items()))
    if made["failure_owners"]:
        print(
            "failures by owner: " + ", ".join(f"{k} {v}" for k, v in made["failure_owners"].items())
        )
    if markers is not None:
        print(markers)
    if made["cost"]:
        print(f"cost (USD): {made['cost'].get('total_usd')}")
    for warning in made["warnings"]:
        print(f"warning: {warning}")
    return OK
