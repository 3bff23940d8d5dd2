"""An instance that stepped back publishes its ``standby`` even when the step back was cut short.

CI (two full suites on the 2 cores): two instances sharing a client id, the older one stepped back but
the newer one, pushed off by its reconnect, took the session back before the broker acknowledged the
older one's ``standby``. The older one then stayed disconnected for good, its ``standby`` never
published, and the table never raised ``DUPLICATE_INSTANCE``: the spare went unnoticed. Now it connects
again after the takeover backoff only to publish that status, at most ``STANDBY_ANNOUNCE_TRIES`` times.
These tests put the relay in that state directly (stepped back, not announced) on a real Mosquitto.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiomqtt
import pytest
import structlog
from e2e_support import retained_body
from faults.harness import wait_until
from test_mqtt_relay import MemoryOutbox, broker, settings

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.mqtt import STANDBY_ANNOUNCE_TRIES, Relay
from tablesense.drivers.backoff import Backoff

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]
__all__ = ["broker"]  # the module's broker fixture, imported


def status_payload(state: str) -> bytes:
    return json.dumps({"schema": "tablesense.status", "state": state, "instance": "0ld0ld0ld0ld0ld0",
                       "ts": "2026-12-01T00:00:00.000Z"}).encode()


def stepped_back(broker: MosquittoBroker, table: str) -> Relay:
    """A relay in the state a cut-short step back leaves: standby, its status not acknowledged."""
    outbox = MemoryOutbox()
    outbox.add("settlements", {"spot": "1P"})  # journaled while it published: kept, never published now
    r = Relay(settings(broker, table), outbox, status_payload, instance="0ld0ld0ld0ld0ld0")
    r.standby = "instance n3wn3wn3wn3wn3wn publishes for this table: this instance stepped back"
    r._takeover_backoff = Backoff(0.05, 0.1, floor=0.05)  # the real one waits at least 1 s
    return r


async def test_a_step_back_cut_short_publishes_its_standby_on_one_more_connection(
        broker: MosquittoBroker) -> None:
    r = stepped_back(broker, "SB1")
    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(r.run())
        try:
            await wait_until(lambda: r.standby_announced, 10, "the standby acknowledged")
            await asyncio.sleep(0.5)  # announced: it stays away (no reconnect loop)
            assert r.connects == 1 and not r.connected
        finally:
            await r.stop(task)
    status = await retained_body(broker, "ts/SB1/status", timeout=2)
    assert status["state"] == "standby"
    assert [e["attempt"] for e in logs if e["event"] == "mqtt_standby_announce"] == [1]
    assert r.delivered == 0 and r._journal.delivered == set()  # type: ignore[attr-defined]  # only its status


async def test_the_announcement_is_tried_a_bounded_number_of_times(broker: MosquittoBroker) -> None:
    r = stepped_back(broker, "SB2")
    real_publish = r._publish

    async def refused(client: Any, topic: str, payload: bytes, *args: Any, **kwargs: Any) -> None:
        if topic.endswith("/status"):
            raise aiomqtt.MqttError("the newer instance took the session back")
        await real_publish(client, topic, payload, *args, **kwargs)

    r._publish = refused  # type: ignore[method-assign]
    task = asyncio.create_task(r.run())
    try:
        await wait_until(lambda: r.connects >= STANDBY_ANNOUNCE_TRIES and not r.connected, 10,
                         "every announcement tried")
        await asyncio.sleep(0.5)
        assert r.connects == STANDBY_ANNOUNCE_TRIES and not r.standby_announced
    finally:
        await r.stop(task)
