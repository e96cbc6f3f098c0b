"""``whileai report RUN.jsonl``: what a run measured, from its rows file and sidecar."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from whileai.commands.common import OK, print_json, read_run
from whileai.schema.provenance import RUN_PROVENANCE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a rows file simulate(output=) wrote")
    parser.add_argument("--json", action="store_true", help="print the report as JSON only")


def summary(rows: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """pass@1, pass^k and pass@k with their intervals, the faults, the markers, whose failures,
    the warnings and where the run came from."""
    from whileai.measure import marker_summary, pass_at

    faults = Counter(str(f.get("kind")) for r in rows for f in r.get("faults") or [])
    owners = Counter(
        str(r["failure_owner"]["owner"]) for r in rows if isinstance(r.get("failure_owner"), dict)
    )
    markers = marker_summary(rows) if any(r.get("markers") for r in rows) else None
    side_report = meta.get("report") or {}
    return {
        "rows": len(rows),
        "errored": sum(1 for r in rows if r.get("error")),
        "pass_at": pass_at(rows).to_dict(),
        "faults": dict(sorted(faults.items())),
        "markers": markers.to_dict() if markers is not None else None,
        "failure_owners": dict(sorted(owners.items())),
        "cost": side_report.get("cost"),
        "warnings": list(meta.get("warnings") or []),
        "complete": meta.get("complete"),
        "provenance": {k: (meta.get("metadata") or {}).get(k) for k in RUN_PROVENANCE},
    }


def report_command(args: argparse.Namespace) -> int:
    from whileai.measure import marker_summary, pass_at

    rows, meta = read_run(args.run)
    if args.json:
        print_json(summary(rows, meta))
        return OK
    made = summary(rows, meta)
    print(f"run {args.run}")
    for key, value in made["provenance"].items():
        if value is not None:
            print(f"  {key:<18}{value}")
    if made["complete"] is False:
        print("  (the run did not finish: whileai run --resume continues it)")
    print(pass_at(rows))
    if made["faults"]:
        print("faults fired: " + ", ".join(f"{k} {v}" for k, v in made["faults"].items()))
    if made["failure_owners"]:
        print(
            "failures by owner: " + ", ".join(f"{k} {v}" for k, v in made["failure_owners"].items())
        )
    if made["markers"] is not None:
        print(marker_summary(rows))
    if made["cost"]:
        print(f"cost (USD): {made['cost'].get('total_usd')}")
    for warning in made["warnings"]:
        print(f"warning: {warning}")
    return OK
