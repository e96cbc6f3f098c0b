"""The ``whileai`` command.

argparse, from the standard library: the core takes no command-line dependency, its help shows
every default, and a subcommand is a module in ``whileai.commands`` with ``add_arguments`` and
a ``*_command(args) -> int``. Exit codes: 0 the work was done, 1 the work (or a check) failed,
2 the command was misused. An error is one line on stderr; ``--debug`` shows the traceback.
``--json`` prints machine-readable output and nothing else on stdout.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from whileai.commands.common import FAILED, USAGE, UsageError


def _plugins(args: argparse.Namespace) -> int:
    from whileai.commands.common import print_json
    from whileai.registry import Registry

    table = Registry.load().table()
    if args.json:
        print_json(
            {
                "plugins": [
                    {
                        "kind": e.kind,
                        "name": e.name,
                        "aliases": list(e.aliases),
                        "description": e.description,
                        "distribution": e.distribution,
                        "version": e.version,
                    }
                    for e in table
                ],
                "failures": [str(f) for f in table.failures],
                "blocked": list(table.blocked),
            }
        )
    else:
        print(table)
    return 1 if args.strict and table.failures else 0


def _demo(args: argparse.Namespace) -> int:
    from whileai.simulations.demo import run_demo

    return run_demo(args)


def _run(args: argparse.Namespace) -> int:
    from whileai.commands.run import run_command

    return run_command(args)


def _report(args: argparse.Namespace) -> int:
    from whileai.commands.report import report_command

    return report_command(args)


def _compare(args: argparse.Namespace) -> int:
    from whileai.commands.compare import compare_command

    return compare_command(args)


def _view(args: argparse.Namespace) -> int:
    from whileai.commands.view import view_command

    return view_command(args)


def _rowtool(name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from whileai.commands import rowtools

        command: Callable[[argparse.Namespace], int] = getattr(rowtools, f"{name}_command")
        return command(args)

    return run


def _import(args: argparse.Namespace) -> int:
    from whileai.commands.importing import import_command

    return import_command(args)


def build_parser() -> argparse.ArgumentParser:
    formatter = argparse.ArgumentDefaultsHelpFormatter
    parser = argparse.ArgumentParser(
        prog="whileai", description="Make and measure agent rollouts.", formatter_class=formatter
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE[:OBJECT]",
        help="register a plugin that is not installed as an entry point (repeatable)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    plugins = sub.add_parser(
        "plugins",
        help="list every registered plugin with its distribution",
        formatter_class=formatter,
    )
    plugins.add_argument(
        "--strict", action="store_true", help="exit 1 when a plugin failed to load"
    )
    plugins.add_argument("--json", action="store_true", help="print the table as JSON only")
    plugins.set_defaults(func=_plugins)
    demo = sub.add_parser(
        "demo", help="real simulate() runs offline on the embedded model", formatter_class=formatter
    )
    from whileai.commands import compare, importing, report, rowtools, run, view
    from whileai.simulations.demo import add_arguments

    add_arguments(demo)
    demo.set_defaults(func=_demo)
    for name, module, func, text in (
        ("run", run, _run, "run the simulate() call a TOML config describes"),
        ("report", report, _report, "what a run measured, from its rows file"),
        ("compare", compare, _compare, "B against A, paired by task, against a noise floor"),
        (
            "view",
            view,
            _view,
            "write the run's HTML report (plots, transcripts) and print its path",
        ),
        (
            "import",
            importing,
            _import,
            "another tool's log (Inspect, lm-eval, tau-bench, ...) as rows",
        ),
    ):
        command = sub.add_parser(name, help=text, formatter_class=formatter)
        module.add_arguments(command)
        command.set_defaults(func=func)
    for name, text in (
        ("grade", "grade a rows file with a judge or verifier"),
        ("select", "keep the groups whose pass rate lies in a band (training data)"),
        ("decontaminate", "drop the rows that share an n-gram with a benchmark"),
        ("rank", "rank each task's rows against each other (quality in [0, 1])"),
        ("export", "a rows file as training data: TRL prompts, GRPO groups or rows"),
    ):
        command = sub.add_parser(name, help=text, formatter_class=formatter)
        getattr(rowtools, f"add_{name}_arguments")(command)
        command.set_defaults(func=_rowtool(name))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    from whileai.registry import UnknownPluginError

    try:
        with _sigterm_as_ctrl_c():
            return func(args)
    except (UsageError, UnknownPluginError) as exc:
        # a name, path or key the command cannot use: misuse, said in one line
        if args.debug:
            traceback.print_exc()
        print(f"whileai {args.command}: {_one_line(exc)}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print(f"whileai {args.command}: interrupted", file=sys.stderr)
        return FAILED
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(f"whileai {args.command}: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return FAILED


@contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """While a command runs, SIGTERM (a scheduler preempting a job, ``kill``) stops it as
    Ctrl-C does: a run says what is on disk and how to resume, its backends, worlds and
    workers close, and the sidecar says it did not finish. Sent on as SIGINT, so inside the
    event loop asyncio's own handler cancels the run where it waits, never mid-write."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def as_ctrl_c(signum: int, frame: Any) -> None:
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            # started with Ctrl-C ignored (a background job of a script, nohup): SIGINT
            # would be dropped, so SIGTERM ends the process as it would have
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGTERM, as_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _one_line(exc: BaseException) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(main())
