"""Scenario 1: the broker stopped for 5 s and for 60 s in the middle of a shoe, while rounds
keep being dealt and settled.

The daemon keeps journaling (the dealer only moves on when each frame is acknowledged, and the daemon
acknowledges only journaled frames), reconnects with its persistent session once the broker is back and
delivers the backlog in order; the subscriber's persistent session (kept by Mosquitto's persistence
across the restart) gets everything, duplicates dropped by ``msg_id``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from tablesense.daemon.broker import mosquitto_binary

from .harness import Dealer, Rig

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


@pytest.mark.parametrize("outage", [5, 60])
async def test_broker_stopped_mid_shoe(rigs: Callable[..., Awaitable[Rig]], outage: int) -> None:
    rig = await rigs(seed=100 + outage)
    dealer = Dealer(rig.sim, gap=0.2).start()
    await dealer.wait_rounds(8, 60)
    assert rig.sim.shoe.remaining > 100  # mid-shoe
    rig.broker.stop()
    at_stop = len(rig.sim.rounds)
    # The outage itself is the scenario's duration, not a timing assertion: dealing goes on meanwhile.
    await asyncio.sleep(outage)
    during = len(rig.sim.rounds) - at_stop
    assert during >= 1, "no round was settled while the broker was down"
    assert dealer.failed is None and rig.daemon.running
    rig.broker.start()
    await dealer.wait_rounds(len(rig.sim.rounds) + 5, 120)
    await dealer.stop()
    await rig.settled_through_journal()
    assert await rig.daemon.terminate() == 0
    rig.verify(f"broker_down_{outage}s", extra={"outage_s": outage, "rounds_during_outage": during,
                                                "relay_connects": rig.daemon.events("mqtt_connected")})
