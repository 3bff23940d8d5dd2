"""``tablesense check-config FILE``: validate a table configuration without starting anything.

Prints ``ok: <table> (<game>, N decks, M spots)`` and exits 0, or prints the one-line error naming the
key (e.g. ``tablesense: spots.7: mapped twice (also spots.3)``) and exits 2 (issue 4 "Configuration").
"""

from __future__ import annotations

import argparse
from typing import Any

from daemon.cli import UsageError
from daemon.config import ConfigError, load_config

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``check-config`` sub-command."""
    parser = subparsers.add_parser(
        "check-config", help="validate a table config file",
        description="Validate a table configuration (TOML): keys, paytables for the deck count, wagers "
                    "the game offers, the spot map. Exit 0 when usable, 2 with a one-line error.")
    parser.add_argument("file", metavar="FILE", help="the table config (TOML)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check ``args.file``; print the summary line and return 0.

    Raises:
        UsageError: the config is unusable (one line naming the key).
    """
    try:
        cfg = load_config(args.file)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    decks = cfg.shoe_decks
    print(f"ok: {cfg.table} ({cfg.game}, {decks} deck{'s' if decks != 1 else ''}, {len(cfg.spots)} spots)")
    return 0
