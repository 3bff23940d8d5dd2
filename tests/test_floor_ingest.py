"""The floor service end to end on a real broker: a contract-speaking table -> Mosquitto -> ``FloorService``
-> PostgreSQL (a throwaway database) or SQLite. Exactly once: every journaled message once in
``messages``, derived rows once, duplicates and redeliveries change nothing, a bad payload is quarantined
with its reason, the acknowledgement is sent only after the commit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiomqtt
import pytest
from floor_support import ContractTable, wait_for

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.floor.consumer import FloorSettings
from tablesense.daemon.floor.ingest import Incoming, Ingestor, msg_id_epoch, split_topic
from tablesense.daemon.floor.migrations import MIGRATIONS, current_version, migrate
from tablesense.daemon.floor.service import FloorOptions, FloorService
from tablesense.daemon.floor.store import Database, open_database

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(120)]


@pytest.fixture
def broker(tmp_path: Path) -> AsyncIterator[MosquittoBroker]:
    with MosquittoBroker(tmp_path / "broker") as b:
        yield b  # type: ignore[misc]


async def count(db: Database, sql: str, params: tuple[object, ...] = ()) -> int:
    rows = await db.fetchall(sql, params)
    return int(rows[0][0])


def test_topic_and_msg_id_parsing() -> None:
    assert split_topic("tablesense", "tablesense/bac-01/settlements") == ("bac-01", "settlements", False)
    assert split_topic("tablesense", "tablesense/bac-01/replay/floor/rounds") == (
        "bac-01", "floor/rounds", True)
    assert split_topic("tablesense", "tablesense/bac-01/devices/shoe") == ("bac-01", "devices", False)
    assert split_topic("tablesense", "other/bac-01/round") is None
    assert msg_id_epoch("bac-01", "bac-01-0a1b2c3d-17", 17) == "0a1b2c3d"
    assert msg_id_epoch("bac-01", "bac-01-0a1b2c3d-17-deadbeef", 17) == "0a1b2c3d"
    assert msg_id_epoch("bac-01", "bac-01-0a1b2c3d-17-deadbeef", 18) is None
    assert msg_id_epoch("bac-01", "bac-02-0a1b2c3d-17", 17) is None


async def test_migrations_are_versioned_and_idempotent(db_url: str) -> None:
    db = open_database(db_url)
    try:
        assert await current_version(db) == 0
        assert await migrate(db) == [m.version for m in MIGRATIONS]
        assert await migrate(db) == []  # a second floor process starting finds it done
        assert await current_version(db) == MIGRATIONS[-1].version
    finally:
        await db.close()


async def test_every_message_stored_once_and_redelivery_changes_nothing(
        db_url: str, broker: MosquittoBroker) -> None:
    table = ContractTable(broker.host, broker.port, "bac-01", seed=3)
    service = FloorService(FloorSettings(broker.host, broker.port, client_id="floor-1"),
                           FloorOptions(db_url, grace=1.0))
    await service.start()
    db = service.db
    try:
        await wait_for(lambda: service.consumer.connected, 10, "the floor to connect")
        await table.start()
        await table.open_table()
        for _ in range(5):
            await table.deal_round()
        await wait_for(lambda: _n(db, table.last_seq), 30, "every message at the floor")
        # the same payloads once more, live and as a replay: nothing changes
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5) as c:
            for row in table.journal:
                await c.publish(table.topic(row.channel), row.payload, qos=1)
                await c.publish(table.topic("replay/" + row.channel), row.payload, qos=1)
        await wait_for(lambda: service.consumer.duplicates >= 2 * len(table.journal), 30, "the duplicates")
        assert await count(db, "SELECT COUNT(*) FROM messages") == len(table.journal)
        assert await count(db, "SELECT COUNT(*) FROM settlements") == 10
        assert await count(db, "SELECT COUNT(*) FROM rounds") == 5
        assert await count(db, "SELECT COUNT(*) FROM wagers") == 10
        seqs = [r[0] for r in await db.fetchall("SELECT seq FROM messages ORDER BY seq")]
        assert seqs == list(range(1, table.last_seq + 1))
        rows = await db.fetchall("SELECT msg_id, payload FROM messages ORDER BY seq")
        assert [(m, p.encode()) for m, p in rows] == [(r.msg_id, r.payload) for r in table.journal]
        # the settlements carry the exact house edge of their wager under the table's paytable
        edges = dict(await db.fetchall("SELECT DISTINCT bet, house_edge FROM settlements"))
        assert edges == {"banker": "114753351728/10847218479825", "perfect_pairs": "17/415"}
        state = await db.fetchall("SELECT state, epoch, status_last_seq, game, decks, shoe, round, phase "
                                  "FROM tables WHERE table_id = 'bac-01'")
        assert state[0][:5] == ("online", table.epoch, 0, "baccarat", 8)  # status at start: last_seq 0
        assert state[0][5:] == (1, 5, "complete")
        assert await count(db, "SELECT COUNT(*) FROM floor_alarms WHERE state = 'raised'") == 0
        assert await count(db, "SELECT COUNT(*) FROM quarantine") == 0
    finally:
        await table.stop()
        await service.stop()


async def _n(db: Database, n: int) -> bool:
    return await count(db, "SELECT COUNT(*) FROM messages") >= n


async def test_bad_payloads_are_quarantined_with_the_reason(db_url: str, broker: MosquittoBroker) -> None:
    service = FloorService(FloorSettings(broker.host, broker.port, client_id="floor-q"), FloorOptions(db_url))
    await service.start()
    try:
        await wait_for(lambda: service.consumer.connected, 10, "the floor to connect")
        good = {"schema": "tablesense.settlement", "version": 1, "table": "t9", "seq": 1,
                "msg_id": "t9-0a0b0c0d-1", "ts": "2026-12-01T12:00:00.000Z", "shoe": 1, "round": 1,
                "spot": "1", "seat": "1", "bet": "banker", "hand": None, "stake": 1000, "outcome": "lose",
                "category": "lose", "odds": None, "net": -1000}
        cases = {
            "tablesense/t9/settlements": b"{not json",
            "tablesense/t9/results": json.dumps(good).encode(),  # a settlement on the results topic
            "tablesense/t8/settlements": json.dumps(good).encode(),  # names another table
            # an alarm without its fields:
            "tablesense/t9/alarms": json.dumps({**good, "schema": "tablesense.alarm"}).encode(),
        }
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5) as c:
            for topic, payload in cases.items():
                await c.publish(topic, payload, qos=1)
            await c.publish("tablesense/t9/settlements", json.dumps({**good, "stake": 1.5}).encode(), qos=1)
            await c.publish("tablesense/t9/settlements", json.dumps(good).encode(), qos=1)
        await wait_for(lambda: service.consumer.quarantined >= 5 and service.consumer.stored >= 1, 20,
                       "the quarantine")
        rows = await service.db.fetchall("SELECT topic, reason FROM quarantine ORDER BY topic, reason")
        reasons = "\n".join(f"{t}: {r}" for t, r in rows)
        assert len(rows) == 5, reasons
        assert "not a tablesense message" in reasons
        assert "SettlementMessage on the results topic" in reasons
        assert "message of table 't9' on a topic of table 't8'" in reasons
        assert await count(service.db, "SELECT COUNT(*) FROM messages") == 1
        assert await count(service.db, "SELECT COUNT(*) FROM floor_alarms WHERE code = 'QUARANTINED'") >= 1
    finally:
        await service.stop()


async def test_same_msg_id_with_other_content_is_quarantined(db_url: str) -> None:
    db = open_database(db_url)
    await migrate(db)
    ing = Ingestor("tablesense", "test")
    body = {"schema": "tablesense.alarm", "version": 1, "table": "t1", "seq": 1,
            "msg_id": "t1-0a0b0c0d-1", "ts": "2026-12-01T12:00:00Z", "alarm_id": "1.1", "code": "CUT_CARD",
            "severity": "info", "text": "x"}
    try:
        async with db.transaction() as tx:
            first = await ing.apply(tx, [Incoming("tablesense/t1/alarms", json.dumps(body).encode())])
        async with db.transaction() as tx:
            again = await ing.apply(tx, [Incoming("tablesense/t1/alarms", json.dumps(body).encode()),
                                         Incoming("tablesense/t1/alarms",
                                                  json.dumps({**body, "text": "changed"}).encode()),
                                         Incoming("tablesense/t1/alarms",
                                                  json.dumps({**body, "msg_id": "t1-0a0b0c0d-1-ff"})
                                                  .encode())])
        assert [o.kind for o in first] == ["stored"]
        assert [o.kind for o in again] == ["duplicate", "quarantined", "quarantined"]
        codes = {r[0] for r in await db.fetchall("SELECT code FROM "
                                                 "floor_alarms")}
        assert codes == {"MSG_ID_REUSED", "SEQ_CONFLICT"}
        assert (await db.fetchall("SELECT text FROM alarms"))[0][0] == "x"
    finally:
        await db.close()


async def test_acknowledged_only_after_commit(db_url: str, broker: MosquittoBroker) -> None:
    """A floor whose database fails acknowledges nothing; the broker keeps the messages for its session,
    and once the database is back every one is stored."""
    table = ContractTable(broker.host, broker.port, "bac-02", seed=5)
    service = FloorService(FloorSettings(broker.host, broker.port, client_id="floor-ack"),
                           FloorOptions(db_url, grace=60))
    await service.start()
    consumer = service.consumer
    real_apply = consumer.ingestor.apply
    failing = asyncio.Event()
    failing.set()

    async def broken_apply(tx: object, items: object) -> object:
        if failing.is_set():
            from tablesense.daemon.floor.store import DatabaseUnavailable
            raise DatabaseUnavailable("the database went away (test)")
        return await real_apply(tx, items)  # type: ignore[arg-type]

    consumer.ingestor.apply = broken_apply  # type: ignore[method-assign]
    try:
        await wait_for(lambda: consumer.connected, 10, "the floor to connect")
        await table.start()
        await table.open_table()
        await table.deal_round()
        await wait_for(lambda: consumer.db_failures >= 2, 20, "the failing batches")
        assert consumer.acked == 0
        # the floor dies while its database is down; a new process with the same session gets everything
        await service.stop()
        consumer.ingestor.apply = real_apply  # type: ignore[method-assign]
        service2 = FloorService(FloorSettings(broker.host, broker.port, client_id="floor-ack"),
                                FloorOptions(db_url, grace=60))
        await service2.start()
        try:
            await wait_for(lambda: _n(service2.db, table.last_seq), 30, "the redelivered messages")
            assert await count(service2.db, "SELECT COUNT(*) FROM messages") == table.last_seq
        finally:
            await service2.stop()
    finally:
        await table.stop()
        await service.stop()


async def test_past_posting_mark_is_in_the_floor_record_only_never_on_public_settlements(db_url: str) -> None:
    """A Player bet raised after the wagers were locked (the real state machine): the public
    ``settlements`` message, which signage reads, does not say so; the floor record does, and the floor's
    ``settlements`` row carries it whichever of the two the floor stores first."""
    import msgspec
    from machine_support import Driver, baccarat_config

    from tablesense.daemon.messages import encode_message
    from tablesense.daemon.table import Channel
    from tablesense.drivers.events import Button

    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.bet("1PP", 1000)
    d.button(Button.NO_MORE_BETS)
    d.card("9H")
    d.bet("1P", 50000)  # past-posting
    d.cards("3D KS KC")
    assert [s.changed_after_lock for s in d.floor()[-1].settlements if s.spot == "1P"] == [True]
    for e in d.emits:
        if e.channel in (Channel.SETTLEMENTS, Channel.RESULTS, Channel.ROUND):
            assert b"changed_after_lock" not in encode_message(e.message), e.channel
    emits = [e for e in d.emits if e.channel in (Channel.SETTLEMENTS, Channel.FLOOR_ROUNDS)]
    items = [Incoming(f"tablesense/t1/{e.channel.value}", encode_message(msgspec.structs.replace(
        e.message, seq=i, msg_id=f"t1-0a0b0c0d-{i}"))) for i, e in enumerate(emits, 1)]
    record_first = [items[-1], *items[:-1]]
    for order in (items, record_first):
        db = open_database(db_url)
        try:
            await migrate(db)
            async with db.transaction() as tx:
                await tx.execute("DELETE FROM settlements")
                await tx.execute("DELETE FROM commands")
                await tx.execute("DELETE FROM wagers")
                await tx.execute("DELETE FROM rounds")
                await tx.execute("DELETE FROM messages")
            for item in order:  # one transaction each: as two floor processes would commit them
                async with db.transaction() as tx:
                    [o] = await Ingestor().apply(tx, [item])
                    assert o.kind == "stored", o
            rows = await db.fetchall("SELECT spot, changed_after_lock FROM settlements ORDER BY spot")
        finally:
            await db.close()
        assert [(str(s), bool(c)) for s, c in rows] == [("1P", True), ("1PP", False)], order
