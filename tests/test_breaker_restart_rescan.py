"""Adversarial review of re-scans: a serial shoe restarts mid-round and reads the card in its throat again.

After a link loss mid-round, a first card equal to the last card read before the loss holds the round
(``POSSIBLE_RESCAN``) until a supervisor decides (``rescan``). A shoe on an RS-232 line can restart (a
power glitch, a watchdog reset) without the line ever dropping: it announces a new session in its
identity frame (``DEVICE_RESTARTED``, holding) and may report the card in its throat again. Tried on a
real ``tablesense run`` with the simulated shoe on a pty (``power_cycle``: new session, the pty stays
open): before this review the re-read card took its place in the deal (here the Banker's second card, the
same JD twice in one round) and only ``DEVICE_RESTARTED`` held the round, an alarm ``ack_alarm`` alone
releases; acknowledged, the round settled with the card counted twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from faults.harness import Rig, wait_until

from tablesense.daemon.broker import mosquitto_binary
from tablesense.daemon.rules.baccarat import next_card_hand
from tablesense.simulators.dealer import DealtRound

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


async def test_a_card_re_read_after_a_shoe_restart_holds_the_round(
        rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=1014)
    sim = rig.sim
    await sim.play_round()
    rnd = DealtRound(len(sim.rounds) + 1, {next(iter(rig.config.spots)): 1000})
    await sim.pads_frames(sim.pads.open_round(rnd.wagers))
    await sim.pads_frames(sim.pads.no_more_bets())
    for _ in range(3):  # the round needs at least one more card
        hand = next_card_hand([c for _, c in rnd.cards])
        assert hand is not None
        await sim._card(rnd, hand.value)
    await rig.settled_through_journal()
    await sim.power_cycle("shoe")  # new session, the line stays up
    await wait_until(lambda: any(g.body["code"] == "DEVICE_RESTARTED" for g in rig.sub.on("alarms")), 30,
                     "DEVICE_RESTARTED")
    last = rnd.cards[-1][1]
    await sim.shoe_frames(sim.shoe.inject_card(last))  # the reader reports the card in its throat again
    await wait_until(lambda: any(g.body["code"] == "POSSIBLE_RESCAN" for g in rig.sub.on("alarms")), 15,
                     "POSSIBLE_RESCAN")
    await asyncio.sleep(0.5)
    await rig.settled_through_journal()
    state = [g for g in rig.sub.on("round")][-1].body
    assert state["held"] and "POSSIBLE_RESCAN" in state["hold_codes"]
    assert len(state["cards"]) == 3  # the re-read card is in no hand until the supervisor decides
