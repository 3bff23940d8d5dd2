"""Scenario 5: the shoe unplugged and replugged mid-round.

The round must be held while the shoe is gone (DEVICE_LOST alarm with ``held``), never settled on the
cards dealt so far, and complete with the right settlements once the shoe is back and the remaining
cards arrive (including a card drawn while the shoe was unplugged, which the shoe sends after the replug).
Done four times, unplugging after the 1st, 2nd, 3rd and 4th card of a round."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from tablesense.daemon.broker import mosquitto_binary
from tablesense.daemon.rules.baccarat import next_card_hand
from tablesense.simulators.dealer import DealtRound

from .harness import Rig, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]

BETS = {"1P": 1000, "2B": 2000, "2T": 500, "1PP": 500, "2BP": 500, "1HM": 500}
MAIN = {"player", "banker", "tie"}


def shoe_state(rig: Rig) -> str:
    states = [g.body.get("state") for g in rig.sub.on("devices/shoe")]
    return str(states[-1]) if states else ""


async def deal_next(rig: Rig, rnd: DealtRound) -> bool:
    hand = next_card_hand([c for _, c in rnd.cards])
    if hand is None:
        return False
    await rig.sim._card(rnd, hand.value)
    return True


async def test_shoe_unplugged_mid_round(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=505)
    sim = rig.sim
    held_rounds = 0
    for cards_before in (1, 2, 3, 4):
        await sim.play_round()
        rnd = DealtRound(len(sim.rounds) + 1, dict(BETS))
        await sim.pads_frames(sim.pads.open_round(BETS))
        await sim.pads_frames(sim.pads.no_more_bets())
        for _ in range(cards_before):
            assert await deal_next(rig, rnd)
        await rig.settled_through_journal()
        await sim.shoe_runner.unplug()
        await wait_until(lambda: shoe_state(rig) == "disconnected", 30, "the daemon to see the shoe gone")
        lost = [a for a in rig.sub.on("alarms") if a.body["code"] == "DEVICE_LOST" and a.body["held"]]
        assert lost, "no held DEVICE_LOST alarm for a shoe unplugged mid-round"
        assert rig.sub.on("round")[-1].body["held"] is True
        current = (rig.sub.on("round")[-1].body["shoe"], rig.sub.on("round")[-1].body["round"])
        unplugged_seq = max(g.seq for g in rig.sub.first_of_each())
        # The dealer draws the next card while the shoe is unplugged: it is queued in the shoe.
        queued = asyncio.create_task(deal_next(rig, rnd))
        await asyncio.sleep(0)  # let the draw happen (no timing is asserted)
        settled_while_out = [g for g in rig.sub.on("settlements")
                             if (g.body["shoe"], g.body["round"]) == current and g.body["bet"] in MAIN]
        assert not settled_while_out
        await sim.shoe_runner.replug()
        assert await asyncio.wait_for(queued, 60)
        while await deal_next(rig, rnd):
            pass
        await sim.pads_frames(sim.pads.clear())
        sim.rounds.append(rnd)
        await rig.settled_through_journal()
        back = [g.seq for g in rig.sub.on("devices/shoe")
                if g.body["state"] == "online" and g.seq > unplugged_seq]
        assert back, "the shoe never came back online"
        mine = [g for g in rig.sub.on("settlements") if (g.body["shoe"], g.body["round"]) == current]
        assert mine
        for g in mine:  # nothing of the round was settled between the unplug and the shoe's return
            assert not (unplugged_seq < g.seq < back[0]), g.body
            if g.body["bet"] in MAIN:
                assert g.seq > back[0]
        held_rounds += 1
    await sim.play_round()
    await rig.settled_through_journal()
    assert await rig.daemon.terminate() == 0
    rig.verify("shoe_unplug_mid_round", extra={"held_rounds": held_rounds})
