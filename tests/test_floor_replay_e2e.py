"""The floor's replay by seq against a real ``tablesense run`` (the batch contract: ``cmd/replay``, the
status birth fields ``epoch``/``last_seq``/``chain_seq``/``chain_head``/``instance``).

These need the daemon side of the contract (replay by seq and the new status fields, built on other
branches): until they are merged a daemon answers ``cmd/replay`` as an unknown command and publishes no
``last_seq``, and these tests fail by design (they are the acceptance tests of that merge).

* messages swallowed between the broker and the floor (an MQTT-aware proxy acknowledges them to the
  broker and never forwards them): the floor asks ``cmd/replay`` and ends with exactly the journal;
* the broker killed (its last changes not saved) while the floor was away: the daemon's journal still
  has everything, the floor finds the tail missing against the status ``last_seq`` and has it replayed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from e2e_support import start_table
from faults.harness import Dealer
from floor_support import DropProxy, pg_url, wait_for

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.floor.consumer import FloorSettings
from tablesense.daemon.floor.service import FloorOptions, FloorService
from tablesense.daemon.floor.store import Database

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


def journal_ids(directory: Path) -> list[str]:
    """Every msg_id the table's sealed journal holds, in seq order (verified against its seal)."""
    from journal_support import sealed_messages

    return [msg_id for _, msg_id, _, _ in sorted(sealed_messages(directory))]


async def floor_ids(db: Database, table: str) -> list[str]:
    return [str(r[0]) for r in await db.fetchall("SELECT msg_id FROM messages WHERE table_id = ? "
                                                 "ORDER BY seq", (table,))]


def service_for(host: str, port: int, url: str) -> FloorService:
    return FloorService(FloorSettings(host, port, client_id="floor-1"),
                        FloorOptions(url, audit_interval=0.5, grace=1.0, retry=3.0))


async def test_messages_lost_between_broker_and_floor_are_replayed_by_the_daemon(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    swallowed_seqs = {9, 10, 25}

    def swallow(topic: str, payload: bytes) -> bool:
        return "/replay/" not in topic and any(f'"seq":{s},' in payload.decode(errors="replace")
                                               for s in swallowed_seqs)

    proxy = DropProxy(broker.host, broker.port, swallow)
    await proxy.start()
    async with pg_url() as url:
        service = service_for(proxy.host, proxy.port, url)
        await service.start()
        await wait_for(lambda: service.consumer.connected, 15, "the floor to connect")
        (tmp_path / "t").mkdir()
        config, sim, daemon, rec = await start_table(broker, tmp_path / "t", "baccarat", seed=71)
        try:
            dealer = Dealer(sim, gap=0.2, max_rounds=6).start()
            await dealer.wait_rounds(6, 120)
            await dealer.stop()
            journal = tmp_path / "t" / "journal"

            async def complete() -> bool:
                return await floor_ids(service.db, config.table) == journal_ids(journal)

            await wait_for(complete, 60, "the daemon's replay to fill the floor's gaps")
            assert len(proxy.swallowed) == 3
            via = await service.db.fetchall("SELECT seq FROM messages WHERE via = 'replay' ORDER BY seq")
            assert {int(r[0]) for r in via} >= swallowed_seqs
        finally:
            daemon.kill()
            await rec.stop()
            await sim.close()
            await service.stop()
            await proxy.close()
            broker.stop()


async def test_broker_killed_while_the_floor_was_away_daemon_replays_the_tail(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker", extra="autosave_interval 3600\nautosave_on_changes false")
    broker.start()
    async with pg_url() as url:
        service = service_for(broker.host, broker.port, url)
        await service.start()
        await wait_for(lambda: service.consumer.connected, 15, "the floor to connect")
        (tmp_path / "t").mkdir()
        config, sim, daemon, rec = await start_table(broker, tmp_path / "t", "baccarat", seed=72)
        journal = tmp_path / "t" / "journal"
        try:
            first = Dealer(sim, gap=0.2, max_rounds=2).start()
            await first.wait_rounds(2, 60)
            await first.stop()

            async def caught_up() -> bool:
                return await floor_ids(service.db, config.table) == journal_ids(journal)

            await wait_for(caught_up, 30, "the first rounds at the floor")
            await service.stop()
            dealer = Dealer(sim, gap=0.2, max_rounds=8).start()
            await dealer.wait_rounds(8, 120)
            await dealer.stop()
            await asyncio.sleep(1.0)  # the daemon has delivered them to the broker (PUBACK)
            broker.stop(kill=True)  # lost: the floor's queued session and its messages
            broker.start()
            service = service_for(broker.host, broker.port, url)
            await service.start()
            await wait_for(caught_up, 90, "the tail replayed by the daemon")
        finally:
            daemon.kill()
            await rec.stop()
            await sim.close()
            await service.stop()
            broker.stop()


async def test_broker_restarts_raise_no_chain_alarm_but_a_rewound_journal_does(tmp_path: Path) -> None:
    """A real daemon's retained status carries its journal's chain head, the link after the last row:
    delivery marks and inputs move it while ``chain_seq`` (the last seq) stays. Honest broker restarts
    (each reconnect publishes a new status) raise no ``CHAIN_DISCONTINUITY``; the same floor still
    raises it when the table's status names a chain seq below a floor record it already holds."""
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    async with pg_url() as url:
        service = service_for(broker.host, broker.port, url)
        await service.start()
        await wait_for(lambda: service.consumer.connected, 15, "the floor to connect")
        (tmp_path / "t").mkdir()
        config, sim, daemon, rec = await start_table(broker, tmp_path / "t", "baccarat", seed=73)
        journal = tmp_path / "t" / "journal"
        table = config.table

        async def caught_up() -> bool:
            return await floor_ids(service.db, table) == journal_ids(journal)

        async def statuses() -> list[tuple[int, str]]:
            rows = await service.db.fetchall("SELECT chain_seq, chain_head FROM tables WHERE table_id = ?",
                                             (table,))
            return [(int(a), str(b)) for a, b in rows if a is not None]

        try:
            heads: set[tuple[int, str]] = set()
            for rounds in (2, 1, 0, 0):
                if rounds:
                    dealer = Dealer(sim, gap=0.2, max_rounds=rounds).start()
                    await dealer.wait_rounds(rounds, 60)
                    await dealer.stop()
                await wait_for(caught_up, 60, "the floor to hold the journal")
                await asyncio.sleep(1.5)  # heartbeats and delivery marks reach the journal
                before = service.consumer.connects
                broker.stop()
                broker.start()
                await wait_for(lambda b=before: service.consumer.connects > b, 30, "the floor to reconnect")
                await wait_for(lambda h=set(heads): _new_status(statuses, h), 30, "the daemon's new status")
                heads.update(await statuses())
            assert len({seq for seq, _ in heads}) < len(heads), (
                f"no two statuses with one chain seq and different heads: {heads}")
            alarms = await service.db.fetchall("SELECT text FROM floor_alarms WHERE code = "
                                               "'CHAIN_DISCONTINUITY'")
            assert alarms == [], alarms
            # a journal that went back: a status (published after them) below the records the floor holds
            records = await service.db.fetchall("SELECT MAX(chain_seq) FROM chain_marks WHERE table_id = ?",
                                                (table,))
            assert int(records[0][0]) > 3
            import json

            from tablesense.daemon.floor.alarms import now_iso
            from tablesense.daemon.floor.ingest import Incoming, Ingestor
            status = {"schema": "tablesense.status", "version": 1, "table": table, "ts": now_iso(),
                      "state": "online", "epoch": (await service.db.fetchall(
                          "SELECT epoch FROM tables WHERE table_id = ?", (table,)))[0][0],
                      "last_seq": 3, "chain_seq": 3, "chain_head": "0" * 64}
            async with service.db.transaction() as tx:
                await Ingestor().apply(tx, [Incoming(f"tablesense/{table}/status",
                                                     json.dumps(status).encode(), True, now_iso())])
            texts = [str(r[0]) for r in await service.db.fetchall(
                "SELECT text FROM floor_alarms WHERE code = 'CHAIN_DISCONTINUITY'")]
            assert texts and all("went back" in t for t in texts), texts
        finally:
            daemon.kill()
            await rec.stop()
            await sim.close()
            await service.stop()
            broker.stop()


async def _new_status(statuses: Callable[[], Awaitable[list[tuple[int, str]]]],
                      seen: set[tuple[int, str]]) -> bool:
    return any(s not in seen for s in await statuses())
