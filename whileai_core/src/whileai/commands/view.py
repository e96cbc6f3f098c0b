"""``whileai view RUN.jsonl``: write the run's HTML report and print its path (or open it)."""

from __future__ import annotations

import argparse
import webbrowser
from pathlib import Path

from whileai.commands.common import OK, UsageError, print_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a rows file simulate(output=) wrote")
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="RUN",
        help="compare the run against this one: a forest plot of paired differences",
    )
    parser.add_argument(
        "--floor",
        nargs="+",
        default=None,
        metavar="RUN",
        help="three or more re-runs of the baseline: their spread is the noise band",
    )
    parser.add_argument(
        "--proxy", default=None, help="the comparison's headline, e.g. marker:tool_errors"
    )
    parser.add_argument(
        "--out", default=None, help="where to write the page; unset: RUN.report.html beside RUN"
    )
    parser.add_argument(
        "--max-transcripts", type=int, default=500, help="rollouts laid out on the page"
    )
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    parser.add_argument("--json", action="store_true", help='print {"path": ...} only')


def view_command(args: argparse.Namespace) -> int:
    from whileai.viewing import html_report

    for given in [args.run, *([args.baseline] if args.baseline else []), *(args.floor or [])]:
        if not Path(given).is_file():
            raise UsageError(f"{given}: no such rows file (a .jsonl that simulate(output=) wrote)")
    if args.floor and not args.baseline:
        raise UsageError("--floor needs --baseline: the noise band is read against a comparison")
    if args.floor and len(args.floor) < 3:
        raise UsageError("--floor needs three or more runs: a spread of two is not a std")
    if args.max_transcripts < 0:
        raise UsageError(f"--max-transcripts must be 0 or more, got {args.max_transcripts}")
    try:
        path = html_report(
            args.run,
            args.out,
            baseline=args.baseline,
            floor=args.floor,
            proxy=args.proxy,
            max_transcripts=args.max_transcripts,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json({"path": str(path.resolve())})
    else:
        print(path)
    if args.open:
        webbrowser.open(path.resolve().as_uri())
    return OK
