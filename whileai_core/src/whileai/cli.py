"""The ``whileai`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence


def _plugins(args: argparse.Namespace) -> int:
    from whileai.registry import Registry

    table = Registry.load().table()
    print(table)
    return 1 if args.strict and table.failures else 0


def _demo(args: argparse.Namespace) -> int:
    from whileai.simulations.demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="whileai", description="Make and measure agent rollouts.")
    sub = parser.add_subparsers(dest="command", required=True)
    plugins = sub.add_parser("plugins", help="list every registered plugin with its distribution")
    plugins.add_argument(
        "--strict", action="store_true", help="exit 1 when a plugin failed to load"
    )
    plugins.set_defaults(func=_plugins)
    demo = sub.add_parser("demo", help="a real simulate() run offline on the embedded model")
    from whileai.simulations.demo import add_arguments

    add_arguments(demo)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
