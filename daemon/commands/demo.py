"""``tablesense demo``: the whole product on one machine with zero set-up.

It starts a broker (a private ``mosquitto`` on a free loopback port when the binary exists, otherwise an
in-process amqtt broker speaking MQTT 3.1.1, to which the daemon falls back), a simulated shoe and bet
pads on pseudo-terminals, and the daemon itself with a demo table config (journal in a temporary
directory), then deals ``--rounds`` rounds of ``--game`` and shows the live view a signage subscriber
would show (:mod:`daemon.view`): cards as revealed, pair hits with their odds, payouts, the running
win/loss per wager. It ends with a summary. ``--no-ui`` prints plain lines instead.

It also starts the table's signage display (:func:`daemon.signage.server.start_signage`, against the
demo's broker, on 127.0.0.1 and a free port or ``--signage-port``) and prints its URL in the banner
(``tablesense demo: table demo-baccarat, signage display on http://127.0.0.1:PORT/``): open it in a
browser to see the roads, pair banners, side wagers and limits the daemon publishes. ``--no-signage``
skips it. Everything it starts (broker, signage, daemon, simulated devices) is stopped and its temporary
directory removed at the end, and also when it is stopped early: Ctrl-C (SIGINT), SIGTERM and SIGHUP (its
terminal closed) all end it the same way, with exit status 128 + the signal number.

The daemon runs in-process with the same code as ``tablesense run``; its JSON log goes to ``daemon.log``
in the temporary directory (kept with ``--keep``), beside the demo table's config, ``table.toml`` (with
its journal and journal key in the same directory), so ``tablesense recall --config DIR/table.toml`` and
``tablesense verify --config DIR/table.toml`` read the demo's journal, also while it runs.

Killed with SIGKILL, the demo can clean nothing up itself. Its private Mosquitto is started with the
parent-death signal (:class:`daemon.broker.MosquittoBroker` ``die_with_parent``), so the kernel stops it
with the demo; and its temporary directory holds a marker, ``demo.pid`` (the demo's process id and start
time), so the next demo removes the directories of demos that are no longer running
(:func:`sweep_stale_dirs`; a ``--keep`` directory loses its marker and is kept).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import structlog

from tablesense.daemon.cli import UsageError
from tablesense.daemon.commands.monitor import parse_broker
from tablesense.drivers.waits import cancel_and_wait, wait_at_most

__all__ = ["CONFIG_NAME", "DIR_PREFIX", "GAMES", "MARKER", "STOP_SIGNALS", "DemoStopped", "register", "run",
           "run_demo", "sweep_stale_dirs"]

MARKER = "demo.pid"
"""The file in a running demo's temporary directory naming the demo: ``"PID STARTTIME\n"`` (STARTTIME:
field 22 of ``/proc/PID/stat``, so a reused process id is not mistaken for the demo)."""

CONFIG_NAME = "table.toml"
"""The demo table's config in its temporary directory (for ``recall`` and ``verify --config``)."""

DIR_PREFIX = "tablesense-demo-"
"""The demo's temporary directories are ``$TMPDIR/tablesense-demo-*``."""

GAMES = ("baccarat", "ez-baccarat", "blackjack", "uth")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals that end the demo: everything it started is stopped and its temporary directory removed.
Without a handler the default action of SIGTERM and SIGHUP would kill the process at once and leave the
private broker running (adopted by init) and the directory behind. Ctrl-C (SIGINT) is handled the same
way, through the event loop, instead of by ``asyncio.run``'s own handler: that one cancels from inside
whatever Python code the signal interrupts, and a second Ctrl-C raises ``KeyboardInterrupt`` in the
middle of the clean-up (CI once saw the demo still running 20 s after a Ctrl-C)."""


class DemoStopped(Exception):
    """The demo was ended by a signal (``signum``) after cleaning up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def register(subparsers: Any) -> None:
    """Add the ``demo`` sub-command."""
    p = subparsers.add_parser("demo", help="run a simulated table end to end with a live view",
                              description="Start a broker, a simulated shoe and bet pads, and the daemon, "
                                          "deal rounds and show the live table view; ends with a summary.")
    p.add_argument("--game", default="baccarat", choices=GAMES, help="default: baccarat")
    p.add_argument("--rounds", type=int, default=20, help="rounds to deal (default: 20)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the shuffle and the bets (default: random)")
    p.add_argument("--broker", default=None, metavar="HOST:PORT",
                   help="use this broker instead of starting one")
    p.add_argument("--pace", type=float, default=None,
                   help="seconds per card (default: 0.25 with the live view, 0 with --no-ui)")
    p.add_argument("--no-ui", action="store_true", help="plain lines instead of the live view")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (journal, logs)")
    p.add_argument("--signage-port", type=int, default=0, metavar="PORT",
                   help="port of the signage display on 127.0.0.1 (default: a free port)")
    p.add_argument("--no-signage", action="store_true", help="do not start the signage display")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve the daemon's Prometheus metrics on 127.0.0.1:PORT (0: a free port)")
    # --- floor (owner: the floor service, daemon/floor) ---
    p.add_argument("--floor", action="store_true",
                   help="also run the floor service on an SQLite file and its floor page (tablesense floor)")
    p.set_defaults(func=run)


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (field 22 of ``/proc/PID/stat``), ``None`` when there is no such
    process (or no /proc)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        fields = text[text.rindex(")") + 2:].split()
        return fields[19] if fields[0] != "Z" else None
    except (OSError, ValueError, IndexError):
        return None


def _write_marker(directory: Path) -> None:
    """Mark ``directory`` as the temporary directory of this running demo (:data:`MARKER`)."""
    pid = os.getpid()
    (directory / MARKER).write_text(f"{pid} {_start_time(pid) or '?'}\n", encoding="ascii")


def sweep_stale_dirs(tmp_root: str | Path | None = None) -> list[Path]:
    """Remove the temporary directories that demos killed before their clean-up (SIGKILL, a power cut)
    left in ``tmp_root`` (default: :func:`tempfile.gettempdir`): ``tablesense-demo-*`` directories owned
    by this user whose :data:`MARKER` names a process that is no longer running (or a reused process id:
    another start time). A directory without a marker (kept with ``--keep``, or a demo that is just
    starting) or with a marker naming a live demo is left alone; a broker such a demo left running
    (started before brokers died with their demo) is stopped first, when its command line names that
    directory's config. Returns the directories removed; errors are skipped (never raised)."""
    root = Path(tmp_root) if tmp_root is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        candidates = sorted(root.glob(f"{DIR_PREFIX}*"))
    except OSError:
        return removed
    for directory in candidates:
        try:
            if directory.is_symlink() or not directory.is_dir() or directory.stat().st_uid != os.geteuid():
                continue
            marker = (directory / MARKER).read_text(encoding="ascii", errors="replace").split()
        except OSError:
            continue
        if len(marker) != 2 or not marker[0].isdecimal():
            continue
        pid, started = int(marker[0]), marker[1]
        if _start_time(pid) == started or (started == "?" and _start_time(pid) is not None):
            continue  # that demo is running
        _stop_orphan_broker(directory)
        shutil.rmtree(directory, ignore_errors=True)
        if not directory.exists():
            removed.append(directory)
    return removed


def _stop_orphan_broker(directory: Path) -> None:
    """SIGKILL a mosquitto still running with ``directory``'s broker config (its command line says so)."""
    conf = str(directory / "broker" / "mosquitto.conf").encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError, ValueError):
            args = cmdline.read_bytes().split(b"\0")
            if conf in args and any(a.endswith(b"mosquitto") for a in args[:1]):
                os.kill(int(cmdline.parent.name), signal.SIGKILL)


def run(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit status."""
    if args.rounds < 1 or args.rounds > 100_000:
        raise UsageError(f"--rounds must be 1..100000, got {args.rounds}")
    if args.pace is not None and not 0 <= args.pace <= 10:
        raise UsageError(f"--pace must be 0..10 seconds, got {args.pace}")
    if not 0 <= args.signage_port <= 65535:
        raise UsageError(f"--signage-port must be 0..65535, got {args.signage_port}")
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise UsageError(f"--metrics-port must be 0..65535, got {args.metrics_port}")
    broker = parse_broker(args.broker) if args.broker else None
    pace = args.pace if args.pace is not None else (0.0 if args.no_ui else 0.25)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    try:
        lines = asyncio.run(run_demo(args.game, args.rounds, seed, broker=broker, ui=not args.no_ui,
                                     pace=pace, keep=args.keep,
                                     signage_port=None if args.no_signage else args.signage_port,
                                     metrics_port=args.metrics_port, floor=args.floor))
    except KeyboardInterrupt:
        print("demo interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except DemoStopped as exc:
        for sig in STOP_SIGNALS:
            # stopped and cleaned up: a further Ctrl-C has nothing left to stop. Left to Python's
            # default, one arriving after this returned killed the process by SIGINT at its exit
            # (status -2 instead of 130; until here a KeyboardInterrupt still ends in 130)
            signal.signal(sig, signal.SIG_IGN)
        print(f"demo stopped by {exc}", file=sys.stderr)
        return 128 + exc.signum
    if not args.no_ui:
        print()
    print("\n".join(lines))
    return 0


async def run_demo(game: str, rounds: int, seed: int, *, broker: tuple[str, int] | None = None,
                   ui: bool = False, pace: float = 0.0, keep: bool = False,
                   out: Any = None, signage_port: int | None = 0,
                   metrics_port: int | None = None, floor: bool = False) -> list[str]:
    """Run the demo in the current event loop; returns the summary lines.

    ``signage_port``: start the signage display on ``127.0.0.1:signage_port`` (0: a free port) and print
    its URL in the banner line (to ``out``, default stdout) before the first round; ``None``: no display.
    ``metrics_port``: serve the daemon's Prometheus metrics on ``127.0.0.1:metrics_port`` (0: a free
    port; the address is in the banner); the retained health message is published in any case.

    SIGINT, SIGTERM and SIGHUP (:data:`STOP_SIGNALS`) cancel the demo; everything is cleaned up and
    :class:`DemoStopped` raised (a second signal during the clean-up is ignored, so it completes).

    Raises :class:`UsageError` when no broker can be started or reached, or the signage port cannot be
    bound; :class:`DemoStopped` when stopped by one of :data:`STOP_SIGNALS`.
    """
    import aiomqtt

    from tablesense.daemon import metrics
    from tablesense.daemon.app import App
    from tablesense.daemon.broker import AmqttBroker, BrokerError, MosquittoBroker, mosquitto_binary
    from tablesense.daemon.config import parse_config
    from tablesense.daemon.logging import configure
    from tablesense.daemon.signage.server import start_signage
    from tablesense.daemon.view import TableView, summary_lines, watch
    from tablesense.simulators.dealer import SimTable, sim_config_toml

    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    stopped_by: list[int] = []
    cleaning = False

    def on_signal(signum: int) -> None:
        # once, and never during the clean-up: a cancel there would cut it short
        if not stopped_by and main is not None:
            stopped_by.append(signum)
            if not cleaning:
                main.cancel(f"demo stopped by {signal.Signals(signum).name}")

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    sweep_stale_dirs()
    tmp = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
    _write_marker(tmp)
    log = open(tmp / "daemon.log", "w", encoding="utf-8")  # noqa: SIM115 - closed in finally
    root = logging.getLogger()
    saved_logging = (root.handlers[:], root.level)
    configure("info", stream=log, priority_prefix=False)
    mosq: MosquittoBroker | None = None
    amqtt_broker: AmqttBroker | None = None
    protocol = "5"
    tasks: list[asyncio.Task[Any]] = []
    sim: SimTable | None = None
    app: App | None = None
    views: dict[str, TableView] = {}
    stop_signage: Any = None
    metrics_server: Any = None
    signage_url: str | None = None
    stream = out if out is not None else sys.stdout
    floor_demo: Any = None  # --floor: the floor service on an SQLite file (daemon.floor.demo)
    try:
        if broker is not None:
            host, port = broker
        elif mosquitto_binary() is not None:
            mosq = MosquittoBroker(tmp / "broker", persistence=False, die_with_parent=True)
            try:
                mosq.start()
            except BrokerError as exc:
                raise UsageError(str(exc)) from None
            host, port = mosq.host, mosq.port
        else:
            amqtt_broker = AmqttBroker()
            try:
                await amqtt_broker.start()
            except BrokerError as exc:
                raise UsageError(str(exc)) from None
            host, port, protocol = amqtt_broker.host, amqtt_broker.port, "3.1.1"
        dev = tmp / "devices"
        urls = {"shoe": str(dev / "shoe"), "pads": str(dev / "pads")}
        # the demo table's config with its own journal key, made fresh in its temporary directory
        # (docs/journal.md), written there as table.toml: `tablesense recall|verify --config` read it
        import tomllib

        from tablesense.daemon.journal import write_new_key
        from tablesense.simulators.dealer import dump_toml

        write_new_key(tmp / "journal.key")
        doc = tomllib.loads(sim_config_toml(game, urls=urls, host=host, port=port, journal=tmp / "journal",
                                            table=f"demo-{game}", protocol=protocol))
        doc["journal"]["key_file"] = str(tmp / "journal.key")
        config_text = dump_toml(doc)
        (tmp / CONFIG_NAME).write_text(config_text, encoding="utf-8")
        config = parse_config(config_text)
        if signage_port is not None:
            try:
                signage_url, stop_signage = await start_signage(
                    host, port, config.table, prefix=config.mqtt.topic_prefix,
                    listen=f"127.0.0.1:{signage_port}")
            except OSError as exc:
                raise UsageError(f"--signage-port {signage_port}: cannot listen on 127.0.0.1: "
                                 f"{exc.strerror or exc}") from None
        metrics.bind(config.table)
        if metrics_port is not None:
            metrics_server = metrics.start(f"127.0.0.1:{metrics_port}")
            if metrics_server is None:
                raise UsageError(f"--metrics-port {metrics_port}: cannot listen on 127.0.0.1")
        if floor:  # --- floor ---
            from tablesense.daemon.floor.demo import DemoFloor

            floor_demo = DemoFloor(tmp, host, port, protocol, config.mqtt.topic_prefix)
            await floor_demo.start()
            print(f"tablesense demo: floor page on {floor_demo.page_url} (database {floor_demo.path})",
                  file=stream, flush=True)
        print(f"tablesense demo: table {config.table} ({game}), {rounds} rounds, seed {seed}, broker "
              f"{host}:{port}" + (f", signage display on {signage_url}" if signage_url else "")
              + (f", metrics on http://{metrics_server.address}/metrics" if metrics_server else ""),
              file=stream, flush=True)
        # at a watching pace the betting stays open for 8 cards' time: the display shows the last results
        sim = SimTable(config, dev, seed=seed, pace=pace, betting=8 * pace)
        await sim.start()
        app = App(config)
        app.open()
        tasks.append(asyncio.create_task(app.run(), name="daemon"))
        tasks.append(asyncio.create_task(metrics.run_metrics(app, interval=1.0), name="metrics"))
        ready = asyncio.Event()
        table = config.table

        def done(v: dict[str, TableView]) -> bool:
            tv = v.get(table)
            return tv is not None and tv.rounds + tv.voided >= rounds

        watcher = asyncio.create_task(watch(host, port, table=table, ui=ui, out=out, ready=ready,
                                            minor_unit=config.minor_unit, until=done, views=views))
        tasks.append(watcher)
        # subscribed, or the watcher failed (a --broker nobody listens on: at once, not after 15 s)
        subscribed = asyncio.ensure_future(ready.wait())
        await asyncio.wait({subscribed, watcher}, timeout=15, return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            subscribed.cancel()
            failure = watcher.exception() if watcher.done() and not watcher.cancelled() else None
            if isinstance(failure, aiomqtt.MqttError):
                raise UsageError(f"cannot reach the broker at {host}:{port}: {failure}")
            raise UsageError(f"cannot subscribe at the broker {host}:{port}")
        await sim.wait_host(30)
        for _ in range(rounds):
            await sim.play_round()
        await wait_at_most(watcher, 30)
        if floor_demo is not None:  # --- floor ---
            await floor_demo.settle(config.table)
    finally:
        cleaning = True
        if floor_demo is not None:  # --- floor ---
            try:
                await floor_demo.stop()
            except Exception as exc:  # the rest of the clean-up must still run
                print(f"tablesense demo: stopping the floor service failed: {exc}", file=sys.stderr)
        if app is not None:
            app.stop()
        stuck = await cancel_and_wait([t for t in tasks if t.get_name() != "daemon"])
        await asyncio.gather(*(t for t in tasks if t not in stuck), return_exceptions=True)
        if stop_signage is not None:
            await stop_signage()
        if metrics_server is not None:
            metrics_server.close()
        if sim is not None:
            await sim.close()
        if amqtt_broker is not None:
            await amqtt_broker.stop()
        if mosq is not None:
            mosq.stop()
        structlog.reset_defaults()
        root.handlers[:], root.level = saved_logging
        log.close()
        if keep:
            with contextlib.suppress(OSError):
                (tmp / MARKER).unlink()  # kept: never swept by a later demo
            print(f"demo files kept in {tmp}; its journal: tablesense recall --config {tmp / CONFIG_NAME} "
                  f"(or verify --config ...)", file=sys.stderr)
        else:
            with contextlib.suppress(OSError):
                shutil.rmtree(tmp)
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
        if stopped_by and main is not None:
            if main.cancelling():
                main.uncancel()
            raise DemoStopped(stopped_by[0])
    lines = [f"tablesense demo: {game}, {rounds} rounds, seed {seed}, broker {host}:{port}"
             + (" (amqtt, MQTT 3.1.1)" if amqtt_broker is not None else "")]
    for v in views.values():
        lines += summary_lines(v)
    if floor_demo is not None:  # --- floor ---
        lines += floor_demo.summary
    return lines
