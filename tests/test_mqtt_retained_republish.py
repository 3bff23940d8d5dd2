"""What the relay republishes on the retained topics after a reconnect (docs/mqtt.md, "Retained topics
after a reconnect"), with a real journal and a real Mosquitto the test owns and restarts:

* a topic never goes back to an older message, also when the broker's acknowledgement of the newer one
  could not be recorded yet (another thread held the journal: a maintenance step, a recall or replay read);
* a latest delivered retained message that fails its seal (one byte altered in an old block) is never
  sent; everything else is delivered, one critical ``JOURNAL_DAMAGED`` alarm names it, and the relay
  does not crash (it used to crash at every connection and deliver nothing but its status);
* a retained message the broker refused and that is tried again once a newer one on its topic went
  through is skipped, not published behind it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import threading
from pathlib import Path
from typing import Any

import aiomqtt
import paho.mqtt.client as paho
import pytest
from journal_support import TABLE, Traffic
from paho.mqtt.enums import CallbackAPIVersion
from test_mqtt_relay import Subscriber, run_relay, settings, status

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.journal import Journal
from tablesense.daemon.mqtt import Relay
from tablesense.drivers.events import LinkState

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


def publish_allowed(broker: MosquittoBroker, topic: str) -> bool:
    """Whether the broker acknowledges a QoS 1 publish on ``topic`` positively (its ACL allows it)."""
    reasons: list[Any] = []
    done = threading.Event()
    c = paho.Client(CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)

    def on_publish(_c: Any, _u: Any, _mid: int, reason: Any, _p: Any) -> None:
        reasons.append(reason)
        done.set()

    c.on_publish = on_publish
    c.connect(broker.host, broker.port)
    c.loop_start()
    try:
        c.publish(topic, b"{}", qos=1)
        assert done.wait(10)
    finally:
        c.disconnect()
        c.loop_stop()
    return not reasons[0].is_failure


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


def journal_with_old_device_status(directory: Path) -> tuple[int, int]:
    """A journal whose first message is the shoe's retained ``devices/shoe`` status, followed by 4 shoes
    of 20 rounds, everything delivered; then one byte of that first message is altered in the file (in
    an old block, which the start-up check does not read). Returns ``(seq of the damaged message, seq of
    the latest round state)``."""
    traffic = Traffic()
    journal = Journal(directory, TABLE, retention_rounds=10)
    latest_round = 0
    first = journal.append(*traffic.device_state("shoe", LinkState.ONLINE))
    assert first[0].seq == 1 and first[0].retain
    for _ in range(4):
        steps = traffic.new_shoe() + traffic.quiet()
        for _ in range(20):
            steps += traffic.baccarat_round()
        for inp, emits in steps:
            for row in journal.append(inp, emits):
                if str(getattr(row.channel, "value", row.channel)).lower() == "round":
                    latest_round = row.seq
    for row in journal.pending(100_000):
        journal.mark_delivered(row.row_id)
    journal.close()
    conn = sqlite3.connect(directory / "journal.sqlite")
    try:
        block = conn.execute("SELECT id, unit FROM blocks WHERE first_seq <= 1 AND last_seq >= 1").fetchone()
        if block[1]:  # archived: alter its archive unit
            part_id, part = conn.execute("SELECT id, part FROM archive ORDER BY id LIMIT 1").fetchone()
            altered = bytearray(part)
            altered[len(altered) // 2] ^= 0x01
            conn.execute("UPDATE archive SET part=? WHERE id=?", (bytes(altered), part_id))
        else:
            (row,) = conn.execute("SELECT row FROM outbox WHERE seq=1").fetchone()
            altered = bytearray(row)
            altered[-5] ^= 0x01
            conn.execute("UPDATE outbox SET row=? WHERE seq=1", (bytes(altered),))
        conn.commit()
    finally:
        conn.close()
    return 1, latest_round


def damage_alarms(sub: Subscriber) -> list[dict[str, Any]]:
    return [b for t, b, _ in sub.messages if t == f"{BASE}/alarms" and b.get("code") == "JOURNAL_DAMAGED"]


async def test_a_damaged_old_retained_message_is_left_out_and_everything_else_delivered(
        tmp_path: Path) -> None:
    damaged_seq, round_seq = journal_with_old_device_status(tmp_path / "j")
    journal = Journal(tmp_path / "j", TABLE, retention_rounds=10)  # opens: the start-up check passes
    broker = MosquittoBroker(tmp_path / "b")
    broker.start()
    traffic = Traffic(shoe=5)
    try:
        async with Subscriber(broker, f"{BASE}/#", "sub-damaged") as sub:
            relay = Relay(settings(broker, TABLE), journal, status)
            task = await run_relay(relay)
            new = [row for inp, emits in traffic.new_shoe() + traffic.baccarat_round()
                   for row in journal.append(inp, emits)]
            relay.notify(new)
            await sub.wait_for(lambda ms: {b.get("msg_id") for _, b, _ in ms} >= {r.msg_id for r in new},
                               timeout=30)
            await wait_until(lambda: journal.pending_count() == 0)
            assert relay.crashes == 0
            # the damaged message was never sent; the other retained topics were republished
            assert not [b for t, b, _ in sub.messages if t == f"{BASE}/devices/shoe"]
            assert next(b["seq"] for t, b, _ in sub.messages if t == f"{BASE}/round") == round_seq
            (alarm,) = damage_alarms(sub)
            assert alarm["severity"] == "critical" and alarm["seq"] == 0 and alarm["alarm_id"] == "journal"
            assert f"seq {damaged_seq} on {BASE}/devices/shoe" in alarm["text"]
            assert "fails its seal" in alarm["text"]

            # another connection: the same damage raises no second alarm, and delivery goes on
            broker.restart()
            await wait_until(lambda: relay.connects >= 2)
            more = [row for inp, emits in traffic.baccarat_round() for row in journal.append(inp, emits)]
            relay.notify(more)
            await sub.wait_for(lambda ms: {b.get("msg_id") for _, b, _ in ms} >= {r.msg_id for r in more},
                               timeout=30)
            await wait_until(lambda: journal.pending_count() == 0)
            assert relay.crashes == 0 and len(damage_alarms(sub)) == 1
            assert not [b for t, b, _ in sub.messages if t == f"{BASE}/devices/shoe"]
            await relay.stop(task)
    finally:
        journal.close()
        broker.stop()


async def test_a_refused_retained_message_is_never_published_behind_a_newer_one(tmp_path: Path) -> None:
    """The broker refuses a retained ``round`` message (ACL: 0x87), then allows the topic again (ACL
    reloaded) and acknowledges a newer one; the refused one, tried again at the next connection, is
    skipped instead of taking the topic back (docs/mqtt.md, "A refused publish")."""
    acl = tmp_path / "acl"
    acl.write_text(f"topic readwrite #\ntopic deny {BASE}/round\ntopic deny {BASE}/probe\n")
    broker = MosquittoBroker(tmp_path / "b", acl_file=str(acl))
    broker.start()
    journal = Journal(tmp_path / "j", TABLE)
    try:
        relay = Relay(settings(broker, TABLE), journal, status, retry_rejected_after=3600.0)
        task = await run_relay(relay)
        traffic = Traffic()
        (refused,) = [row for inp, emits in traffic.new_shoe() for row in journal.append(inp, emits)]
        relay.notify([refused])
        await wait_until(lambda: relay.rejected >= 1)

        acl.write_text("topic readwrite #\n")
        assert broker.pid is not None
        os.kill(broker.pid, signal.SIGHUP)  # Mosquitto reloads its ACL file
        for _ in range(500):
            if await asyncio.to_thread(publish_allowed, broker, f"{BASE}/probe"):
                break
        assert await asyncio.to_thread(publish_allowed, broker, f"{BASE}/probe")
        inp, emits = traffic.baccarat_round()[1]  # round: dealing, newer
        newer = journal.append(inp, emits)
        relay.notify(newer)
        await wait_until(lambda: journal.pending_count() == 1)  # the newer one went through
        assert (await retained(broker, f"{BASE}/round") or {}).get("seq") == newer[0].seq

        broker.restart()  # the next connection tries the refused one again
        await wait_until(lambda: relay.connects >= 2 and journal.pending_count() == 0)
        assert (await retained(broker, f"{BASE}/round") or {}).get("seq") == newer[0].seq
        assert refused.seq < newer[0].seq and relay.crashes == 0
        await relay.stop(task)
    finally:
        journal.close()
        broker.stop()
