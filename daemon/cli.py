"""The ``tablesense`` command line.

Each sub-command lives in its own module under :mod:`daemon.commands` exposing
``register(subparsers) -> None``, which adds a parser whose ``func`` default takes the parsed
arguments and returns the exit status. Errors a user can fix are reported as one line on stderr with
exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS: tuple[str, ...] = (
    "settle",
    "analyze",
    "check_config",
    "schemas",
    "run",
    "monitor",
    "demo",
    "signage",
    "recall",
    "simulate",
    "capture",
    "replay",
)
"""Modules of :mod:`daemon.commands`, in the order ``--help`` lists them."""


class UsageError(Exception):
    """A user error: printed as ``tablesense: <message>`` and exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered sub-command."""
    parser = argparse.ArgumentParser(prog="tablesense", description=(
        "Live table-sensor daemon for casino table games: card-reading shoe and bet pads in, "
        "exact pair-wager settlements out over MQTT."))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"daemon.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except UsageError as exc:
        print(f"tablesense: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
