"""``whileai import LOG --output ROWS``: another tool's log as our rows file."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterator
from typing import Any

from whileai.commands.common import OK, UsageError, print_json
from whileai.schema.files import user_path, write_rows
from whileai.schema.wording import counted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from whileai.importers import FORMATS

    parser.add_argument(
        "log", help="an Inspect AI log, lm-eval samples, tau-bench or verifiers results"
    )
    parser.add_argument("--output", required=True, help="the rows file to write")
    parser.add_argument(
        "--format", default=None, choices=FORMATS, help="the tool (default: detected)"
    )
    parser.add_argument("--json", action="store_true", help="print what was read as JSON only")


def import_command(args: argparse.Namespace) -> int:
    from whileai.importers.load import detect, log_file, stream

    try:
        log = log_file(args.log, "whileai import")
    except OSError as exc:
        raise UsageError(str(exc).removeprefix("whileai import: ")) from None
    tasks: Counter[str] = Counter()

    def tallied(rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            tasks[str(row["task_id"])] += 1
            yield row

    try:
        chosen = args.format or detect(log)
        # a row at a time into --output, which takes its place once whole: a bad record part
        # way leaves it as it was
        write_rows(user_path(args.output), tallied(stream(log, format=chosen)))
    except (ValueError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    n_rows = sum(tasks.values())
    summary = {"format": chosen, "rows": n_rows, "tasks": len(tasks), "output": args.output}
    if args.json:
        print_json(summary)
    else:
        print(
            f"{counted(n_rows, 'row')} ({counted(len(tasks), 'task')}) read from {args.log} "
            f"({chosen}) into {args.output}"
        )
    return OK
