"""The relay keeps publishing while earlier messages wait: for their PUBACKs (held back by a loopback
proxy in front of a real Mosquitto the test owns) or for the journal's lock (held by another thread, as
an append or maintenance holds it). Before, the relay waited for every acknowledgement of a burst, and
recorded them in a worker thread that waited for the lock, before it published the next commit's rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from faults.harness import wait_until
from journal_support import TABLE, Traffic
from test_mqtt_relay import MemoryOutbox, status

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.journal import Journal
from tablesense.daemon.mqtt import MqttSettings, Relay

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


class AckHoldProxy:
    """Loopback TCP proxy relay <-> broker: everything the relay sends is forwarded at once; what the
    broker sends back (PUBACKs) is buffered while :attr:`held` and forwarded, in order, once released."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.host, self.port = "127.0.0.1", 0
        self.held = False
        self._release = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    def hold(self) -> None:
        self.held = True
        self._release.clear()

    def release(self) -> None:
        self.held = False
        self._release.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(*self.target)
        self._writers += [writer, up_w]
        for coro in (self._pump(reader, up_w, gated=False), self._pump(up_r, writer, gated=True)):
            t = asyncio.create_task(coro)
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, gated: bool) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                while gated and self.held:
                    await self._release.wait()
                writer.write(data)
                await writer.drain()
        writer.close()

    def drop(self) -> None:
        """Close every connection made so far (as a broken link would); new ones are forwarded."""
        for w in self._writers:
            with contextlib.suppress(Exception):
                w.transport.abort()
        self._writers.clear()

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        for w in self._writers:
            w.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@pytest.fixture
async def world(tmp_path: Path) -> Any:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    proxy = AckHoldProxy(broker.host, broker.port)
    await proxy.start()
    yield broker, proxy
    await proxy.close()
    broker.stop()


class Watcher:
    """A subscriber straight to the broker (not through the proxy) collecting payloads of ``topic``."""

    def __init__(self, broker: MosquittoBroker, topic: str) -> None:
        self.broker, self.topic = broker, topic
        self.got: list[bytes] = []
        self._ready = asyncio.Event()

    async def run(self) -> None:
        async with aiomqtt.Client(self.broker.host, self.broker.port,
                                  protocol=aiomqtt.ProtocolVersion.V5) as c:
            await c.subscribe(self.topic, qos=1)
            self._ready.set()
            async for m in c.messages:
                self.got.append(bytes(m.payload))  # type: ignore[arg-type]

    async def start(self) -> asyncio.Task[None]:
        task = asyncio.create_task(self.run())
        await asyncio.wait_for(self._ready.wait(), 10)
        return task


async def test_new_rows_are_published_while_the_last_bursts_pubacks_are_held(world: Any) -> None:
    broker, proxy = world
    outbox = MemoryOutbox()
    settings = MqttSettings(host=proxy.host, port=proxy.port, table="O1", client_id="tablesense-O1",
                            prefix="ts", keepalive=60)
    relay = Relay(settings, outbox, status)
    watcher = Watcher(broker, "ts/O1/settlements")
    watching = await watcher.start()
    task = asyncio.create_task(relay.run())
    try:
        await wait_until(lambda: relay.connected, 20, "connected")
        proxy.hold()  # from now on no PUBACK reaches the relay
        first = [outbox.add("settlements", {"n": i}) for i in range(3)]
        relay.notify(first)
        await wait_until(lambda: len(watcher.got) == 3, 10, "the first burst at the subscriber")
        second = [outbox.add("settlements", {"n": 10 + i}) for i in range(3)]
        relay.notify(second)
        # the first burst is still unacknowledged: the second goes out anyway, in row order
        await wait_until(lambda: len(watcher.got) == 6, 10, "the second burst while the first waits")
        assert not outbox.delivered, "nothing can be marked delivered while the PUBACKs are held"
        assert [int(p.split(b'"n": ')[1].split(b"}")[0]) for p in watcher.got] == [0, 1, 2, 10, 11, 12]
        proxy.release()
        await wait_until(lambda: outbox.delivered == {r.row_id for r in first + second}, 10,
                         "every row marked once its PUBACK arrives")
        assert relay.delivered == 6 and relay.connects == 1
    finally:
        proxy.release()
        await relay.stop(task)
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)


class JournalRelay:
    """A relay publishing a real journal's rows (through ``host``:``port``), a watcher on the broker, and
    a thread that can hold the journal's lock as an append or maintenance does in a worker thread."""

    def __init__(self, broker: MosquittoBroker, journal_dir: Path, host: str, port: int,
                 **settings: Any) -> None:
        self.journal = Journal(journal_dir, TABLE)
        self.relay = Relay(MqttSettings(host=host, port=port, table=TABLE, client_id=f"tablesense-{TABLE}",
                                        prefix="ts", keepalive=60, **settings), self.journal, status)
        self.watcher = Watcher(broker, f"ts/{TABLE}/#")
        self._has_lock, self._let_go = threading.Event(), threading.Event()
        self._holder = threading.Thread(target=self._hold_the_lock)

    def _hold_the_lock(self) -> None:
        with self.journal._lock:
            self._has_lock.set()
            self._let_go.wait(30)

    async def __aenter__(self) -> JournalRelay:
        self._watching = await self.watcher.start()
        self.task = asyncio.create_task(self.relay.run())
        await wait_until(lambda: self.relay.connected, 20, "connected")
        return self

    def append_round(self) -> list[list[Any]]:
        """Journal a new shoe and one baccarat round; the rows of each input."""
        traffic = Traffic()
        steps = traffic.new_shoe() + traffic.baccarat_round()
        return [self.journal.append(inp, emits) for inp, emits in steps]

    async def hold_lock(self) -> None:
        self._holder.start()
        await asyncio.to_thread(self._has_lock.wait, 10)

    @property
    def holding(self) -> bool:
        return self._holder.is_alive()

    def release_lock(self) -> None:
        self._let_go.set()

    async def __aexit__(self, *exc: object) -> None:
        self._let_go.set()
        if self._holder.is_alive():
            self._holder.join(10)
        if not self.task.done():
            await self.relay.stop(self.task)
        self._watching.cancel()
        await asyncio.gather(self._watching, return_exceptions=True)
        self.journal.close()


async def test_a_busy_journal_lock_never_stops_the_relay_and_every_ack_is_recorded(
        world: Any, tmp_path: Path) -> None:
    broker, _ = world
    async with JournalRelay(broker, tmp_path / "journal", broker.host, broker.port) as rig:
        rows = rig.append_round()
        first = [r for group in rows[:len(rows) // 2] for r in group]
        later = [r for group in rows[len(rows) // 2:] for r in group]
        await rig.hold_lock()
        rig.relay.notify(first)
        await wait_until(lambda: len(rig.watcher.got) >= len(first), 10, "the first rows at the subscriber")
        rig.relay.notify(later)  # their acknowledgements cannot be recorded yet: the next rows go out anyway
        total = len(first) + len(later)
        await wait_until(lambda: len(rig.watcher.got) >= total, 10, "the later rows while the lock is held")
        assert rig.holding and rig.relay.delivered == 0
        rig.release_lock()
        await wait_until(lambda: rig.relay.delivered == total, 10,
                         "every acknowledgement recorded once the lock is free")
        assert rig.journal.pending(1000, 0) == [], "nothing awaiting delivery in the journal"


async def test_acknowledgements_kept_while_the_journal_is_busy_are_recorded_when_the_relay_stops(
        world: Any, tmp_path: Path) -> None:
    """Stopping while the journal's lock is still taken: the acknowledgements the relay kept are recorded
    once the lock is free, before stop() returns, so nothing delivered is published again after a
    restart."""
    broker, _ = world
    async with JournalRelay(broker, tmp_path / "journal", broker.host, broker.port) as rig:
        rows = [row for group in rig.append_round() for row in group]
        await rig.hold_lock()
        rig.relay.notify(rows)
        await wait_until(lambda: len(rig.watcher.got) >= len(rows), 10, "the rows at the subscriber")
        await asyncio.sleep(0.2)  # their PUBACKs are in; the lock is still taken: nothing recorded yet
        assert rig.relay.delivered == 0
        asyncio.get_running_loop().call_later(0.3, rig.release_lock)  # the append holding it finishes
        await rig.relay.stop(rig.task)
        assert rig.relay.delivered == len(rows)
        assert rig.journal.pending(1000, 0) == [], "every acknowledged row recorded before stop() returned"


async def test_acknowledgements_kept_when_the_link_drops_are_recorded_before_the_outbox_is_read_again(
        world: Any, tmp_path: Path) -> None:
    """The link drops while acknowledgements wait for the journal's lock: the next session records them
    before it reads the undelivered rows back, so the rows the broker had already acknowledged are not
    published a second time."""
    broker, proxy = world
    async with JournalRelay(broker, tmp_path / "journal", proxy.host, proxy.port,
                            backoff_min=0.05, backoff_max=0.2) as rig:
        rows = [row for group in rig.append_round() for row in group]
        await rig.hold_lock()
        rig.relay.notify(rows)
        await wait_until(lambda: len(rig.watcher.got) >= len(rows), 10, "the rows at the subscriber")
        await asyncio.sleep(0.2)  # acknowledged by the broker, kept: the lock is taken
        assert rig.relay.delivered == 0
        proxy.drop()
        await wait_until(lambda: rig.relay.connects >= 2, 20, "the relay's next session")
        rig.release_lock()
        await wait_until(lambda: rig.relay.delivered == len(rows), 10, "the kept acknowledgements recorded")
        await asyncio.sleep(0.5)  # anything read back from the outbox would be published by now
        ids = [json.loads(p)["msg_id"] for p in rig.watcher.got if b'"msg_id"' in p]
        assert sorted(ids) == sorted(r.msg_id for r in rows), "each row published exactly once"
        assert rig.journal.pending(1000, 0) == []
