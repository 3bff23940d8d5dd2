"""The ``tablesense`` command line.

Each sub-command lives in its own module under :mod:`daemon.commands` exposing
``register(subparsers) -> None``, which adds a parser whose ``func`` default takes the parsed
arguments and returns the exit status. Errors a user can fix are reported as one line on stderr with
exit status 2, never a traceback. A closed pipe on stdout (``tablesense recall --json | head``) ends
the command quietly with exit status 141 (128 + SIGPIPE, as the shell reports for other tools).
``tablesense --version`` prints ``tablesense <version>`` from the installed package's metadata
(:func:`daemon.version.software_version`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from tablesense.daemon.version import software_version

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
    "verify",
    "simulate",
    "capture",
    "replay",
    "floor",
)
"""Modules of :mod:`daemon.commands`, in the order ``--help`` lists them."""


class UsageError(Exception):
    """A user error: printed as ``tablesense: <message>`` and exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit status 2), not two."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def _command_name(module: str) -> str:
    return module.replace("_", "-")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with every registered sub-command, or only the module ``only``.

    Registering one command imports one module, so ``tablesense settle`` does not pay for the
    imports of the daemon, the web server and the simulators.
    """
    parser = OneLineParser(prog="tablesense", description=(
        "Live table-sensor daemon for casino table games: card-reading shoe and bet pads in, "
        "exact pair-wager settlements out over MQTT."))
    parser.add_argument("--version", action="version", version=f"tablesense {software_version()}",
                        help="print the installed version (package metadata) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                parser_class=OneLineParser)
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"tablesense.daemon.commands.{name}").register(sub)
    return parser


def _chosen_module(argv: Sequence[str]) -> str | None:
    if "--version" in argv[:1]:
        return "settle"  # any one command: --version needs no other module imported
    first = next((a for a in argv if not a.startswith("-")), None)
    for name in COMMANDS:
        if first in (name, _command_name(name)):
            return name
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_chosen_module(argv))
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's flush at exit
    except UsageError as exc:
        print(f"tablesense: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``tablesense recall --json | head``): quiet, as a shell tool should.
        # Python docs, "Note on SIGPIPE": point stdout at devnull so the flush at exit cannot raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return code


if __name__ == "__main__":
    sys.exit(main())
