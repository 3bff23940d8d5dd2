"""A quiet table writes its delivery marks without waiting for the next journal write.

The relay records the broker's acknowledgements in memory and the journal writes them in batches (256,
or once the oldest waited 5 s) with the next append or acknowledgement. After a table's last round
nothing more comes: the marks stayed unwritten, ``tablesense verify`` showed the round's messages
"awaiting delivery" minutes later, and a crash would have published them again. Now the relay writes
them itself a few seconds after the last acknowledgement (``Relay._seal_marks_later``).

A real daemon (``App``) and Mosquitto; the journal file is read by a separate SQLite connection while the
daemon still runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import pytest
from faults.harness import wait_until
from test_command_hardening import live_round
from test_mqtt_duplicate_instance import config

from tablesense.daemon.app import App
from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.mqtt import SEAL_MARKS_AFTER

pytestmark = [pytest.mark.timeout(90),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


def pending_on_file(journal: Path) -> int:
    """Messages the journal FILE holds as awaiting delivery (a separate read-only connection)."""
    [path] = [p for p in journal.iterdir() if p.suffix == ".sqlite"]
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM pending").fetchone()[0])
    finally:
        conn.close()


async def test_after_the_last_round_the_journal_file_shows_nothing_awaiting_delivery(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    app = App(config(broker, tmp_path / "journal", "table-t1"))
    app.open()
    task = asyncio.create_task(app.run())
    try:
        await wait_until(lambda: app.relay is not None and app.relay.connected, 20, "connected")
        feed = await live_round(app)
        assert await feed.card("3D") and await feed.card("4S")  # the round completes: the last one
        assert app.journal is not None and app.relay is not None
        await wait_until(lambda: app.journal is not None and app.journal.pending_count() == 0, 20,
                         "every message acknowledged by the broker")
        assert app.relay.delivered > 10
        await wait_until(lambda: pending_on_file(tmp_path / "journal") == 0, SEAL_MARKS_AFTER + 5,
                         "the acknowledgements written to the journal file")
        assert not task.done()  # while the daemon still runs, with nothing journaled since
    finally:
        app.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 20)
        broker.stop()
