"""``tablesense monitor --broker HOST:PORT [--table T]``: the live table view from any subscriber.

Subscribes only to the public topics (status, round, results, settlements, alarms, devices/+), so it
needs no access to ``floor/``, and shows the same view as ``tablesense demo`` (:mod:`daemon.view`).
``--no-ui`` prints one plain line per message instead. Ctrl-C ends it with a summary.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import aiomqtt

from daemon.cli import UsageError
from daemon.view import TableView, summary_lines, watch

__all__ = ["parse_broker", "register", "run"]


def parse_broker(text: str) -> tuple[str, int]:
    """``"HOST:PORT"`` (or ``"HOST"`` for port 1883) as ``(host, port)``.

    Raises:
        UsageError: empty host, or a port that is not 1..65535.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = text, "1883"
    host = host.strip("[]")
    if not host:
        raise UsageError(f"--broker {text!r}: expected HOST:PORT")
    try:
        port = int(port_text)
    except ValueError:
        raise UsageError(f"--broker {text!r}: port {port_text!r} is not a number") from None
    if not 0 < port < 65536:
        raise UsageError(f"--broker {text!r}: port must be 1..65535")
    return host, port


def register(subparsers: Any) -> None:
    """Add the ``monitor`` sub-command."""
    p = subparsers.add_parser("monitor", help="live view of a table from its public MQTT topics",
                              description="Show a table's live view (cards, pair hits and odds, payouts, "
                                          "running win/loss per wager) from the public topics.")
    p.add_argument("--broker", default="127.0.0.1:1883", metavar="HOST:PORT", help="default 127.0.0.1:1883")
    p.add_argument("--table", default=None, help="table id (default: every table under the prefix)")
    p.add_argument("--prefix", default="tablesense", help="topic prefix (default: tablesense)")
    p.add_argument("--no-ui", action="store_true", help="plain lines instead of the live view")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Watch until Ctrl-C, then print the summary; returns the exit status."""
    host, port = parse_broker(args.broker)
    views: dict[str, TableView] = {}
    try:
        asyncio.run(watch(host, port, prefix=args.prefix, table=args.table, ui=not args.no_ui, views=views))
    except aiomqtt.MqttError as exc:
        raise UsageError(f"cannot reach the broker at {host}:{port}: {exc}") from None
    except BrokenPipeError:  # e.g. piped into head: the reader has gone
        return 0
    except KeyboardInterrupt:
        pass
    for v in views.values():
        print("\n".join(summary_lines(v)))
    return 0
