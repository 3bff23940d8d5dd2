"""Scenario 3: the daemon SIGKILLed at random moments across at least 200 rounds and restarted
each time, while the simulated dealer carries on.

A kill can land anywhere: mid-round, between the journal commit and the acknowledgement to the device,
while the relay has publishes in flight. The simulated devices do what docs/protocol.md §3 asks of real
ones (no help from the test): they keep every frame no acknowledgement covers and resend it after a
second without one and when the new daemon's status request arrives; the restarted daemon drops the
resends it had already journaled (same number, same content), rebuilds the open round from the journal
and re-publishes every undelivered row with its original ``msg_id``."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from tablesense.daemon.broker import mosquitto_binary

from .harness import Dealer, Rig, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.timeout(400),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]

ROUNDS = 210
KILLS = 15


def acks(rig: Rig) -> int:
    return len(rig.sim.shoe.acked) + len(rig.sim.pads.acked)


async def test_sigkill_at_random_points(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=303, ack_timeout=60.0)
    rng = random.Random(303)
    dealer = Dealer(rig.sim, max_rounds=ROUNDS).start()
    kills: list[int] = []  # rounds completed at each kill
    mid_round = 0
    # Random points: KILLS distinct rounds spread over the run, and within each a random number of frames
    # acknowledged by the (re)started daemon (so a kill lands at a random phase of the round: bets,
    # no-more-bets, any card, the clear), plus a random fraction of a frame's processing time.
    for at_round in sorted(rng.sample(range(1, ROUNDS - 5), KILLS)):
        await dealer.wait_rounds(at_round, 300)
        frames = rng.randint(1, 25)
        acked = acks(rig)
        target = acked + frames
        await wait_until(lambda: acks(rig) >= target, 120, f"{frames} frames acknowledged")  # noqa: B023
        await asyncio.sleep(rng.uniform(0, 0.005))
        assert rig.daemon.kill() == -9
        kills.append(len(rig.sim.rounds))
        mid_round += any(v > 0 for v in rig.sim.pads.bets.values())  # chips down: a round in progress
        await asyncio.sleep(rng.uniform(0, 1.5))  # the devices resend into the closed port meanwhile
        rig.restart_daemon()
    await dealer.wait_rounds(ROUNDS, 300)
    await dealer.stop()
    await rig.settled_through_journal()
    await rig.wait_ready()
    assert await rig.daemon.terminate() == 0
    assert rig.daemon.exits == [-9] * len(kills) + [0]
    alarms = [g.body["code"] for g in rig.sub.on("alarms")]
    # no gap, no irregularity: the restarts lost nothing (ADVANTAGE_PLAY is surveillance info about the
    # shoe composition, raised by real shoes; it holds nothing)
    assert set(alarms) <= {"CUT_CARD", "ADVANTAGE_PLAY"}, alarms
    resent = rig.sim.shoe_runner.resent + rig.sim.pads_runner.resent
    rig.verify("sigkill_restart", extra={"kills": len(kills), "kill_after_rounds": kills,
                                         "kills_mid_round": mid_round, "resent_frames": resent})
    assert len(rig.sim.rounds) >= 200 and len(kills) >= 10
