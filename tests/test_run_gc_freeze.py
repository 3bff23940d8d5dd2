"""``tablesense run`` freezes its start-up heap (``freeze_startup_heap``: one collection, then
``gc.freeze``) before it serves, so that a full collection while dealing traverses only what was made
since: on the benchmark VM such a pause went from 17-27 ms to 2.6 ms (docs/performance.md). The daemon
as a subprocess, real Mosquitto, real ptys; it settles as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_support import start_table

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(300)]


async def test_the_start_up_heap_is_frozen_before_the_daemon_is_ready(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    try:
        _, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=3)
        try:
            await sim.play_round()
            await rec.wait_for(lambda r: len(r.on("results")) == 1)
            assert await daemon.terminate() == 0
        finally:
            daemon.kill()
            await rec.stop()
            await sim.close()
    finally:
        broker.stop()
    events = [json.loads(line) for line in daemon.log.read_text().splitlines() if line.startswith("{")]
    names = [e.get("event") for e in events]
    assert "startup_heap_frozen" in names and "daemon_ready" in names
    assert names.index("startup_heap_frozen") < names.index("daemon_ready")
    frozen = events[names.index("startup_heap_frozen")]
    assert frozen["objects"] > 10_000  # modules, config, the replayed machine: tens of thousands
    assert 0 <= frozen["collect_ms"] < 5_000
