"""A silently dead link to the broker (no FIN, no RST: a loopback proxy that drops every byte, as
tests/faults does), against a real Mosquitto the test owns.

The tester found a dead link noticed only after up to 2 x keepalive (paho pings after one idle keepalive
and gives up one keepalive later), and the first round after the network returned waiting up to 30 s
for a reconnect backoff grown during the outage. Now the relay watches the receive side: after half a
keepalive of silence it sends a PINGREQ, after 1.25 x keepalive it closes the connection, so the cut is
noticed within 1.5 x keepalive; and its backoff (full jitter) never grows past ``backoff_max`` (5 s), so
the first attempt after the network returns is a few seconds away at most.

Each test prints a ``DEAD-LINK-RESULT`` line with the measured figures.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import structlog
from faults.harness import LinkProxy, wait_until
from test_mqtt_relay import MemoryOutbox, status

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.mqtt import DEAD_LINK_FACTOR, MqttSettings, Relay

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]

KEEPALIVE = 5
"""The smallest keepalive the config accepts (seconds)."""


@pytest.fixture
async def world(tmp_path: Path) -> Any:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    proxy = LinkProxy(broker.host, broker.port)
    await proxy.start()
    yield broker, proxy
    await proxy.close()
    broker.stop()


def relay_through(proxy: LinkProxy, table: str) -> Relay:
    s = MqttSettings(host=proxy.host, port=proxy.port, table=table, client_id=f"tablesense-{table}",
                     prefix="ts", keepalive=KEEPALIVE)  # default backoff: 0.2 s doubling to 5 s
    return Relay(s, MemoryOutbox(), status)


async def test_a_silent_cut_is_noticed_within_one_and_a_half_keepalives(world: Any) -> None:
    _, proxy = world
    relay = relay_through(proxy, "D1")
    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(relay.run())
        await wait_until(lambda: relay.connected, 20, "connected")
        # idle for more than two keepalives first: a live but quiet link is never taken for dead
        await asyncio.sleep(2.2 * KEEPALIVE)
        assert relay.connected and relay.dead_links == 0 and relay.connects == 1
        cut_at = time.monotonic()
        proxy.cut()
        await wait_until(lambda: not relay.connected, 3 * KEEPALIVE, "the dead link to be noticed")
        noticed = time.monotonic() - cut_at
        proxy.restore()
        await wait_until(lambda: relay.connected, 30, "reconnected")
        await relay.stop(task)
    dead = [e for e in logs if e.get("event") == "mqtt_link_dead"]
    lost = [e for e in logs if e.get("event") == "mqtt_disconnected"]
    result = {"keepalive_s": KEEPALIVE, "noticed_after_cut_s": round(noticed, 2),
              "ratio_to_keepalive": round(noticed / KEEPALIVE, 3),
              "closed_by": "receive-side watch" if dead else "paho, armed by the watch's early PINGREQ"}
    print(f"\nDEAD-LINK-RESULT {json.dumps(result)}")
    assert noticed <= 1.5 * KEEPALIVE, f"noticed {noticed:.2f} s after the cut (keepalive {KEEPALIVE} s)"
    # Who closed it: the watch (1.25 x keepalive of silence) or paho, whose own check closes once a
    # PINGREQ it knows of stays unanswered for a keepalive; the watch's PINGREQ at half a keepalive arms
    # it that early (alone, paho pings only after a whole idle keepalive: 2 x keepalive in all).
    assert len(lost) == 1 and relay.connects == 2
    if dead:
        assert DEAD_LINK_FACTOR * KEEPALIVE <= dead[0]["idle_s"] < 1.5 * KEEPALIVE


async def test_after_a_long_outage_the_next_attempt_is_seconds_away(world: Any) -> None:
    """20 s of black hole (every attempt accepted by the proxy and never answered): the backoff grows to
    its ceiling, 5 s, and no further. Once the network is back the relay is connected again within
    ``backoff_max`` plus the one attempt's own time."""
    _, proxy = world
    relay = relay_through(proxy, "D2")
    out = relay._journal
    assert isinstance(out, MemoryOutbox)
    task = asyncio.create_task(relay.run())
    await wait_until(lambda: relay.connected, 20, "connected")
    proxy.cut()
    await wait_until(lambda: not relay.connected, 3 * KEEPALIVE, "the dead link to be noticed")
    await asyncio.sleep(20)  # the outage (its length is the scenario, not an assertion)
    assert relay._backoff.ceiling == relay.settings.backoff_max == 5.0  # grown to its cap, not beyond
    out.add("settlements", {"n": 1})  # a round settled during the outage
    relay.notify()
    restored_at = time.monotonic()
    proxy.restore()
    await wait_until(lambda: relay.connected, 60, "reconnected")
    back = time.monotonic() - restored_at
    await wait_until(lambda: out.delivered == {1}, 20, "the settlement delivered")
    await relay.stop(task)
    result = {"outage_s": 20, "reconnected_after_restore_s": round(back, 2),
              "backoff_max_s": relay.settings.backoff_max}
    print(f"\nDEAD-LINK-RESULT {json.dumps(result)}")
    assert back <= relay.settings.backoff_max + 1.0, f"reconnected {back:.2f} s after the network returned"
