"""The relay publishes the rows the app hands it from memory: no read-back of rows it was just
given, acknowledgements recorded without a worker-thread hop, each row published once even when it was
both read from the journal and handed over, and the relay not woken by inputs that emit nothing.

A real Journal and a real Mosquitto the test owns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from journal_support import TABLE, Traffic
from machine_support import PADS, baccarat_config
from test_mqtt_relay import Subscriber, run_relay, settings, status

from tablesense.daemon.app import App
from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.journal import Journal, OutboxRow
from tablesense.daemon.mqtt import Relay
from tablesense.drivers.events import SpotChanged, SpotState

pytestmark = pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> MosquittoBroker:
    b = MosquittoBroker(tmp_path_factory.mktemp("mosq") / "b")
    b.start()
    yield b
    b.stop()


class Counting:
    """Counts the journal calls the relay makes (``pending`` reads, ``mark_delivered`` one by one)."""

    def __init__(self, journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        self.single_marks = 0
        real_pending, real_mark = journal.pending, journal.mark_delivered

        def pending(limit: int = 100, after_row: int = 0) -> list[OutboxRow]:
            self.reads += 1
            return real_pending(limit, after_row)

        def mark(row_id: int) -> None:
            self.single_marks += 1
            real_mark(row_id)

        monkeypatch.setattr(journal, "pending", pending)
        monkeypatch.setattr(journal, "mark_delivered", mark)


@pytest.fixture
def journal(tmp_path: Path) -> AsyncIterator[Journal]:
    j = Journal(tmp_path / "journal", TABLE)
    yield j
    j.close()


def seqs(messages: list[tuple[str, dict[str, Any], bool]]) -> list[int]:
    return [b["seq"] for _t, b, _r in messages if isinstance(b.get("seq"), int)]


async def test_handed_rows_are_published_from_memory_in_order_and_marked_without_a_thread(
        broker: MosquittoBroker, journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    traffic = Traffic()
    counting = Counting(journal, monkeypatch)
    async with Subscriber(broker, "ts/HO1/#", "sub-HO1") as sub:
        relay = Relay(settings(broker, "HO1"), journal, status)
        task = await run_relay(relay)
        for _ in range(1000):  # the session's first read of the outbox (after the retained republish)
            if counting.reads:
                break
            await asyncio.sleep(0.005)
        reads_at_start = counting.reads
        written: list[int] = []
        for _ in range(5):
            for inp, emits in [*traffic.new_shoe(), *traffic.baccarat_round()]:
                rows = journal.append(inp, emits)
                written += [r.seq for r in rows]
                if rows:
                    relay.notify(rows)
                await asyncio.sleep(0)
        await sub.wait_for(lambda ms: seqs(ms)[-1:] == written[-1:])
        for _ in range(500):
            if relay.delivered == len(written):
                break
            await asyncio.sleep(0.01)
        await relay.stop(task)
    assert seqs(sub.messages) == written  # every row once, in order
    assert counting.reads == reads_at_start  # none read back from the journal
    assert counting.single_marks == 0  # acknowledgements recorded in memory, on the loop
    assert relay.delivered == len(written)
    assert journal.pending(limit=10_000) == []


async def test_a_row_both_read_and_handed_is_published_once(
        broker: MosquittoBroker, journal: Journal) -> None:
    traffic = Traffic()
    rows: list[OutboxRow] = []
    for inp, emits in [*traffic.new_shoe(), *traffic.baccarat_round()]:
        rows += journal.append(inp, emits)
    async with Subscriber(broker, "ts/HO2/#", "sub-HO2") as sub:
        relay = Relay(settings(broker, "HO2"), journal, status)
        relay.notify(rows)  # handed over AND in the journal the session reads first
        task = await run_relay(relay)
        more = journal.append(*traffic.heartbeat())  # nothing emitted: no notify, nothing published
        assert more == []
        inp, emits = traffic.baccarat_round()[0]
        late = journal.append(inp, emits)
        relay.notify(late)
        want = [r.seq for r in rows + late]
        await sub.wait_for(lambda ms: seqs(ms)[-1:] == want[-1:])
        await relay.stop(task)
    assert seqs(sub.messages) == want


async def test_the_relay_is_not_woken_by_inputs_that_emit_nothing(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    app = App(baccarat_config(extra=f'\n[journal]\ndirectory = "{tmp_path / "journal"}"\n'))
    app.open()
    assert app.relay is not None
    woken: list[int] = []
    monkeypatch.setattr(app.relay, "notify", lambda rows=None: woken.append(len(rows or ())))
    assert app.journal is not None
    emitted: list[int] = []  # rows each commit returned
    real_many = app.journal.append_many

    def many(items: Any) -> Any:
        out = real_many(items)
        emitted.append(sum(len(rows) for rows in out))
        return out

    monkeypatch.setattr(app.journal, "append_many", many)
    try:
        for seq in range(1, 6):  # chips moving on spots: most of them publish nothing
            assert await app._process_device(SpotChanged(PADS, seq, f"{seq}P", SpotState.PLACED, 100))
        assert 0 in emitted  # the case in point: commits with nothing to publish
        assert woken == [n for n in emitted if n]  # woken once per commit with rows, never without
    finally:
        app.journal.close()


async def test_a_burst_of_publishes_goes_out_in_one_send_in_order(broker: MosquittoBroker) -> None:
    """A settlement burst is handed to paho at once; it is written with one send(), not one per packet,
    and every message arrives, in order, each acknowledged."""
    from tablesense.daemon.mqtt import NODELAY, _AckClient

    async with Subscriber(broker, "ts/HO4/#", "sub-HO4") as sub:
        async with _AckClient(broker.host, broker.port, identifier="pub-HO4", socket_options=NODELAY,
                              max_inflight_messages=64) as client:
            sends: list[int] = []
            real_send = client._client._sock_send

            def send(buf: bytes) -> int:
                sends.append(len(buf))
                return real_send(buf)

            client._client._sock_send = send  # type: ignore[method-assign]
            futs = [client.start_publish("ts/HO4/settlements", f'{{"seq": {n}}}'.encode(), 1, False, None)
                    for n in range(1, 21)]
            await asyncio.wait_for(asyncio.gather(*futs), 10)
            publishes = [n for n in sends if n > 4]  # PUBLISH packets (a PINGREQ is 2 bytes)
            assert len(publishes) == 1, sends  # twenty packets, one write
        await sub.wait_for(lambda ms: len(seqs(ms)) == 20)
    assert seqs(sub.messages) == list(range(1, 21))


def test_coalescing_leaves_packets_paho_acts_on_apart() -> None:
    from collections import deque

    from tablesense.daemon.mqtt import _coalesce

    def pkt(command: int, qos: int, data: bytes, pos: int = 0) -> dict[str, Any]:
        return {"command": command, "mid": 1, "qos": qos, "pos": pos, "to_process": len(data) - pos,
                "packet": data, "info": None}

    out = deque([pkt(0x32, 1, b"abcd", pos=1), pkt(0x32, 1, b"efg"), pkt(0x30, 0, b"qos0"),
                 pkt(0x32, 1, b"h")])
    _coalesce(out)
    assert [p["packet"][p["pos"]:] for p in out] == [b"bcdefg", b"qos0", b"h"]
    assert out[1]["qos"] == 0 and out[1]["command"] == 0x30  # a QoS 0 publish is left as it was
    disconnect = deque([pkt(0xE0, 0, b"\xe0\x00"), pkt(0x32, 1, b"x")])
    _coalesce(disconnect)
    assert [p["command"] for p in disconnect] == [0xE0, 0x32]


async def test_the_first_message_of_a_burst_is_written_before_the_rest_is_queued(
        broker: MosquittoBroker, journal: Journal) -> None:
    """A deciding card's burst: its first message goes out at once, the rest in one more write."""
    traffic = Traffic()
    async with Subscriber(broker, "ts/HO5/#", "sub-HO5") as sub:
        relay = Relay(settings(broker, "HO5"), journal, status)
        task = await run_relay(relay)
        client = relay._client
        assert client is not None
        await asyncio.sleep(0.2)  # the session's own publishes (status, retained state) are out
        sends: list[int] = []
        real_send = client._client._sock_send

        def send(buf: bytes) -> int:
            sends.append(len(buf))
            return real_send(buf)

        client._client._sock_send = send  # type: ignore[method-assign]
        rows: list[OutboxRow] = []
        for inp, emits in traffic.baccarat_round():
            rows += journal.append(inp, emits)
        relay.notify(rows)
        await sub.wait_for(lambda ms: seqs(ms)[-1:] == [rows[-1].seq])
        await relay.stop(task)
    first = len(rows[0].payload)
    publishes = [n for n in sends if n > 4]
    assert len(rows) > 5
    assert first < publishes[0] < first + 200  # the first message alone (its topic and header)
    assert sum(publishes[1:2]) > sum(len(r.payload) for r in rows[1:])  # then all the others in one write
    assert seqs(sub.messages)[-len(rows):] == [r.seq for r in rows]
