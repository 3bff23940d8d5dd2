"""The scale architecture's table side for real (docs/scale.md): a real ``tablesense run`` publishes to a
table-side Mosquitto, which is bridged (MQTT v5 bridge, persistent bridge session, QoS 1) to a floor-side
Mosquitto, where the floor service stores everything in PostgreSQL. The network between the two brokers
is cut silently for 60 s (a loopback proxy that drops every byte without closing anything) while rounds
are dealt; the table-side broker queues for the bridge (store-and-forward), and after the link is back
every journaled message is in the floor database: the same ``msg_id`` set as the daemon's journal, seq
complete and in order, nothing twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from e2e_support import start_table
from faults.harness import Dealer, LinkProxy, journal_rows
from floor_support import pg_url, wait_for

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.floor.consumer import FloorSettings
from tablesense.daemon.floor.service import FloorOptions, FloorService

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]

CUT_SECONDS = 60


def bridge_conf(name: str, host: str, port: int) -> str:
    """The table-side bridge (as in deploy/mosquitto of a table controller, docs/scale.md)."""
    return "\n".join([
        f"connection {name}",
        f"address {host}:{port}",
        "bridge_protocol_version mqttv50",
        f"remote_clientid {name}",
        "cleansession false",
        "local_cleansession false",
        "keepalive_interval 5",
        "restart_timeout 1 5",
        "bridge_attempt_unsubscribe false",
        "try_private true",
        "topic tablesense/# out 1",
    ])


async def test_bridge_cut_for_a_minute_loses_nothing(tmp_path: Path) -> None:
    floor_broker = MosquittoBroker(tmp_path / "floor-broker")
    floor_broker.start()
    proxy = LinkProxy(floor_broker.host, floor_broker.port)
    await proxy.start()
    table_broker = MosquittoBroker(tmp_path / "table-broker",
                                   extra=bridge_conf("bridge-bac-01", proxy.host, proxy.port))
    table_broker.start()
    async with pg_url() as url:
        service = FloorService(FloorSettings(floor_broker.host, floor_broker.port, client_id="floor-1"),
                               FloorOptions(url, grace=5.0))
        await service.start()
        await wait_for(lambda: service.consumer.connected, 15, "the floor to connect")
        (tmp_path / "table").mkdir()
        _config, sim, daemon, rec = await start_table(table_broker, tmp_path / "table", "baccarat", seed=61,
                                                      table="bac-01")
        journal = tmp_path / "table" / "journal"
        try:
            dealer = Dealer(sim, gap=0.3).start()
            await dealer.wait_rounds(3, 60)

            async def floor_count() -> int:
                return int((await service.db.fetchall("SELECT COUNT(*) FROM messages"))[0][0])

            async def arrived() -> bool:
                return await floor_count() >= len(journal_rows(journal))

            await wait_for(arrived, 30, "the first rounds at the floor through the bridge")
            proxy.cut()
            at_cut = len(sim.rounds)
            before = await floor_count()
            await asyncio.sleep(CUT_SECONDS)  # the scenario's duration; dealing goes on meanwhile
            during = len(sim.rounds) - at_cut
            assert during >= 3, "too few rounds dealt during the cut"
            assert dealer.failed is None
            proxy.restore()
            await dealer.wait_rounds(len(sim.rounds) + 2, 60)
            await dealer.stop()
            rows = journal_rows(journal)
            assert len(rows) > before + during * 5, "the cut did not hold back messages"

            async def complete() -> bool:
                return await floor_count() >= len(rows)

            await wait_for(complete, 120, "every journaled message at the floor database")
            stored = await service.db.fetchall("SELECT seq, msg_id FROM messages WHERE table_id = 'bac-01' "
                                               "ORDER BY seq")
            assert [m for _, m in stored] == [m for _, m, _, _ in rows]
            assert [int(s) for s, _ in stored] == list(range(1, len(rows) + 1))
            settled = int((await service.db.fetchall("SELECT COUNT(*) FROM settlements"))[0][0])
            assert settled == sum(1 for _, _, ch, _ in rows if ch == "settlements")
            assert service.consumer.quarantined == 0
            print(f"\nBRIDGE-RESULT rounds {len(sim.rounds)}, {during} during the {CUT_SECONDS} s cut, "
                  f"{len(rows)} messages, floor held {before} at the cut, proxy dropped "
                  f"{proxy.dropped_bytes} B")
        finally:
            daemon.kill()
            await rec.stop()
            await sim.close()
            await service.stop()
            await proxy.close()
            table_broker.stop()
            floor_broker.stop()
