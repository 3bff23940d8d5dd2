"""An 8-deck shoe dealt to its 416th card, end to end: a real ``tablesense run``, Mosquitto and the
resending simulators.

The shoe has no cut card and no empty sensor (it never sends the ``EMPTY`` status), so the daemon can
know the shoe is out only from its own inventory (58 Pa. Code § 627a.3: 8 decks are 416 cards; the burn
counts as out). Rounds are dealt by the third-card rules (§ 631a.11) until the shoe cannot finish one:
with this shuffle 6 cards are burned, 82 rounds complete, and the 83rd gets the last three cards
(P1 B1 P2). The 416th card must raise ``SHOE_EXHAUSTED`` and hold the round at once, with 0 cards left;
before the fix the round state showed 0 cards left and nothing happened until a 417th card, which this
shoe cannot deal. Every completed round is checked by :meth:`Rig.verify` (settlements as
``tablesense settle`` computes them, nothing lost or unjournaled). Prints one ``FAULTS-RESULT`` line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tablesense.daemon.broker import mosquitto_binary
from tablesense.daemon.rules.baccarat import next_card_hand
from tablesense.simulators.dealer import DealtRound, SimTable

from .harness import Rig, wait_until
from .test_intake_faults import alarms, quiet

pytestmark = [pytest.mark.faults, pytest.mark.timeout(600),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]

SHUFFLE = 1033
"""A shuffle whose last round is short: 6 burned, 82 rounds, then 3 cards (checked below)."""

WAGERS = {"1P": 1000, "2B": 2000, "1T": 500, "1PP": 500, "2BP": 500}


async def deal_round(sim: SimTable) -> tuple[DealtRound, bool]:
    """Bets, no more bets, cards by the third-card rules while the shoe has any; round end and clear
    when the round completed. Returns the round and whether it completed."""
    rnd = DealtRound(len(sim.rounds) + 1, dict(WAGERS))
    await sim.pads_frames(sim.pads.open_round(WAGERS))
    await sim.pads_frames(sim.pads.no_more_bets())
    while (hand := next_card_hand([c for _, c in rnd.cards])) is not None:
        if not await sim._card(rnd, hand.value):
            return rnd, False
    await sim.pads_frames(sim.pads.round_end())
    await sim.pads_frames(sim.pads.clear())
    sim.rounds.append(rnd)
    return rnd, True


async def test_the_416th_card_ends_the_shoe(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=SHUFFLE)
    sim = rig.sim
    sim.shoe.cut_card_at = None  # no cut card: the shoe is dealt to its last card
    sim.shoe._empty_frame = lambda: b""  # type: ignore[method-assign]  # no empty sensor either
    await sim.start_shoe()
    burned = len(sim.shoe.burned)
    while True:
        rnd, completed = await deal_round(sim)
        if not completed:
            break
        assert sim.shoe.remaining > 0, "this shuffle must end mid-round"
    assert sim.shoe.remaining == 0 and burned + len(sim.shoe.dealt) == 416
    assert (burned, len(sim.rounds), len(rnd.cards)) == (6, 82, 3)

    await wait_until(lambda: bool(alarms(rig, "SHOE_EXHAUSTED")), 30, "SHOE_EXHAUSTED at the 416th card")
    await quiet(rig)
    exhausted = alarms(rig, "SHOE_EXHAUSTED")
    assert len(exhausted) == 1
    alarm = exhausted[0].body
    assert alarm["held"] and alarm["severity"] == "critical" and "last card is out" in alarm["text"], alarm
    state = rig.sub.on("round")[-1].body
    assert state["round"] == len(sim.rounds) + 1 and state["cards_remaining"] == 0
    assert state["held"] and "SHOE_EXHAUSTED" in state["hold_codes"]
    assert [(c["card"], c["position"]) for c in state["cards"]] == [(str(c), p) for p, c in rnd.cards]
    assert await rig.daemon.terminate() == 0
    rig.verify("shoe_dealt_to_its_last_card", extra={
        "cards_burned": burned, "cards_dealt": len(sim.shoe.dealt), "short_round_cards": len(rnd.cards),
        "cards_remaining": state["cards_remaining"], "shoe_exhausted_alarms": len(exhausted),
        "alarm_text": alarm["text"]})
