"""``tablesense signage``: the table display, a web page fed by the table's public MQTT topics.

    tablesense signage --broker HOST:PORT --table T [--prefix tablesense] [--listen 127.0.0.1:8080]
                       [--config FILE] [--tls | --ca-file FILE] [--cert-file FILE [--key-file FILE]]
                       [--credentials-file FILE]

Serves the page on ``--listen`` (the URL is printed on stdout; JSON log lines go to stderr) and
subscribes to ``{prefix}/{table}/`` status, round, results, settlements, scoreboard, info and devices/+
(never ``floor/``); see docs/signage.md. Runs until interrupted (Ctrl-C / SIGTERM: exit status 0 within
a second, even while a connect to an unreachable broker is still pending). On the production
broker (TLS, no anonymous clients, ACL; docs/security.md) it logs in as ``signage-<table>`` with the
flags of :mod:`daemon.broker_auth`, checked as ``tablesense run`` checks its own.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

from tablesense.daemon.broker_auth import (
    DEFAULT_TLS_PORT,
    BrokerAuth,
    add_auth_arguments,
    auth_from_args,
    uses_tls,
)
from tablesense.daemon.cli import UsageError
from tablesense.daemon.config import ConfigError, load_config
from tablesense.daemon.logging import bind_table, configure
from tablesense.daemon.mqtt import CredentialsError
from tablesense.daemon.netaddr import parse_hostport, parse_peer
from tablesense.daemon.signage.info import table_info
from tablesense.daemon.signage.server import start_signage
from tablesense.daemon.topics import option_problem

__all__ = ["register", "run"]

_T = TypeVar("_T")


class _DaemonThreadExecutor(concurrent.futures.ThreadPoolExecutor):
    """The display's default executor: each call in its own daemon thread, and a shutdown that does not
    wait for them.

    aiomqtt runs paho's blocking ``connect()`` (name resolution and TCP connect, up to paho's 5 s
    connect timeout per address, name resolution unbounded) in the loop's default executor. With the
    standard executor, ``asyncio.run`` and the interpreter's exit join that thread, so SIGTERM during a
    connect to an unreachable broker waited for it. Nothing the display runs in an executor has state
    worth finishing (the connect, aiohttp's static-file reads), so it is abandoned at exit instead.
    The process's own exit ends the threads.
    """

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[_T]:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the awaiting coroutine, as ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=work, name="signage-io", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Return at once: the threads are daemon threads, abandoned (see the class docstring)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``signage`` sub-command."""
    p = subparsers.add_parser(
        "signage", help="serve the table display (web page) from the table's public MQTT topics",
        description="A web page for a screen at the table: round, cards, pair wins and their odds, side "
                    "wagers and, for baccarat, the scoreboard roads. Updated live from MQTT.")
    p.add_argument("--broker", required=True, metavar="HOST:PORT",
                   help="MQTT broker, e.g. 127.0.0.1:1883 (without a port: 1883, or 8883 with TLS)")
    p.add_argument("--table", required=True, metavar="T", help="table id (as in the table's config)")
    p.add_argument("--prefix", default="tablesense", help="topic prefix (default: tablesense)")
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="address of the web server (default: 127.0.0.1:8080; port 0 picks a free one)")
    p.add_argument("--config", metavar="FILE",
                   help="the table's config (TOML): shows its side wagers, paytables and limits")
    add_auth_arguments(p)
    p.set_defaults(func=run)


async def _serve(args: argparse.Namespace, broker: tuple[str, int], info: dict[str, Any] | None,
                 auth: BrokerAuth, stop_requested: threading.Event) -> int:
    loop = asyncio.get_running_loop()
    loop.set_default_executor(_DaemonThreadExecutor(thread_name_prefix="signage-io"))
    done = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # before anything is started or printed
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, done.set)
    if stop_requested.is_set():  # a signal while the config was read
        return 0
    try:
        url, stop = await start_signage(broker[0], broker[1], args.table, args.prefix, args.listen, info,
                                        auth=auth)
    except OSError as exc:
        raise UsageError(f"signage: cannot listen on {args.listen}: {exc.strerror or exc}") from None
    try:
        if not done.is_set():
            print(f"tablesense signage: table {args.table} on {url}", flush=True)
            await done.wait()
    finally:
        await stop()
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the display until interrupted.

    Returns 0 when stopped by SIGTERM or SIGINT (at any point after the arguments were parsed).

    Raises UsageError (one line) for a bad --broker/--listen/--table/--prefix/--config, and for a
    credentials file that is missing, malformed or accessible by other users, or a TLS file that cannot
    be loaded (:func:`daemon.broker_auth.auth_from_args`).
    """
    stop_requested = threading.Event()

    def early_stop(_signum: int, _frame: FrameType | None) -> None:
        stop_requested.set()

    for sig in (signal.SIGINT, signal.SIGTERM):  # until the event loop's handlers replace these
        signal.signal(sig, early_stop)
    try:
        broker = parse_peer(args.broker, DEFAULT_TLS_PORT if uses_tls(args) else 1883)
        parse_hostport(args.listen, 8080)
    except ValueError as exc:
        raise UsageError(f"signage: {exc}") from None
    if (problem := option_problem(args.table, args.prefix)) is not None:
        raise UsageError(f"signage: {problem}")
    info = None
    if args.config:
        try:
            cfg = load_config(args.config)
        except ConfigError as exc:
            raise UsageError(f"signage: {exc}") from None
        if cfg.table != args.table:
            raise UsageError(f"signage: --config {args.config} is for table {cfg.table!r}, "
                             f"not {args.table!r}")
        info = table_info(cfg)
    try:
        auth = auth_from_args(args)
    except CredentialsError as exc:
        raise UsageError(f"signage: {exc}") from None
    configure("info", stream=sys.stderr)  # JSON log lines on stderr; stdout carries the URL line
    bind_table(args.table)
    code = asyncio.run(_serve(args, broker, info, auth, stop_requested))
    sys.stdout.flush()
    return code
