"""``tablesense check-config FILE [--template]``: validate a table configuration without starting anything.

Runs the checks ``tablesense run`` makes before starting (:func:`daemon.app.broker_settings`: the MQTT
credentials file exists and other users cannot read or write it, the TLS CA and client certificate
load), so a config ``check-config`` accepts is not refused by ``run`` for them. ``--template`` skips
those file checks, for a config written for another machine (e.g. ``deploy/examples/``).

Prints ``ok: <table> (<game>, N decks, M spots)`` and exits 0, or prints the one-line error naming the
key or file (e.g. ``tablesense: spots.7: mapped twice (also spots.3)``) and exits 2 (issue 4
"Configuration").
"""

from __future__ import annotations

import argparse
from typing import Any

from tablesense.daemon.cli import UsageError
from tablesense.daemon.config import ConfigError, load_config

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``check-config`` sub-command."""
    parser = subparsers.add_parser(
        "check-config", help="validate a table config file",
        description="Validate a table configuration (TOML): keys, paytables for the deck count, wagers "
                    "the game offers, the spot map, and the credentials and TLS files it names (as "
                    "`tablesense run` checks them). Exit 0 when usable, 2 with a one-line error.")
    parser.add_argument("file", metavar="FILE", help="the table config (TOML)")
    parser.add_argument("--template", action="store_true",
                        help="skip the credentials and TLS file checks (a config for another machine)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check ``args.file``; print the summary line and return 0.

    Raises:
        UsageError: the config is unusable (one line naming the key), or (without ``--template``) its
            credentials or TLS files would make ``tablesense run`` refuse to start.
    """
    try:
        cfg = load_config(args.file)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if not getattr(args, "template", False):
        from tablesense.daemon.app import StartupError, broker_settings

        try:
            broker_settings(cfg)
        except StartupError as exc:
            raise UsageError(str(exc)) from None
    decks = cfg.shoe_decks
    print(f"ok: {cfg.table} ({cfg.game}, {decks} deck{'s' if decks != 1 else ''}, {len(cfg.spots)} spots)")
    return 0
