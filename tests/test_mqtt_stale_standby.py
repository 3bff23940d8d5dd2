"""A retained ``standby`` left on the table's status topic by an earlier process is not a duplicate
stepping back for this one (docs/mqtt.md, "Duplicate instance"; breaker report item 4).

Duplicates are told by instance id alone now (a spare whose disk was cloned from the table's controller
shares its journal epoch), so a stale ``standby`` -- of this journal's epoch or another's -- found retained
at the first connection must be told by its time: older than this process's first ``online``, it raised
no ``DUPLICATE_INSTANCE``. Before the fix one of another epoch raised the critical alarm at every start.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import aiomqtt
import pytest
import structlog
from faults.harness import wait_until
from test_mqtt_duplicate_instance import config

from tablesense.daemon.app import App
from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


@pytest.mark.parametrize("same_epoch", [True, False], ids=["same epoch", "another epoch"])
async def test_a_stale_retained_standby_raises_no_duplicate_instance(tmp_path: Path,
                                                                     same_epoch: bool) -> None:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    try:
        app = App(config(broker, tmp_path / "journal", "table-t1"))
        app.open()
        assert app.journal is not None
        stale = {"schema": "tablesense.status", "table": "t1", "ts": "2026-01-01T00:00:00.000Z",
                 "state": "standby", "detail": "stepped back", "instance": "0123456789abcdef",
                 "epoch": app.journal.epoch if same_epoch else "feedf00d"}
        async with aiomqtt.Client(broker.host, broker.port) as c:
            await c.publish("tb/t1/status", json.dumps(stale).encode(), qos=1, retain=True)
        with structlog.testing.capture_logs() as logs:
            task = asyncio.create_task(app.run())
            try:
                await wait_until(lambda: app.relay is not None and app.relay.connected, 20, "connected")
                await wait_until(lambda: app.journal is not None and app.journal.pending_count() == 0, 20,
                                 "the start's messages delivered")
                await asyncio.sleep(1.0)  # the retained standby arrives right after the subscription
                assert app.relay is not None and app.relay.standby is None and app.relay.connects == 1
            finally:
                app.stop()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(task, 20)
        assert not [e for e in logs if e.get("event") == "mqtt_duplicate_instance"]
    finally:
        broker.stop()
