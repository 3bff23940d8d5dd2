"""The floor's seq audit against a table that speaks the contract (status birth fields, ``cmd/replay`` by
seq), on a real Mosquitto and a throwaway PostgreSQL database:

* messages lost between the broker and the floor (an MQTT-aware loopback proxy acknowledges them to the
  broker and never forwards them): a ``SEQ_GAP`` floor alarm, ``cmd/replay`` for exactly the missing seqs,
  the gap filled from ``replay/...`` topics, the alarm cleared;
* seqs the table no longer holds: the reply names them pruned, ``SEQ_LOST``, no more requests;
* the broker killed (SIGKILL, its last changes not saved) while the floor was away: the floor finds the
  tail missing against the table's status ``last_seq`` and has it replayed;
* a journal epoch change and a chain head that does not continue raise their floor alarms;
* two floor processes sharing the load (MQTT v5 shared subscription): every message stored once.

The same scenarios against a real ``tablesense run`` are in tests/test_floor_replay_e2e.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from floor_support import ContractTable, DropProxy, pg_url, wait_for

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.floor.consumer import FloorSettings
from tablesense.daemon.floor.service import FloorOptions, FloorService
from tablesense.daemon.floor.store import Database

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(180)]


@pytest.fixture
async def db_url() -> AsyncIterator[str]:
    async with pg_url() as url:
        yield url


@pytest.fixture
def broker(tmp_path: Path) -> AsyncIterator[MosquittoBroker]:
    with MosquittoBroker(tmp_path / "broker") as b:
        yield b  # type: ignore[misc]


async def scalar(db: Database, sql: str, params: tuple[object, ...] = ()) -> object:
    return (await db.fetchall(sql, params))[0][0]


async def stored_seqs(db: Database, table: str) -> list[int]:
    return [int(r[0]) for r in await db.fetchall("SELECT seq FROM messages WHERE table_id = ? ORDER BY seq",
                                                 (table,))]


def floor(host: str, port: int, url: str, client_id: str = "floor-1", **opts: float) -> FloorService:
    return FloorService(FloorSettings(host, port, client_id=client_id),
                        FloorOptions(url, audit_interval=0.2, grace=opts.get("grace", 0.5),
                                     retry=opts.get("retry", 2.0)))


async def test_messages_dropped_on_the_way_are_replayed(db_url: str, broker: MosquittoBroker) -> None:
    lost = {7, 8, 15}  # a settlement, results, a later message: two holes

    def swallow(topic: str, payload: bytes) -> bool:
        return "/replay/" not in topic and any(f'"seq":{s},' in payload.decode() for s in lost)

    proxy = DropProxy(broker.host, broker.port, swallow)
    await proxy.start()
    service = floor(proxy.host, proxy.port, db_url)
    table = ContractTable(broker.host, broker.port, "bac-10", seed=11)
    await service.start()
    try:
        await wait_for(lambda: service.consumer.connected, 10, "the floor to connect")
        await table.start()
        await table.open_table()
        for _ in range(4):
            await table.deal_round()
        await wait_for(lambda: len(proxy.swallowed) == 3, 20, "the proxy to drop three messages")
        await wait_for(lambda: scalar(service.db, "SELECT COUNT(*) FROM floor_alarms WHERE code = 'SEQ_GAP'"),
                       20, "the SEQ_GAP floor alarm")
        async def complete() -> bool:
            return await stored_seqs(service.db, "bac-10") == list(range(1, table.last_seq + 1))
        await wait_for(complete, 30, "the gaps filled by replay")
        # holes are asked in ranges, not seq by seq: 7 and 8 together; 15 in the same range when one audit
        # pass saw both holes, else once on its own (the seqs between them the floor holds change nothing)
        covered = {s for first, last in table.replays for s in range(first, last + 1)}
        assert lost <= covered and len(table.replays) <= 2, table.replays
        assert any(first <= 7 and last >= 8 for first, last in table.replays), table.replays
        via = dict(await service.db.fetchall("SELECT seq, via FROM messages WHERE via = 'replay'"))
        assert sorted(via) == [7, 8, 15]
        await wait_for(lambda: _cleared(service.db), 20, "the SEQ_GAP alarm cleared")
        assert await scalar(service.db, "SELECT COUNT(*) FROM settlements") == 8
        assert await scalar(service.db, "SELECT through_seq FROM seq_tracks") == table.last_seq
    finally:
        await table.stop()
        await service.stop()
        await proxy.close()


async def _cleared(db: Database) -> bool:
    return await scalar(db, "SELECT state FROM floor_alarms WHERE code = 'SEQ_GAP'") == "cleared"


async def test_pruned_seqs_are_lost_not_asked_again(db_url: str, broker: MosquittoBroker) -> None:
    table = ContractTable(broker.host, broker.port, "bac-11", seed=12, drop={1, 2, 3}, pruned_below=3)
    service = floor(broker.host, broker.port, db_url, retry=0.5)
    await service.start()
    try:
        await wait_for(lambda: service.consumer.connected, 10, "the floor to connect")
        await table.start()
        await table.open_table()
        await table.deal_round()
        async def lost() -> bool:
            n = await scalar(service.db, "SELECT COUNT(*) FROM floor_alarms WHERE code = 'SEQ_LOST'")
            return bool(n) and await stored_seqs(service.db, "bac-11") == list(range(3, table.last_seq + 1))
        await wait_for(lost, 30, "seq 3 replayed and 1..2 reported lost")
        asked = len(table.replays)
        await asyncio.sleep(2.0)  # several audit passes and retry periods
        assert len(table.replays) == asked, "the floor kept asking for pruned seqs"
        text = str(await scalar(service.db, "SELECT text FROM floor_alarms WHERE code = 'SEQ_LOST'"))
        assert "seq 1..2" in text and "pruned" in text
        assert await scalar(service.db, "SELECT COUNT(*) FROM floor_alarms WHERE code = 'SEQ_GAP' AND "
                                        "state = 'raised'") == 0
    finally:
        await table.stop()
        await service.stop()


async def test_broker_killed_while_the_floor_was_away(db_url: str, tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "crash", extra="autosave_interval 3600\nautosave_on_changes false")
    broker.start()
    table = ContractTable(broker.host, broker.port, "bac-12", seed=13)
    service = floor(broker.host, broker.port, db_url)
    try:
        await service.start()
        await wait_for(lambda: service.consumer.connected, 10, "the floor to connect")
        await table.start()
        await table.open_table()
        await table.deal_round()
        await wait_for(lambda: _count_is(service.db, table.last_seq), 20, "the first round at the floor")
        await service.stop()  # the floor goes away; its session keeps queueing at the broker
        for _ in range(3):
            await table.deal_round()
        before = table.last_seq
        broker.stop(kill=True)  # the broker dies without saving: the queued messages are gone
        await table.stop(state=None)
        broker.start()
        await table.start()  # the table reconnects: its status says last_seq
        service = floor(broker.host, broker.port, db_url)
        await service.start()

        async def complete() -> bool:
            return await stored_seqs(service.db, "bac-12") == list(range(1, before + 1))
        await wait_for(complete, 40, "the messages lost in the broker replayed")
        assert table.replays, "nothing was asked"
        assert await scalar(service.db, "SELECT COUNT(*) FROM settlements") == 8
    finally:
        await table.stop()
        await service.stop()
        broker.stop()


async def _count_is(db: Database, n: int) -> bool:
    return await scalar(db, "SELECT COUNT(*) FROM messages") == n


async def test_epoch_change_and_chain_discontinuity(db_url: str, broker: MosquittoBroker) -> None:
    service = floor(broker.host, broker.port, db_url)
    await service.start()
    table = ContractTable(broker.host, broker.port, "bac-13", seed=14)
    try:
        await wait_for(lambda: service.consumer.connected, 10, "the floor to connect")
        await table.start()
        await table.open_table()
        await table.deal_round()
        await table.publish_status()
        await wait_for(lambda: _count_is(service.db, table.last_seq), 20, "the first round")
        # the journal restored from another copy: same epoch, back at seq 5 (a status's head is never
        # compared with another head: it moves with delivery marks; its position is)
        assert table.journal[5].channel == "floor/rounds"
        table.journal, table._chain = table.journal[:5], [*table._chain[:4], "f" * 64]
        table.clock += 60
        await table.publish_status()
        await wait_for(lambda: scalar(service.db, "SELECT COUNT(*) FROM floor_alarms WHERE "
                                                  "code = 'CHAIN_DISCONTINUITY'"), 20, "CHAIN_DISCONTINUITY")
        texts = [r[0] for r in await service.db.fetchall("SELECT text FROM floor_alarms WHERE "
                                                         "code = 'CHAIN_DISCONTINUITY'")]
        assert any("the journal went back" in t for t in texts), texts
        # the journal replaced: a new epoch, seq restarts
        await table.stop()
        fresh = ContractTable(broker.host, broker.port, "bac-13", seed=15)
        await fresh.start()
        await fresh.open_table()
        await fresh.deal_round()
        await wait_for(lambda: scalar(service.db, "SELECT COUNT(*) FROM floor_alarms WHERE "
                                                  "code = 'EPOCH_CHANGED'"), 20, "EPOCH_CHANGED")
        await wait_for(lambda: _epoch_count(service.db, fresh), 20, "the new epoch's messages")
        epochs = {r[0] for r in await service.db.fetchall("SELECT DISTINCT epoch FROM messages")}
        assert epochs == {table.epoch, fresh.epoch}
        await fresh.stop()
    finally:
        await table.stop()
        await service.stop()


async def _epoch_count(db: Database, t: ContractTable) -> bool:
    return await scalar(db, "SELECT COUNT(*) FROM messages WHERE epoch = ?", (t.epoch,)) == t.last_seq


async def test_two_floor_processes_share_the_load_exactly_once(db_url: str, broker: MosquittoBroker) -> None:
    one = floor(broker.host, broker.port, db_url, "floor-1")
    two = floor(broker.host, broker.port, db_url, "floor-2")
    tables = [ContractTable(broker.host, broker.port, f"bac-2{i}", seed=20 + i) for i in range(3)]
    await one.start()
    await two.start()
    try:
        await wait_for(lambda: one.consumer.connected and two.consumer.connected, 10, "both floors")
        for t in tables:
            await t.start()
            await t.open_table()
        for _ in range(6):
            await asyncio.gather(*(t.deal_round() for t in tables))
        total = sum(t.last_seq for t in tables)
        await wait_for(lambda: _count_is(one.db, total), 40, "every message")
        await asyncio.sleep(1.0)
        assert one.consumer.stored > 0 and two.consumer.stored > 0, "the load was not shared"
        assert one.consumer.stored + two.consumer.stored == total
        for t in tables:
            assert await stored_seqs(one.db, t.table) == list(range(1, t.last_seq + 1))
        assert await scalar(one.db, "SELECT COUNT(*) FROM settlements") == 3 * 6 * 2
        assert [one.tracker.leader, two.tracker.leader].count(True) == 1
        consumers = {r[0] for r in await one.db.fetchall("SELECT DISTINCT consumer FROM messages")}
        assert consumers == {"floor-1", "floor-2"}
    finally:
        for t in tables:
            await t.stop()
        await one.stop()
        await two.stop()


# ---------------------------------------------------------------------- a thief in the floor's share group

async def test_a_member_of_the_floors_share_group_costs_nothing_and_few_ranged_replays(
        db_url: str, broker: MosquittoBroker) -> None:
    """Mosquitto 2.0's acl_file does not check SUBSCRIBE, so any client that logs in can join the floor's
    shared-subscription group (here: every shared filter the floor uses, and the replay filter it used to
    share). It is handed about one message in two: dozens of holes. The floor's seq audit asks for them
    in a few ranged ``cmd/replay`` requests (not one per hole), within its per-table budget, and the
    replays come on the floor's own subscription, which the thief cannot share: every seq is stored."""
    from tablesense.daemon.floor.consumer import subscriptions
    from tablesense.daemon.floor.tracker import MAX_REQUESTS_PER_TABLE

    service = floor(broker.host, broker.port, db_url, grace=1.0, retry=3.0)
    table = ContractTable(broker.host, broker.port, "bac-40", seed=41)
    stolen: list[int] = []
    import json

    import aiomqtt

    async def thief() -> None:
        async with aiomqtt.Client(broker.host, broker.port, identifier="signage-bac-40",
                                  protocol=aiomqtt.ProtocolVersion.V5) as c:
            shared = [f for f in subscriptions(service.settings, True) if f.startswith("$share/")]
            for f in [*shared, "$share/floor/tablesense/+/replay/#"]:
                await c.subscribe(f, qos=1)
            joined.set()
            async for m in c.messages:
                if "/replay/" not in str(m.topic):
                    stolen.append(int(json.loads(bytes(m.payload))["seq"]))  # type: ignore[arg-type]

    joined = asyncio.Event()
    await service.start()
    thief_task = asyncio.create_task(thief())
    try:
        await wait_for(lambda: service.consumer.connected and joined.is_set(), 10, "floor and thief")
        await table.start()
        await table.open_table()
        for _ in range(30):
            await table.deal_round()
        table.clock += 1
        await table.publish_status()  # its last seq: a stolen tail is a hole too

        async def complete() -> bool:
            return await stored_seqs(service.db, "bac-40") == list(range(1, table.last_seq + 1))

        try:
            await wait_for(complete, 60, "every seq at the floor despite the thief")
        except AssertionError:
            have = set(await stored_seqs(service.db, "bac-40"))
            missing = sorted(set(range(1, table.last_seq + 1)) - have)
            raise AssertionError(f"missing {missing[:20]} ({len(missing)}); replays {table.replays}") \
                from None
        holes = sum(1 for s in set(stolen) if s - 1 not in set(stolen))
        assert len(stolen) > 50 and holes >= 20, (len(stolen), holes)
        # not one request per hole: a few ranges (holes fall due over the seconds the rounds take)
        assert 1 <= len(table.replays) <= 8 and 5 * len(table.replays) <= holes, (holes, table.replays)
        assert all(hi - lo < 10_000 for lo, hi in table.replays)
        sent = [str(r[0])[:19] for r in await service.db.fetchall("SELECT sent_at FROM replay_requests")]
        assert max(sent.count(s) for s in sent) <= MAX_REQUESTS_PER_TABLE  # per audit pass (1 a second)
        await wait_for(lambda: _cleared(service.db), 20, "the SEQ_GAP alarm cleared")
    finally:
        thief_task.cancel()
        await asyncio.gather(thief_task, return_exceptions=True)
        await table.stop()
        await service.stop()


# ---------------------------------------------------------------------- a duplicate instance, then recovery

async def test_seq_lost_in_a_duplicate_instance_episode_clears_once_replayed(
        db_url: str, broker: MosquittoBroker) -> None:
    """A spare controller with the same table id comes up (its own journal: another epoch) while the
    floor misses two of the first table's messages: while the spare's status is current, the first
    table's holes look like a replaced journal's (``SEQ_LOST``). The spare steps back and the first
    table's status is current again: the floor asks for those seqs after all, stores them, and the
    ``SEQ_LOST`` alarm clears (it used to stay raised for good, the range skipped)."""
    service = floor(broker.host, broker.port, db_url, grace=1.5, retry=2.0)
    first = ContractTable(broker.host, broker.port, "bac-41", seed=42, drop={5, 6})
    spare = ContractTable(broker.host, broker.port, "bac-41", seed=43)
    await service.start()
    try:
        await wait_for(lambda: service.consumer.connected, 10, "the floor to connect")
        await first.start()
        await first.open_table()
        await first.deal_round()
        first.clock += 10
        await first.publish_status()
        spare.clock = first.clock + 5
        await spare.start()  # its status names its own epoch: the first table's looks replaced
        await spare.open_table()
        await wait_for(lambda: scalar(service.db, "SELECT COUNT(*) FROM floor_alarms WHERE code = 'SEQ_LOST' "
                                                  "AND state = 'raised'"), 20, "SEQ_LOST for the holes")
        assert first.replays == []
        await spare.stop(state=None)  # it steps back
        first.clock = spare.clock + 5
        await first.publish_status()
        await wait_for(lambda: _first_complete(service.db, first), 30, "the first table's seqs replayed")
        assert any(lo <= 5 and hi >= 6 for lo, hi in first.replays), first.replays
        await wait_for(lambda: _lost_cleared(service.db), 20, "the SEQ_LOST alarm cleared")
        text = await scalar(service.db, "SELECT text FROM floor_alarms WHERE code = 'SEQ_LOST'")
        assert "recovered" in str(text), text
    finally:
        await first.stop()
        await spare.stop()
        await service.stop()


async def _first_complete(db: Database, t: ContractTable) -> bool:
    rows = await db.fetchall("SELECT seq FROM messages WHERE table_id = ? AND epoch = ? ORDER BY seq",
                             (t.table, t.epoch))
    return [int(r[0]) for r in rows] == list(range(1, t.last_seq + 1))


async def _lost_cleared(db: Database) -> bool:
    states = {str(r[0]) for r in await db.fetchall("SELECT state FROM floor_alarms WHERE code = 'SEQ_LOST'")}
    return states == {"cleared"}
