"""Adversarial review of card intake: a device sends frames its role never sends.

docs/protocol.md §3 gives each device its messages: the shoe sends cards (``CD``, ``CU``), shoe events
(``NS``, ``BN``, ``CC``, ``EM``, ``LO``/``LC``), ``ID``, ``HB``, ``ER``; the bet-sensor pads send spots
(``SP``) and dealer buttons (``BT``), ``ID``, ``HB``, ``ER``. The pads sit on the players' side of the
layout and are the easier device to tamper with or spoof. Tried on a real ``tablesense run`` with the
simulated table on ptys and a real Mosquitto:

* mid-round, the pads send ``$CD`` (a card drawn): before this review the card became the Banker's second
  card and the round settled on it, with no alarm. A card that did not leave the shoe must join no hand;
  the frame is an impossible input: alarmed and held (a supervisor decides), never silently applied;
* mid-round, the shoe sends ``$BT,VOID_ROUND`` (a dealer button): before, the round was voided and every
  wager returned on the shoe's word.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from faults.harness import Rig

from tablesense.daemon.broker import mosquitto_binary
from tablesense.daemon.rules.baccarat import next_card_hand
from tablesense.daemon.rules.cards import Card
from tablesense.drivers.events import Button, CardDrawn, DealerButton
from tablesense.simulators.dealer import DealtRound

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


async def three_cards_dealt(rig: Rig) -> DealtRound:
    """One complete round, then a round with a wager, locked, and its first three cards dealt."""
    sim = rig.sim
    await sim.play_round()
    rnd = DealtRound(len(sim.rounds) + 1, {next(iter(rig.config.spots)): 1000})
    await sim.pads_frames(sim.pads.open_round(rnd.wagers))
    await sim.pads_frames(sim.pads.no_more_bets())
    for _ in range(3):
        hand = next_card_hand([c for _, c in rnd.cards])
        assert hand is not None
        await sim._card(rnd, hand.value)
    return rnd


def round_state(rig: Rig) -> dict[str, Any]:
    return [g for g in rig.sub.on("round")][-1].body


def raised(rig: Rig, since: int) -> list[dict[str, Any]]:
    return [g.body for g in rig.sub.on("alarms")[since:] if g.body["state"] == "raised"]


async def test_a_card_frame_from_the_bet_pads_joins_no_hand(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=2101)
    sim = rig.sim
    await three_cards_dealt(rig)
    await rig.settled_through_journal()
    alarms_before = len(rig.sub.on("alarms"))
    settled_before = len(rig.sub.on("settlements"))
    await sim.pads_frames(sim.pads.emit(lambda s: CardDrawn(sim.pads.device, s, Card.parse("9H"))))
    await asyncio.sleep(0.5)
    await rig.settled_through_journal()
    state = round_state(rig)
    assert len(state["cards"]) == 3, f"a card from the pads joined a hand: {state['cards']}"
    assert state["held"], "the pads' card frame did not hold the round"
    assert any(a["device"] == "pads" and a["held"] for a in raised(rig, alarms_before))
    assert len(rig.sub.on("settlements")) == settled_before
    assert rig.daemon.running


async def test_a_void_button_from_the_shoe_voids_nothing(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=2102)
    sim = rig.sim
    await three_cards_dealt(rig)
    await rig.settled_through_journal()
    alarms_before = len(rig.sub.on("alarms"))
    await sim.shoe_frames(sim.shoe.emit(lambda s: DealerButton(sim.shoe.device, s, Button.VOID_ROUND)))
    await asyncio.sleep(0.5)
    await rig.settled_through_journal()
    state = round_state(rig)
    assert not state["void"], "the shoe voided the round with a dealer-button frame"
    assert not [a for a in raised(rig, alarms_before) if a["code"] == "ROUND_VOID"]
    assert any(a["device"] == "shoe" for a in raised(rig, alarms_before))
    assert rig.daemon.running
