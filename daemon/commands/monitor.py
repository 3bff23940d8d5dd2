"""``tablesense monitor --broker HOST:PORT [--table T]``: the live table view from any subscriber.

    tablesense monitor [--broker HOST:PORT] [--table T] [--prefix tablesense] [--no-ui]
                       [--tls | --ca-file FILE] [--cert-file FILE [--key-file FILE]]
                       [--credentials-file FILE]

Subscribes only to the public topics (status, round, results, settlements, alarms, devices/+), so it
needs no access to ``floor/``, and shows the same view as ``tablesense demo`` (:mod:`daemon.view`).
``--no-ui`` prints one plain line per message instead, and so does a monitor whose standard output is
not a terminal (a pipe or a log file: a live view there would show nothing until the end). Ctrl-C,
SIGTERM and SIGHUP (its terminal closed) end it the same way, with the summary and exit status 0. On the
production broker (TLS, no anonymous clients, ACL; docs/security.md) it logs in as ``surveillance`` or
``floor`` (both read alarms; ``signage-<table>`` would see no alarms) with the flags of
:mod:`daemon.broker_auth`, checked as ``tablesense run`` checks its own.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

import aiomqtt

from tablesense.daemon.broker_auth import DEFAULT_TLS_PORT, add_auth_arguments, auth_from_args, uses_tls
from tablesense.daemon.cli import UsageError
from tablesense.daemon.mqtt import CredentialsError
from tablesense.daemon.topics import option_problem
from tablesense.daemon.view import TableView, summary_lines, watch

__all__ = ["STOP_SIGNALS", "parse_broker", "register", "run", "watch_until_stopped"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that end the monitor like Ctrl-C: with its summary (the default action would kill it silently)."""


def parse_broker(text: str, default_port: int = 1883) -> tuple[str, int]:
    """``"HOST:PORT"`` (or ``"HOST"`` for ``default_port``) as ``(host, port)``.

    Raises:
        UsageError: empty host, or a port that is not 1..65535.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = text, str(default_port)
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
    p.add_argument("--broker", default="127.0.0.1", metavar="HOST:PORT",
                   help="default 127.0.0.1:1883 (127.0.0.1:8883 with TLS); without a port: 1883, or 8883 "
                        "with TLS")
    p.add_argument("--table", default=None, help="table id (default: every table under the prefix)")
    p.add_argument("--prefix", default="tablesense", help="topic prefix (default: tablesense)")
    p.add_argument("--no-ui", action="store_true", help="plain lines instead of the live view")
    add_auth_arguments(p)
    p.set_defaults(func=run)


async def watch_until_stopped(host: str, port: int, **kwargs: Any) -> None:
    """:func:`daemon.view.watch` until it returns or one of :data:`STOP_SIGNALS` arrives; a stop signal
    ends the watch as Ctrl-C does (the live view is closed, ``kwargs["views"]`` keeps what was seen).

    Raises ``aiomqtt.MqttError`` as ``watch`` does (the first connection failed).
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(watch(host, port, **kwargs))
    stopped = False

    def on_signal() -> None:
        nonlocal stopped
        stopped = True
        task.cancel()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal)
    try:
        await task
    except asyncio.CancelledError:
        if not stopped:
            raise
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


def run(args: argparse.Namespace) -> int:
    """Watch until Ctrl-C, SIGTERM or SIGHUP, then print the summary; returns the exit status (0).
    The live view only on a terminal; plain lines otherwise (as ``--no-ui``).

    Raises UsageError (one line) for a bad --broker, a --table or --prefix the table config would
    refuse (:func:`daemon.topics.option_problem`, shared with ``signage``), a broker that refuses or
    cannot be reached at the first attempt (TLS verification, user name or password included), and a
    credentials file that is missing, malformed or accessible by other users, or a TLS file that cannot
    be loaded.
    """
    host, port = parse_broker(args.broker, DEFAULT_TLS_PORT if uses_tls(args) else 1883)
    if (problem := option_problem(args.table, args.prefix)) is not None:
        raise UsageError(f"monitor: {problem}")
    try:
        auth = auth_from_args(args)
    except CredentialsError as exc:
        raise UsageError(f"monitor: {exc}") from None
    views: dict[str, TableView] = {}
    ui = not args.no_ui and sys.stdout.isatty()
    try:
        asyncio.run(watch_until_stopped(host, port, prefix=args.prefix, table=args.table, ui=ui, views=views,
                                        auth=auth))
    except aiomqtt.MqttError as exc:
        raise UsageError(f"cannot reach the broker at {host}:{port}: {exc}") from None
    except BrokenPipeError:  # e.g. piped into head: the reader has gone
        return 0
    except KeyboardInterrupt:
        pass
    for v in views.values():
        print("\n".join(summary_lines(v)))
    return 0
