"""``tablesense run --config FILE``: the service entry point (systemd ``Type=notify``).

Loads and validates the table config, opens (and replays) the journal, then runs the daemon
(:class:`daemon.app.App`) until SIGTERM or SIGINT, and exits 0. Logs are JSON lines on stdout
(:mod:`daemon.logging`). SIGHUP stops it cleanly like SIGTERM (no config reload: restart to apply a
new config; :data:`daemon.app.STOP_SIGNALS`). A bad config, a journal in use by another process or in an
unusable directory, or a credentials file other users can read is one line on stderr and exit status 2;
nothing is started then. A *damaged* journal is not a start error: the daemon runs refusing to settle (a
critical ``JOURNAL_DAMAGED`` alarm, status ``refusing``, no device input applied) until SIGTERM, exit 0
(:mod:`daemon.app`, docs/journal.md "Integrity").

SIGTERM/SIGINT/SIGHUP are handled from before the journal is opened: a signal during the start-up
integrity check and replay (1-2 s for a few thousand inputs) lets the replay finish (a read-only pass,
never cut short), closes the journal and exits 0 without opening any device or connecting (log
``daemon_stopped_at_startup``); a signal after that and before the event loop takes the signals over
makes :meth:`App.run` stop at once, cleanly (docs/reliability.md).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from types import FrameType
from typing import Any

from tablesense.daemon.cli import UsageError
from tablesense.daemon.config import ConfigError, load_config
from tablesense.daemon.logging import configure, get_logger

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``run`` sub-command."""
    p = subparsers.add_parser("run", help="run the table daemon (the systemd service entry point)",
                              description="Run the table daemon: devices in, state machine, journal, "
                                          "MQTT out. Stops cleanly on SIGTERM/SIGINT/SIGHUP (exit 0).")
    p.add_argument("--config", required=True, metavar="FILE", help="the table config (TOML)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                   help="lowest level logged (default: info)")
    p.set_defaults(func=run)


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

    def on_early_signal(signum: int, frame: FrameType | None) -> None:
        early.append(signum)
        app.stop()  # if it comes after the check below, App.run stops as soon as it starts

    previous = {sig: signal.signal(sig, on_early_signal) for sig in STOP_SIGNALS}
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
        return asyncio.run(app.run())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
