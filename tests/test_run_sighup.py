"""SIGHUP stops ``tablesense run`` cleanly like SIGTERM (it used to kill it with status 129 and no
``offline``): exit 0, the retained status is ``offline``, ``daemon_stopped`` logged. Real Mosquitto,
real ptys, the daemon as a subprocess."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import aiomqtt
import pytest
from e2e_support import start_table

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(300)]


async def test_sighup_is_a_clean_stop(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    try:
        config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=5)
        try:
            await sim.play_round()
            await rec.wait_for(lambda r: len(r.on("results")) == 1)
            assert daemon.proc is not None
            daemon.proc.send_signal(signal.SIGHUP)
            assert await asyncio.to_thread(daemon.proc.wait, 10) == 0  # not 129 (killed by SIGHUP)
        finally:
            daemon.kill()
            await rec.stop()
            await sim.close()
        async with aiomqtt.Client(broker.host, broker.port) as c:
            await c.subscribe(f"tablesense/{config.table}/status", qos=1)
            async with asyncio.timeout(5):
                async for m in c.messages:
                    status = json.loads(m.payload)  # type: ignore[arg-type]
                    break
        assert status["state"] == "offline"
        log = daemon.log.read_text()
        assert '"event":"daemon_stopped"' in log and '"event":"mqtt_offline_published"' in log
    finally:
        broker.stop()
