"""``tablesense check-config FILE [--template]``: validate a table configuration without starting anything.

Reports every problem at once, one line each, naming the file, the line where it is known and the key::

    tablesense: /etc/tablesense/bac-01.toml:14: spots.7: mapped twice (also spots.3)
    tablesense: /etc/tablesense/bac-01.toml:31: wagers.tie.max: 10 is below min 500

(a TOML syntax error names line and column: ``bac-01.toml:3:9: invalid TOML: ...``), and exits 2; or prints
``ok: <table> (<game>, N decks, M spots)`` and exits 0.

Without ``--template`` it also makes the checks ``tablesense run`` makes before starting
(:func:`daemon.app.broker_settings`: the MQTT credentials file exists and other users cannot read or write
it, the TLS CA and client certificate load; :func:`daemon.app.journal_key`: the journal's sealing key is
readable, long enough and private), so a config ``check-config`` accepts is not refused by
``run`` for them. A ``*_file`` key that names ``${CREDENTIALS_DIRECTORY}`` (the secrets systemd hands the
service, docs/install.md) can only be checked where that variable is set: under the unit, or by hand with
``CREDENTIALS_DIRECTORY=DIR``. ``--template`` skips the file checks, for a config written for another
machine (e.g. the examples in ``deploy/examples/``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from tablesense.daemon.cli import UsageError
from tablesense.daemon.config import CREDENTIALS_VARIABLE, ConfigError, TableConfig, load_config

__all__ = ["register", "run", "unresolved_credentials"]


def register(subparsers: Any) -> None:
    """Add the ``check-config`` sub-command."""
    parser = subparsers.add_parser(
        "check-config", help="validate a table config file",
        description="Validate a table configuration (TOML): keys, paytables for the deck count, wagers "
                    "the game offers, the spot map, and the credentials and TLS files it names (as "
                    "`tablesense run` checks them). Exit 0 when usable; else every problem, one line "
                    "each (file, line, key), and exit 2.")
    parser.add_argument("file", metavar="FILE", help="the table config (TOML)")
    parser.add_argument("--template", action="store_true",
                        help="skip the credentials and TLS file checks (a config for another machine)")
    parser.set_defaults(func=run)


def unresolved_credentials(cfg: TableConfig) -> list[str]:
    """Dotted keys of the ``*_file`` values still naming ``${CREDENTIALS_DIRECTORY}`` (the variable is not
    set here), e.g. ``["mqtt.credentials_file"]``."""
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                where = f"{path}.{key}" if path else str(key)
                if isinstance(value, str):
                    if str(key).endswith("_file") and CREDENTIALS_VARIABLE in value:
                        found.append(where)
                else:
                    walk(value, where)

    walk(msgspec.to_builtins(cfg), "")
    return found


def run(args: argparse.Namespace) -> int:
    """Check ``args.file``; print the summary line and return 0, or every problem and return 2.

    Raises:
        UsageError: (without ``--template``) its credentials or TLS files would make ``tablesense run``
            refuse to start (one line).
    """
    try:
        cfg = load_config(args.file)
    except ConfigError as exc:
        for line in exc.lines():
            print(f"tablesense: {line}", file=sys.stderr)
        return 2
    if not getattr(args, "template", False):
        unset = unresolved_credentials(cfg)
        if unset:
            raise UsageError(f"{args.file}: {', '.join(unset)}: names {CREDENTIALS_VARIABLE}, which is not "
                             "set: systemd sets it for the service (LoadCredential=, docs/install.md); "
                             "check with CREDENTIALS_DIRECTORY=DIR, under the unit, or with --template")
        from tablesense.daemon.app import StartupError, broker_settings, journal_key

        try:
            broker_settings(cfg)
            journal_key(cfg)
        except StartupError as exc:
            raise UsageError(str(exc)) from None
    decks = cfg.shoe_decks
    print(f"ok: {cfg.table} ({cfg.game}, {decks} deck{'s' if decks != 1 else ''}, {len(cfg.spots)} spots)")
    return 0
