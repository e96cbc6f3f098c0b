"""``whileai run CONFIG.toml``: the simulate() call the file describes, its rows to disk."""

from __future__ import annotations

import argparse
from typing import Any

from whileai.commands.common import FAILED, OK, UsageError, print_json, registry_for
from whileai.commands.config import FILE_KEYS, load_config
from whileai.schema.files import iter_jsonl, user_path, write_rows
from whileai.schema.wording import agreeing, counted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="a TOML file of simulate() parameters ([advanced] table)")
    parser.add_argument("--output", default=None, help="rows file (overrides the config's output)")
    parser.add_argument(
        "--resume", action="store_true", help="continue the run already at the output"
    )
    parser.add_argument(
        "--retry-errors",
        action="store_true",
        help="play again only the rollouts whose rows ended in an error (implies --resume)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON only")


def drop_error_rows(output: str) -> int:
    """Take the rows that ended in an error out of ``output`` (atomically), so a resume plays
    those rollouts again; how many were taken out."""
    target = user_path(output)
    if not target.is_file():
        raise UsageError(f"--retry-errors: {output} holds no run yet")
    # a row at a time, twice when there is something to take out: a long run's file is never
    # held in memory whole
    errored = sum(
        1 for row, _, _ in iter_jsonl(target, what="output", tail="cut") if row.get("error")
    )
    if errored:
        write_rows(
            target, (row for row, _, _ in iter_jsonl(target, what="output") if not row.get("error"))
        )
    return errored


def run_command(args: argparse.Namespace) -> int:
    from whileai.simulations.engine import simulate

    config = load_config(args.config)
    params: dict[str, Any] = {k: v for k, v in config.items() if k not in FILE_KEYS}
    if args.output:
        params["output"] = args.output
    if not params.get("output"):
        raise UsageError(
            f"{args.config}: a run from the command line writes its rows to disk: set "
            "output = 'runs/name.jsonl' in the file or pass --output"
        )
    retried = 0
    if args.retry_errors:
        retried = drop_error_rows(str(params["output"]))
    if args.resume or args.retry_errors:
        params["resume"] = True
    registry = registry_for(args, list(config.get("plugins", [])))
    try:
        result = simulate(registry=registry, advanced=config.get("advanced"), **params)
    except (TypeError, ValueError, FileExistsError) as exc:
        raise UsageError(f"{args.config}: {exc}") from None
    runs = result if isinstance(result, list) else [result]
    errored = sum(1 for data in runs for row in data.rows if row.get("error"))
    if args.json:
        print_json(
            {
                "output": params["output"],
                "rows": sum(len(data.rows) for data in runs),
                "errored": errored,
                "retried": retried,
                "reports": [data.report().to_dict() for data in runs],
            }
        )
    else:
        for data in runs:
            print(data.report())
        print(f"\n{counted(sum(len(d.rows) for d in runs), 'row')} in {params['output']}", end="")
        print(f"; {counted(retried, 'errored rollout')} played again" if args.retry_errors else "")
        if errored:
            print(
                f"{counted(errored, 'row')} ended in an error: whileai run --retry-errors plays "
                f"{agreeing(errored, 'it', 'them')} again"
            )
    return FAILED if errored else OK
