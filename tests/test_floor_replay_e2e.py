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
