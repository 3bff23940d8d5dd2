"""Scenario 4 (issue 5): SIGTERM while the relay is backing off between reconnects (broker down).

The daemon must exit 0 within 5 s; once the broker is back the retained ``status`` must say ``offline``
(the daemon's will or an explicit publish), and the rounds settled while the broker was down must all be
delivered by the next start, with the same ``msg_id``s."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import aiomqtt
import pytest

from daemon.broker import mosquitto_binary

from .harness import Rig, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


async def retained_status(rig: Rig) -> dict[str, object]:
    """The retained status as a fresh (clean-session) client sees it."""
    async with aiomqtt.Client(rig.broker.host, rig.broker.port) as c:
        await c.subscribe(f"tablesense/{rig.config.table}/status", qos=1)
        async with asyncio.timeout(5):
            async for m in c.messages:
                assert m.retain
                body: dict[str, object] = json.loads(m.payload)  # type: ignore[arg-type]
                return body
    raise AssertionError("no retained status")


async def test_sigterm_during_reconnect_backoff(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=404)
    for _ in range(3):
        await rig.sim.play_round()
    await rig.settled_through_journal()
    rig.broker.stop()
    for _ in range(3):  # settled and journaled with the broker down
        await rig.sim.play_round()
    failed_before = rig.daemon.events("mqtt_connect_failed")
    await wait_until(lambda: rig.daemon.events("mqtt_connect_failed") >= failed_before + 2, 30,
                     "the relay to fail reconnecting twice (it is backing off)")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await rig.daemon.terminate(timeout=5.0) == 0
    stop_seconds = round(loop.time() - t0, 2)
    assert rig.daemon.events("daemon_stopped") == 1

    rig.broker.start()
    status = await retained_status(rig)
    # Bring the daemon back so that what was journaled while the broker was down gets delivered.
    rig.restart_daemon()
    await rig.settled_through_journal()
    assert await rig.daemon.terminate() == 0
    rig.verify("sigterm_during_backoff", extra={"sigterm_exit_seconds": stop_seconds,
                                                "retained_status_after": status["state"]})
    assert status["state"] == "offline", f"retained status after SIGTERM during backoff: {status}"
