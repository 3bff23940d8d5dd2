"""SIGHUP never stops ``tablesense run`` (it used to be a clean stop, exit 0, which ``Restart=on-failure``
left down): it reloads the config. The daemon keeps settling; a change to a reloadable key
(``[mqtt] command_rate``/``command_burst``) is applied, every other change is logged as needing a restart,
a config that no longer validates is logged and ignored. SIGTERM still stops it with exit 0 and
``offline``. Real Mosquitto, real ptys, the daemon as a subprocess."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from e2e_support import start_table

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.commands.run import changed_keys
from tablesense.daemon.config import parse_config

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(300)]


def _events(log: Path, name: str) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == name:
            out.append(rec)
    return out


async def _wait_event(log: Path, name: str, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    async with asyncio.timeout(timeout):
        while len(found := _events(log, name)) < count:
            await asyncio.sleep(0.05)
    return found


async def test_sighup_reloads_and_keeps_the_table_running(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    try:
        config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=5)
        try:
            assert daemon.proc is not None
            await sim.play_round()
            await rec.wait_for(lambda r: len(r.on("results")) == 1)

            # 1. nothing changed: reloaded, still running
            daemon.proc.send_signal(signal.SIGHUP)
            first = (await _wait_event(daemon.log, "config_reloaded", 1))[0]
            assert first["applied"] == [] and first["needs_restart"] == []
            assert daemon.proc.poll() is None

            # 2. a reloadable key and one that needs a restart
            text = daemon.config.read_text()
            edited = text.replace("[mqtt]\n", "[mqtt]\ncommand_rate = 3\n", 1).replace(
                "[wagers.player]\nmin = 1000\n", "[wagers.player]\nmin = 2000\n", 1)
            assert edited != text and "command_rate = 3" in edited and "min = 2000" in edited
            daemon.config.write_text(edited)
            daemon.proc.send_signal(signal.SIGHUP)
            second = (await _wait_event(daemon.log, "config_reloaded", 2))[1]
            assert second["applied"] == ["mqtt.command_rate"]
            assert second["needs_restart"] == ["wagers.player"]
            warn = (await _wait_event(daemon.log, "config_change_needs_restart", 1))[0]
            assert warn["keys"] == ["wagers.player"] and warn["level"] == "warning"

            # 3. a broken config: logged, ignored, the daemon goes on settling
            daemon.config.write_text(edited + "[spots]\n")
            daemon.proc.send_signal(signal.SIGHUP)
            failed = (await _wait_event(daemon.log, "config_reload_failed", 1))[0]
            assert failed["level"] == "error" and "table.toml" in failed["error"]
            await sim.play_round()
            await rec.wait_for(lambda r: len(r.on("results")) == 2)
            assert daemon.proc.poll() is None

            assert await daemon.terminate() == 0
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
        assert log.count('"event":"daemon_ready"') == 1  # never restarted: one process throughout
    finally:
        broker.stop()


def test_changed_keys_names_sections_and_entries() -> None:
    base = parse_config(
        'table = "t"\ngame = "baccarat"\ndecks = 8\nseats = ["1"]\n[wagers.player]\n'
        '[spots]\n"1" = { seat = "1", bet = "player" }\n')
    other = parse_config(
        'table = "t"\ngame = "baccarat"\ndecks = 6\nseats = ["1", "2"]\n[wagers.player]\nmax = 5000\n'
        '[spots]\n"1" = { seat = "1", bet = "player" }\n"2" = { seat = "2", bet = "player" }\n'
        '[mqtt]\ncommand_burst = 7\n[mqtt.tls]\nca_file = "ca.pem"\n')
    assert changed_keys(base, base) == []
    assert changed_keys(base, other) == [
        "decks", "mqtt.command_burst", "mqtt.tls", "seats", "spots.2", "wagers.player"]
