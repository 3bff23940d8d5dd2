"""``tablesense run --config FILE``: the service entry point (systemd ``Type=notify``).

Loads and validates the table config, opens (and replays) the journal, then runs the daemon
(:class:`daemon.app.App`) until SIGTERM or SIGINT, and exits 0. Logs are JSON lines on stdout
(:mod:`daemon.logging`). A bad config, a journal in use by another process or in an unusable directory,
or a credentials file other users can read is one line on stderr and exit status 2; nothing is started
then. A *damaged* journal is not a start error: the daemon runs refusing to settle (a critical
``JOURNAL_DAMAGED`` alarm, status ``refusing``, no device input applied) until SIGTERM, exit 0
(:mod:`daemon.app`, docs/journal.md "Integrity").

SIGHUP (``systemctl reload``) never stops the daemon: it re-reads the config file (:func:`reload_config`)
and applies the keys that are safe to change under a running table, :data:`RELOADABLE` (the operator
command rate limit); every other changed key is logged (``config_change_needs_restart``, naming the
keys) and takes effect at the next start (``systemctl restart``). A config that no longer validates is
logged (``config_reload_failed``) and the daemon carries on with the one it has (docs/configuration.md,
"Reloading").

SIGTERM/SIGINT are handled from before the journal is opened: a signal during the start-up integrity check
and replay (1-2 s for a few thousand inputs) lets the replay finish (a read-only pass, never cut short),
closes the journal and exits 0 without opening any device or connecting (log
``daemon_stopped_at_startup``); a signal after that and before the event loop takes the signals over
makes :meth:`App.run` stop at once, cleanly (docs/reliability.md). A SIGHUP in that time is remembered
and the reload done once the daemon runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import time
from types import FrameType
from typing import TYPE_CHECKING, Any

import msgspec

from tablesense.daemon import metrics
from tablesense.daemon.cli import UsageError
from tablesense.daemon.config import ConfigError, TableConfig, load_config
from tablesense.daemon.logging import configure, get_logger

if TYPE_CHECKING:
    from tablesense.daemon.app import App

__all__ = ["RELOADABLE", "changed_keys", "register", "reload_config", "run"]

RELOADABLE = ("mqtt.command_rate", "mqtt.command_burst")
"""Config keys SIGHUP applies to a running daemon. Everything else (devices, wagers, spots, the broker,
the journal ...) shapes state that lives for the whole process (open devices, the round in play, the
broker session, the open journal) and takes a restart."""

log = get_logger(component="run")


def register(subparsers: Any) -> None:
    """Add the ``run`` sub-command."""
    p = subparsers.add_parser("run", help="run the table daemon (the systemd service entry point)",
                              description="Run the table daemon: devices in, state machine, journal, "
                                          "MQTT out. Stops cleanly on SIGTERM/SIGINT (exit 0); SIGHUP "
                                          "reloads the config keys that are safe to change live.")
    p.add_argument("--config", required=True, metavar="FILE", help="the table config (TOML)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                   help="lowest level logged (default: info)")
    p.set_defaults(func=run)


def changed_keys(old: TableConfig, new: TableConfig) -> list[str]:
    """Dotted keys whose values differ between two configs, e.g. ``["mqtt.command_rate", "spots.7"]``
    (an entry of ``[spots]``, ``[wagers]`` or ``[devices]`` counts as one key), sorted."""
    out: list[str] = []

    def diff(a: Any, b: Any, path: str) -> None:
        if a == b:
            return
        if not (isinstance(a, dict) and isinstance(b, dict)):
            out.append(path)
            return
        for key in sorted(set(a) | set(b)):
            where = f"{path}.{key}" if path else str(key)
            if path in ("spots", "wagers", "devices"):
                if a.get(key) != b.get(key):
                    out.append(where)
            else:
                diff(a.get(key), b.get(key), where)

    diff(msgspec.to_builtins(old), msgspec.to_builtins(new), "")
    return sorted(out)


def reload_config(app: App, path: str) -> list[str]:
    """Re-read ``path`` and apply its :data:`RELOADABLE` keys to ``app``; returns the keys applied.

    Logs ``config_reloaded`` (applied keys, and the changed keys that need a restart), also
    ``config_change_needs_restart`` at warning level naming those; ``config_reload_failed`` (error) when
    the file no longer validates, in which case nothing changes. Never raises for a bad file.
    """
    try:
        new = load_config(path)
    except ConfigError as exc:
        log.error("config_reload_failed", config=path, error=str(exc), problems=len(exc.issues),
                  message="config not reloaded; the daemon keeps running with the config it has")
        return []
    changed = changed_keys(app.config, new)
    applied = [k for k in changed if k in RELOADABLE]
    later = [k for k in changed if k not in RELOADABLE]
    if applied:
        app.command_limit.rate = float(new.mqtt.command_rate)
        app.command_limit.burst = int(new.mqtt.command_burst)
        mqtt = msgspec.structs.replace(app.config.mqtt, command_rate=new.mqtt.command_rate,
                                       command_burst=new.mqtt.command_burst)
        app.config = msgspec.structs.replace(app.config, mqtt=mqtt)
    log.info("config_reloaded", config=path, applied=applied, needs_restart=later)
    if later:
        log.warning("config_change_needs_restart", keys=later,
                    message=f"changed in {path} but applied only at the next start (systemctl restart): "
                            f"{', '.join(later)}")
    return applied


def freeze_startup_heap() -> tuple[int, float]:
    """Collect once, then move every object alive now (modules, config, the machine and journal state
    replayed at start-up) out of the garbage collector's reach (``gc.freeze``, Python >= 3.7). Returns
    ``(objects frozen, seconds the collection took)``.

    Why: a full (generation 2) collection pauses the event loop for as long as it takes to traverse
    every tracked object; with the start-up heap in it that was 17-27 ms on the benchmark VM, twice in a
    2,000-settlement run, and it made the p99 of card -> settlement. Frozen, the same collection took
    2.6 ms (docs/performance.md). Objects frozen are still freed by reference counting; only a reference
    cycle among them that becomes garbage later stays, at most what start-up made, never growing."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count(), time.perf_counter() - started


async def _serve(app: App, path: str, reload_pending: bool) -> int:
    """:meth:`App.run` with SIGHUP handled as :func:`reload_config`, the metrics (``[metrics]``: listener,
    textfile) and the retained health message (:mod:`daemon.metrics`)."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, reload_config, app, path)
    cfg = app.config.metrics
    metrics.bind(app.config.table)
    server = metrics.start(cfg.listen)
    watcher = asyncio.create_task(metrics.run_metrics(app, textfile=cfg.textfile, interval=cfg.interval),
                                  name="metrics")
    try:
        if reload_pending:
            reload_config(app, path)
        return await app.run()
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        if server is not None:
            server.close()
        loop.remove_signal_handler(signal.SIGHUP)


def run(args: argparse.Namespace) -> int:
    """Run the daemon for ``args.config``; returns the exit status.

    Raises:
        UsageError: unusable config, journal or credentials (one line).
    """
    from tablesense.daemon.app import STOP_SIGNALS, App, StartupError

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    configure(args.log_level)
    app = App(config, install_signals=True, config_path=args.config)
    log = get_logger(component="run")
    early: list[int] = []
    hangups: list[int] = []

    def on_early_signal(signum: int, frame: FrameType | None) -> None:
        early.append(signum)
        app.stop()  # if it comes after the check below, App.run stops as soon as it starts

    def on_early_hangup(signum: int, frame: FrameType | None) -> None:
        hangups.append(signum)  # reloaded once the loop runs

    previous = {sig: signal.signal(sig, on_early_signal) for sig in STOP_SIGNALS}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_early_hangup)
    try:
        try:
            app.open()
        except StartupError as exc:
            raise UsageError(str(exc)) from None
        if early:
            if app.journal is not None:
                app.journal.close()
            log.info("daemon_stopped_at_startup", signal=signal.Signals(early[0]).name)
            return 0
        frozen, took = freeze_startup_heap()
        log.info("startup_heap_frozen", objects=frozen, collect_ms=round(took * 1000, 1))
        return asyncio.run(_serve(app, args.config, bool(hangups)))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
