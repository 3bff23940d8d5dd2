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

SUMMARIES: dict[str, str] = {
    "settle": "settle one round given as JSON (file or stdin)",
    "analyze": "exact odds, expected return and house edge of every wager of a game",
    "check_config": "validate a table config file",
    "schemas": "generate docs/schemas/*.json from the message models",
    "run": "run the table daemon (the systemd service entry point)",
    "monitor": "live view of a table from its public MQTT topics",
    "demo": "run a simulated table end to end with a live view",
    "signage": "serve the table display (web page) from the table's public MQTT topics",
    "recall": "show the last rounds in full from the journal (game recall)",
    "verify": "audit the sealed journal offline (exit 0 intact, 1 with the first row that fails)",
    "simulate": "run a virtual shoe or bet pads on a pty or TCP port",
    "capture": "record a device's raw bytes with timestamps (.cap)",
    "replay": "play a .cap capture back through a pseudo-terminal",
    "floor": "the floor service: every table's messages into PostgreSQL, exactly once; floor page",
}
"""Each command's one-line help as its module registers it, for the top-level ``tablesense --help``:
listing the commands imports none of their modules (the web server, MQTT, PostgreSQL and ``rich``
imports cost most of a second). ``tests/test_cli_help.py`` checks these against the modules."""


class UsageError(Exception):
    """A user error: printed as ``tablesense: <message>`` and exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit status 2), not two."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def _command_name(module: str) -> str:
    return module.replace("_", "-")


def build_parser(only: str | None = None, *, summaries: bool = False) -> argparse.ArgumentParser:
    """The top-level parser with every registered sub-command, or only the module ``only``.

    Registering one command imports one module, so ``tablesense settle`` does not pay for the
    imports of the daemon, the web server and the simulators. With ``summaries`` (and no ``only``)
    the sub-commands are placeholders carrying only their :data:`SUMMARIES` line and importing
    nothing: enough for ``tablesense --help`` and for a usage error naming no known command.
    """
    parser = OneLineParser(prog="tablesense", description=(
        "Live table-sensor daemon for casino table games: card-reading shoe and bet pads in, "
        "exact pair-wager settlements out over MQTT."))
    parser.add_argument("--version", action="version", version=f"tablesense {software_version()}",
                        help="print the installed version (package metadata) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                parser_class=OneLineParser)
    if only is None and summaries:
        for name in COMMANDS:
            sub.add_parser(_command_name(name), help=SUMMARIES[name])
        return parser
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
    # no command named (``tablesense --help``, a typo, nothing): the listing imports no command module
    parser = build_parser(_chosen_module(argv), summaries=True)
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
