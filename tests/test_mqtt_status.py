"""The retained status is the table's birth message and its will: software version, instance id, config
digest, journal epoch, last seq and chain head (docs/mqtt.md, "Status"); the will names the same
instance. Against a real Mosquitto the test owns."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import json
import re
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from faults.harness import wait_until
from machine_support import baccarat_config
from test_command_hardening import live_round

from tablesense.daemon.app import App
from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary

pytestmark = pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")


async def statuses(broker: MosquittoBroker, n: int, seen: list[dict[str, Any]]) -> None:
    async with aiomqtt.Client(broker.host, broker.port) as c:
        await c.subscribe("ts/t1/status", qos=1)
        async with asyncio.timeout(20):
            async for m in c.messages:
                seen.append(json.loads(m.payload))  # type: ignore[arg-type]
                if len(seen) == n:
                    return


async def test_birth_message_and_will_identify_instance_config_and_journal(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    extra = (f'[journal]\ndirectory = "{tmp_path / "journal"}"\n[mqtt]\nhost = "{broker.host}"\n'
             f'port = {broker.port}\ntopic_prefix = "ts"\n')
    config = baccarat_config(extra=extra)
    path = tmp_path / "t1.toml"
    path.write_text("# the file the daemon was started with\n")
    app = App(config, config_path=path)
    app.open()
    await live_round(app)
    seen: list[dict[str, Any]] = []
    watcher = asyncio.create_task(statuses(broker, 2, seen))
    await asyncio.sleep(0.2)
    task = asyncio.create_task(app.run())
    try:
        await wait_until(lambda: len(seen) >= 1, 20, "the birth message")
        assert app.relay is not None and app.relay._client is not None and app.journal is not None
        app.relay._client.force_close()  # the connection dies without a DISCONNECT: the broker sends the will
        await asyncio.wait_for(watcher, 20)
    finally:
        app.stop()
        await asyncio.wait_for(task, 20)
        broker.stop()
    birth, will = seen
    assert birth["state"] == "online" and will["state"] == "offline"
    assert birth["software"] == importlib.metadata.version("tablesense")
    assert re.fullmatch(r"[0-9a-f]{16}", birth["instance"]) and birth["instance"] == app.instance
    assert birth["config_digest"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert birth["epoch"] == app.journal.epoch and len(birth["epoch"]) == 8
    assert 0 < birth["last_seq"] <= app.journal.last_seq  # what was journaled when it connected
    assert 0 <= birth["chain_seq"] <= birth["last_seq"]
    assert re.fullmatch(r"([0-9a-f]{64})?", birth["chain_head"])  # "" until the sealed journal is merged
    assert will["instance"] == birth["instance"] and will["epoch"] == birth["epoch"]
    assert birth["seq"] == 0 and birth["msg_id"] == ""  # not a journaled message
