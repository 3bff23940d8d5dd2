"""What the relay republishes on the retained topics after a reconnect (docs/mqtt.md, "Retained topics
after a reconnect"), with a real journal and a real Mosquitto the test owns and restarts: a topic never
goes back to an older message; an acknowledgement the relay could not record while another thread held
the journal (a maintenance step, a recall or replay read) is recorded before the journal is asked for the
latest delivered rows.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from journal_support import TABLE, Traffic
from test_mqtt_relay import Subscriber, run_relay, settings, status

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.journal import Journal
from tablesense.daemon.mqtt import Relay

pytestmark = pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")

BASE = f"ts/{TABLE}"


async def wait_until(pred: Any, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(0.02)


async def retained(broker: MosquittoBroker, topic: str) -> dict[str, Any] | None:
    """The retained message on ``topic`` as a fresh subscriber gets it (``None``: none within 2 s)."""
    async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5) as c:
        await c.subscribe(topic, qos=1)
        try:
            async with asyncio.timeout(2.0):
                async for m in c.messages:
                    assert m.retain
                    return dict(json.loads(bytes(m.payload)))  # type: ignore[arg-type]
        except TimeoutError:
            return None
    return None


class JournalHolder:
    """Holds the journal's lock in another thread (as a maintenance step or a recall read does) until
    :meth:`release`."""

    def __init__(self, journal: Journal) -> None:
        self._held, self._release = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, args=(journal,), daemon=True)
        self._thread.start()
        assert self._held.wait(10)

    def _hold(self, journal: Journal) -> None:
        with journal.lock_if_free() as got:
            assert got
            self._held.set()
            self._release.wait()

    def release(self) -> None:
        self._release.set()
        self._thread.join(10)


async def test_retained_topic_never_goes_back_after_a_reconnect(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "b")
    broker.start()
    journal = Journal(tmp_path / "j", TABLE)
    holder: JournalHolder | None = None
    try:
        relay = Relay(settings(broker, TABLE), journal, status)
        task = await run_relay(relay)
        traffic = Traffic()
        for inp, emits in traffic.new_shoe():  # round: betting (retained), delivered and marked
            relay.notify(journal.append(inp, emits))
        await wait_until(lambda: journal.pending_count() == 0)

        inp, emits = traffic.baccarat_round()[1]  # the first card: round: dealing (retained)
        newer = journal.append(inp, emits)
        assert json.loads(newer[0].payload)["phase"] == "dealing"
        holder = JournalHolder(journal)  # the broker's acknowledgement cannot be recorded now
        relay.notify(newer)
        await wait_until(lambda: [r.row_id for r in relay._deferred_marks] == [newer[0].row_id])

        broker.restart()  # persistence keeps the newer round retained
        assert (await retained(broker, f"{BASE}/round") or {}).get("phase") == "dealing"
        async with Subscriber(broker, f"{BASE}/round", "sub-round") as sub:
            await wait_until(lambda: relay.connects >= 2)
            holder.release()  # the busy spell ends while the relay republishes the retained topics
            # the next card: published after whatever the relay republished on reconnecting
            inp, emits = traffic.baccarat_round()[2]
            latest = journal.append(inp, emits)
            relay.notify(latest)
            await sub.wait_for(lambda ms: any(b.get("seq") == latest[0].seq for _, b, _ in ms))
            live = [(b["seq"], b["phase"]) for _, b, keep in sub.messages if not keep]
        # nothing older than what the broker acknowledged went on the topic in between
        assert live == [(latest[0].seq, "dealing")]
        await wait_until(lambda: journal.pending_count() == 0)
        await relay.stop(task)
    finally:
        if holder is not None:
            holder.release()
        journal.close()
        broker.stop()
