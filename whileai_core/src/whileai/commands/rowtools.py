"""``whileai grade | select | decontaminate | rank | export``: a rows file in, a file out.

Each reads rows (a file simulate(), evaluate() or another command wrote), calls the library
function of the same name, writes the rows it gives to ``--output`` (the same export rules as
every writer: nothing privileged) and prints its report, or with ``--json`` the report only.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from whileai.commands.common import (
    FAILED,
    OK,
    UsageError,
    print_json,
    read_run,
    refused_as_misuse,
    registry_for,
)
from whileai.schema.files import user_path, write_rows
from whileai.schema.wording import counted


def _io(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rows", help="the rows file to read")
    parser.add_argument("--output", required=True, help="the rows file to write")
    parser.add_argument("--json", action="store_true", help="print the report as JSON only")


def add_grade_arguments(parser: argparse.ArgumentParser) -> None:
    _io(parser)
    parser.add_argument(
        "--judge", default=None, help="a judge or verifier spec (MathEqual, rubric, ...)"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on after the rows a stopped grading of RUN into --output kept (same judge)",
    )


def add_select_arguments(parser: argparse.ArgumentParser) -> None:
    _io(parser)
    # wai.select's MODES (named here: importing it would load numpy to print --help)
    parser.add_argument("--mode", default="rl", choices=("rl",), help="what to keep")
    parser.add_argument(
        "--band",
        nargs=2,
        type=float,
        default=(0.2, 0.8),
        metavar=("LOW", "HIGH"),
        help="keep groups whose pass rate lies in [LOW, HIGH]",
    )


def add_decontaminate_arguments(parser: argparse.ArgumentParser) -> None:
    _io(parser)
    parser.add_argument(
        "--against", required=True, help="a benchmark's rows (.jsonl) or texts (one per line)"
    )
    parser.add_argument(
        "--field", action="append", default=None, help="row fields to check (prompt)"
    )
    parser.add_argument(
        "--against-field",
        action="append",
        default=None,
        help="the fields a .jsonl benchmark's records hold their text in (GSM8K's: question); "
        "default: --field's",
    )
    parser.add_argument("-n", type=int, default=13, help="n-gram length")


def add_rank_arguments(parser: argparse.ArgumentParser) -> None:
    _io(parser)
    parser.add_argument("--judge", default="pairwise", help="the ranking judge spec")


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rows", help="the rows file to read")
    parser.add_argument(
        "--output", required=True, help="the file to write (.parquet: Parquet, else JSONL)"
    )
    # wai.export's SHAPES and the containers a file can hold (named here: --help loads nothing)
    parser.add_argument(
        "--shape",
        default="trl",
        choices=("trl", "grpo", "rows"),
        help="a record per task (prompt, task_id), per group of a task's rollouts, or per row",
    )
    parser.add_argument(
        "--format",
        default=None,
        choices=("jsonl", "parquet"),
        help="the container (default: parquet for a .parquet --output, else jsonl)",
    )
    parser.add_argument(
        "--conversational", action="store_true", help="each prompt as a list of messages"
    )
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")


def _finish(
    args: argparse.Namespace,
    rows: Sequence[Mapping[str, Any]],
    report: Any,
    leave_out: tuple[str, ...],
) -> int:
    """Write ``rows`` to ``--output`` and say so (:func:`_say`)."""
    write_rows(user_path(args.output), rows)
    return _say(args, len(rows), report, leave_out=leave_out)


def _say(
    args: argparse.Namespace, written: int, report: Any, leave_out: tuple[str, ...] = ()
) -> int:
    """The report, or with ``--json`` the report as JSON, less the ``leave_out`` fields that
    hold rows: the rows just written to ``--output``, or rows of the input file the report
    names by index (the JSON of a large selection would repeat whole files on stdout)."""
    if args.json:
        shown = report.to_dict(without=leave_out)
        print_json({"output": args.output, "rows": written, "report": shown})
    else:
        print(report)
        print(f"\n{counted(written, 'row')} in {args.output}")
    return OK


def grade_command(args: argparse.Namespace) -> int:
    from whileai.judging import grade

    rows, _ = read_run(args.rows)
    try:
        # graded into --output as they are graded: a rows file of any length in bounded memory
        scored = grade(
            rows,
            judge=args.judge,
            registry=registry_for(args),
            output=args.output,
            resume=args.resume,
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    report = scored.report()
    _say(args, len(scored.rows), report)
    if not report.n_errors:
        return OK
    if not args.json:
        print(
            f"{counted(report.n_errors, 'row')} the judge could not grade (judge_status error, "
            "reward None; each row's reason says why)"
        )
    # as a run with errored rows does: a script sees the grading is not whole
    return FAILED


def select_command(args: argparse.Namespace) -> int:
    from whileai.measure import select

    rows, _ = read_run(args.rows)
    with refused_as_misuse():
        report = select(rows, mode=args.mode, band=tuple(args.band))
    return _finish(args, report.rows, report, ("rows",))


def _against(path: str, fields: Sequence[str]) -> dict[str, list[Any]]:
    """The benchmark's items under the file's name (the source a match names)."""
    from whileai.measure.decontaminate import benchmark_items

    target = user_path(path)
    hint = "; --against-field names the field the benchmark's text is in"
    try:
        return {target.name: benchmark_items(target, fields, f"--against {path}", hint)}
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def decontaminate_command(args: argparse.Namespace) -> int:
    from whileai.measure import decontaminate

    rows, _ = read_run(args.rows)
    fields = tuple(args.field) if args.field else ("prompt",)
    against_fields = tuple(args.against_field) if args.against_field else fields
    with refused_as_misuse():
        report = decontaminate(
            rows,
            _against(args.against, against_fields),
            fields=fields,
            n=args.n,
            against_fields=against_fields,
        )
    # the contaminated rows are the input's rows at contaminated_indices (matches say why)
    return _finish(args, report.clean, report, ("clean", "contaminated"))


def rank_command(args: argparse.Namespace) -> int:
    from whileai.ranking import rank

    read_run(args.rows)  # a clear error for a path that is not a rows file
    try:
        report = rank(args.rows, judge=args.judge, output=args.output, registry=registry_for(args))
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        # (the ranked rows are in the file written: a long run's would be all of it again)
        print_json({"output": args.output, "report": report.to_dict(without=("rows",))})
    else:
        print(report)
    return OK


def export_command(args: argparse.Namespace) -> int:
    from whileai.training import export

    # (an empty run exports to empty training data, as a pipeline step may)
    rows, _ = read_run(args.rows, empty=True)
    container = args.format or ("parquet" if Path(args.output).suffix == ".parquet" else "jsonl")
    try:
        # a record at a time into --output (training.export): a run of any length
        written = export(
            rows,
            container,
            shape=args.shape,
            path=args.output,
            conversational=args.conversational,
        )
    except (TypeError, ValueError, ImportError) as exc:
        # (ImportError: Parquet without pyarrow, which the message says how to install)
        raise UsageError(str(exc)) from None
    if container == "parquet":
        import pyarrow.parquet as pq

        count = int(pq.read_metadata(args.output).num_rows)
    else:
        count = len(written)
    if args.json:
        print_json(
            {"output": args.output, "records": count, "shape": args.shape, "format": container}
        )
    else:
        print(f"{counted(count, f'{args.shape} record')} ({container}) in {args.output}")
    return OK
