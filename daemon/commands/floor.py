"""``tablesense floor``: the reference floor service, and ``tablesense floor report``.

    tablesense floor --broker HOST:PORT --database URL [--client-id floor-1] [--group floor] [--prefix P]
                     [--http 127.0.0.1:PORT] [--gaming-day-start H] [--timezone ZONE]
                     [--tls | --ca-file FILE] [--cert-file FILE [--key-file FILE]] [--credentials-file FILE]
    tablesense floor report --database URL [--day YYYY-MM-DD] [--table T] [--format table|csv|json]
                     [--gaming-day-start H] [--timezone ZONE]

The service subscribes to every table under the prefix and stores every table message in the database
(``postgresql://...`` in production, ``sqlite:///path`` for a first look), exactly once; it tracks each
table's ``seq`` and asks for ``cmd/replay`` when something is missing (:mod:`tablesense.daemon.floor`,
docs/floor.md). Several processes with different ``--client-id`` and the same ``--group`` share the
load. It runs until SIGTERM/SIGINT (exit 0); JSON log lines on stdout, the page URL on stderr.

``report`` prints the table-games figures (handle, win, hold, theoretical win) per gaming day, table,
shoe and wager (:mod:`tablesense.daemon.floor.accounting`). A bad option, an unreachable or too new
database, or a bad credentials file is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from datetime import date
from typing import Any

from tablesense.daemon.broker_auth import DEFAULT_TLS_PORT, add_auth_arguments, auth_from_args, uses_tls
from tablesense.daemon.cli import UsageError

__all__ = ["register", "run", "run_report"]


def _add_gaming_day(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gaming-day-start", type=int, default=6, metavar="H",
                   help="hour (0-23, casino time) the gaming day starts (default: 6)")
    p.add_argument("--timezone", default="UTC", metavar="ZONE",
                   help="the casino's time zone, an IANA name such as Europe/Malta (default: UTC)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``floor`` sub-command (and its ``report`` sub-command)."""
    p = subparsers.add_parser(
        "floor", help="the floor service: every table's messages into PostgreSQL, exactly once; floor page",
        description="Subscribe to every table, store each message exactly once (PostgreSQL or SQLite), "
                    "track each table's seq and request replays for gaps; optionally serve the floor page. "
                    "'tablesense floor report' prints the table-games figures.")
    p.add_argument("--broker", metavar="HOST:PORT", help="MQTT broker (required to run the service)")
    p.add_argument("--database", metavar="URL",
                   help="postgresql://user@host/dbname, or sqlite:///path/floor.sqlite (required)")
    p.add_argument("--client-id", default="floor-1", metavar="ID",
                   help="MQTT client id and session (production: the broker user, floor-1, floor-2, ...)")
    p.add_argument("--group", default="floor", help="shared-subscription group of the floor processes")
    p.add_argument("--prefix", default="tablesense", help="topic prefix (default: tablesense)")
    p.add_argument("--http", metavar="HOST:PORT", help="serve the floor page here, e.g. 127.0.0.1:8090")
    p.add_argument("--protocol", default="5", choices=("5", "3.1.1"), help="MQTT version (default 5)")
    _add_gaming_day(p)
    add_auth_arguments(p)
    p.set_defaults(func=run)
    sub = p.add_subparsers(dest="floor_command", metavar="{report}", parser_class=type(p))
    r = sub.add_parser("report", help="table-games figures per gaming day, table, shoe and wager",
                       description="Rounds, handle, player net, house win, commission, hold % and "
                                   "theoretical win (exact house edge x handle) per gaming day, table, shoe "
                                   "and wager, void rounds apart; money as exact decimals.")
    r.add_argument("--database", required=True, metavar="URL", help="the floor database")
    r.add_argument("--day", metavar="YYYY-MM-DD", help="one gaming day (default: every day with data)")
    r.add_argument("--table", metavar="T", help="one table")
    r.add_argument("--format", default="table", choices=("table", "csv", "json"), help="default: table")
    _add_gaming_day(r)
    r.set_defaults(func=run_report)


def _gaming_day(args: argparse.Namespace) -> Any:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from tablesense.daemon.floor.accounting import GamingDay

    if not 0 <= args.gaming_day_start <= 23:
        raise UsageError(f"floor: --gaming-day-start must be 0..23, got {args.gaming_day_start}")
    try:
        ZoneInfo(args.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"floor: --timezone {args.timezone!r} is not a known IANA time zone") from None
    return GamingDay(args.gaming_day_start, args.timezone)


def _database(url: str | None) -> str:
    from tablesense.daemon.floor.store import open_database

    if not url:
        raise UsageError("floor: --database is required (postgresql://... or sqlite:///path)")
    try:
        open_database(url)
    except ValueError as exc:
        raise UsageError(f"floor: --database {exc}") from None
    return url


def run_report(args: argparse.Namespace) -> int:
    """Print the report; exit status 0 (also when there is nothing to report)."""
    from tablesense.daemon.floor.accounting import build_report, render_csv, render_json, render_table
    from tablesense.daemon.floor.migrations import SchemaTooNew, current_version
    from tablesense.daemon.floor.store import DatabaseError, open_database

    gd = _gaming_day(args)
    url = _database(args.database)
    day = None
    if args.day:
        try:
            day = date.fromisoformat(args.day)
        except ValueError:
            raise UsageError(f"floor report: --day {args.day!r} is not a date (YYYY-MM-DD)") from None
        if not date(1969, 12, 31) <= day <= date(9000, 1, 1):  # the days of the times the floor stores
            raise UsageError(f"floor report: --day {args.day!r} is outside 1969-12-31 .. 9000-01-01 (the "
                             "gaming days of the times the floor stores)")

    async def go() -> Any:
        db = open_database(url)
        try:
            if await current_version(db) == 0:
                raise UsageError(f"floor report: {args.database}: not a floor database (no schema); "
                                 "run 'tablesense floor' against it first")
            return await build_report(db, gd, day, args.table)
        finally:
            await db.close()

    try:
        report = asyncio.run(go())
    except (DatabaseError, SchemaTooNew) as exc:
        raise UsageError(f"floor report: {exc}") from None
    if args.format == "json":
        print(render_json(report))
    elif args.format == "csv":
        sys.stdout.write(render_csv(report))
    else:
        render_table(report)
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the floor service until SIGTERM/SIGINT; exit status 0."""
    from tablesense.daemon.floor.consumer import FloorSettings
    from tablesense.daemon.floor.migrations import SchemaTooNew
    from tablesense.daemon.floor.service import FloorOptions, FloorService
    from tablesense.daemon.floor.store import DatabaseError
    from tablesense.daemon.logging import configure
    from tablesense.daemon.mqtt import CredentialsError
    from tablesense.daemon.netaddr import parse_hostport, parse_peer
    from tablesense.daemon.topics import option_problem

    if not args.broker:
        raise UsageError("floor: --broker HOST:PORT is required (or use 'tablesense floor report')")
    url = _database(args.database)
    gd = _gaming_day(args)
    try:
        host, port = parse_peer(args.broker, DEFAULT_TLS_PORT if uses_tls(args) else 1883)
        if args.http:
            parse_hostport(args.http, 8090)
    except ValueError as exc:
        raise UsageError(f"floor: {exc}") from None
    if (problem := option_problem("floor", args.prefix)) is not None:
        raise UsageError(f"floor: {problem}")
    for name, value in (("--client-id", args.client_id), ("--group", args.group)):
        if not value or len(value) > 64 or any(c in value for c in "/+#$ ") or not value.isprintable():
            raise UsageError(f"floor: {name} {value!r}: 1-64 printable characters without / + # $ or spaces")
    try:
        auth = auth_from_args(args)
    except CredentialsError as exc:
        raise UsageError(f"floor: {exc}") from None
    settings = FloorSettings(host, port, client_id=args.client_id, prefix=args.prefix, group=args.group,
                             protocol=args.protocol, username=auth.username, password=auth.password,
                             tls=auth.tls)
    configure("info")

    async def serve() -> int:
        service = FloorService(settings, FloorOptions(url, http=args.http, gaming_day=gd))
        try:
            await service.start()
        except (DatabaseError, SchemaTooNew) as exc:
            await service.stop()
            raise UsageError(f"floor: {exc}") from None
        except OSError as exc:
            await service.stop()
            raise UsageError(f"floor: cannot listen on {args.http}: {exc.strerror or exc}") from None
        if service.page_url:
            print(f"tablesense floor: floor page on {service.page_url}", file=sys.stderr, flush=True)
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, done.set)
        await done.wait()
        await service.stop()
        return 0

    return asyncio.run(serve())
