"""``whileai compare A.jsonl B.jsonl``: B against A, paired by task, against a noise floor."""

from __future__ import annotations

import argparse

from whileai.commands.common import OK, UsageError, print_json, read_run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="the baseline run's rows file")
    parser.add_argument("b", help="the candidate run's rows file")
    parser.add_argument(
        "--floor",
        nargs="+",
        default=None,
        metavar="RUN",
        help="three or more re-runs of one eval: their run-to-run spread is the noise band",
    )
    parser.add_argument("--proxy", default=None, help="the headline, e.g. marker:tool_errors")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON only")


def compare_command(args: argparse.Namespace) -> int:
    from whileai.measure import compare_runs, eval_variance

    a, _ = read_run(args.a)
    b, _ = read_run(args.b)
    run_std = runs = None
    floor = None
    if args.floor:
        if len(args.floor) < 3:
            raise UsageError("--floor needs three or more runs: a spread of two is not a std")
        floor = eval_variance(*[read_run(path)[0] for path in args.floor])
        run_std, runs = floor.run_std, floor.n_runs
    try:
        report = compare_runs(a, b, proxy=args.proxy, run_std=run_std, run_std_runs=runs)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        out = report.to_dict()
        if floor is not None:
            out["floor"] = floor.to_dict()
        print_json(out)
        return OK
    if floor is not None:
        print(floor)
    print(report)
    return OK
