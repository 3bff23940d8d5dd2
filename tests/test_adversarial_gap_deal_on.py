"""A dealer who keeps dealing on a round held by a ``SEQUENCE_GAP`` (the shoe lost a frame and did not
resend it: a version 1 shoe, or more than its 64 kept frames): the card carrying the gap is set aside,
and the cards after it wait, queued, until the supervisor has entered what is missing (``enter_card``,
which places the entered cards first) and acknowledged the gap (``ack_alarm``). Placed at once, they
would take the places of the lost and the set-aside card, and the entered cards would go to the end:
the round would settle hands that were never dealt (docs/state-machine.md, "Holds")."""

from __future__ import annotations

from machine_support import Driver, baccarat_config

from tablesense.drivers.events import Button

# Real coup: P1 2S, B1 9D (lost on the line), P2 2H (carries the gap), B2 KD: Player 2S 2H = 4 with a
# pair, Banker 9D KD = 9: a natural, the coup ends with four cards. Banker wins, the Player pair wins.
REAL = {"player": ["2S", "2H"], "banker": ["9D", "KD"]}


def _deal(enter_before_dealing_on: bool) -> Driver:
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.bet("1B", 1000)
    d.bet("1PP", 500)
    d.button(Button.NO_MORE_BETS)
    d.card("2S")
    d.card("2H", skip=1)  # frame of 9D lost: this frame carries the gap
    (gap,) = [a for a in d.alarms() if a.code == "SEQUENCE_GAP"]
    if enter_before_dealing_on:
        assert d.command("enter_card", card="9D", shoe="1", round="1").ok
        assert d.command("enter_card", card="2H", shoe="1", round="1").ok
        d.card("KD")
    else:
        d.card("KD")  # the dealer goes on while the round is held
        assert d.command("enter_card", card="9D", shoe="1", round="1").ok
        d.command("enter_card", card="2H", shoe="1", round="1")
    d.command("ack_alarm", alarm_id=gap.alarm_id)
    return d


def _hands(d: Driver) -> dict[str, list[str]]:
    """Each hand's cards in the order of their places in the deal (the machine's slots; the floor record
    lists cards in the order they were reported, an entered card after those dealt before it)."""
    assert d.floor()
    hands: dict[str, list[str]] = {"player": [], "banker": []}
    for _index, position, card in d.machine.snapshot()["slots"]:
        if position in hands and card is not None:
            hands[position].append(card)
    return hands


def test_the_gap_entered_before_the_dealer_goes_on_settles_the_real_coup() -> None:
    d = _deal(enter_before_dealing_on=True)
    assert _hands(d) == REAL
    got = {s.spot: s.outcome for s in d.settlements()}
    assert got == {"1P": "lose", "1B": "win", "1PP": "win"}


def test_cards_dealt_on_after_a_gap_never_take_the_lost_cards_places() -> None:
    d = _deal(enter_before_dealing_on=False)
    # Either the round settles the coup that was dealt, or it is still held (nothing settled); never
    # hands that were never dealt. Today: Player 2S 9D, Banker KD 2H (the entered cards appended), the
    # Player pair wager (2S 2H: a pair) published as lost, and the round open again for more cards.
    if d.floor():
        assert _hands(d) == REAL
        assert {s.spot: s.outcome for s in d.settlements()} == {"1P": "lose", "1B": "win", "1PP": "win"}
    else:
        assert d.settlements() == [] and d.state.held
        assert "KD" not in d.public_cards()
