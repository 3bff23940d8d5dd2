"""The dealer's round-end button pressed while cards of the round wait behind a held card
(docs/state-machine.md, "Holds"): an unreadable card, a card set aside after a sequence gap or a
possible re-scan holds the deal, the cards after it queue, private, and the dealer, who sees none of
that, deals the hits and presses round-end before the supervisor has resolved the hold. The button takes
effect in its place among the cards: after every card drawn before it is placed, before any card drawn
after it.

Before the fix the button took effect when pressed: behind an unreadable hole card the round ended at
once and the queued hits, placed after it, became ``EXTRA_CARD`` (a false critical alarm holding the
round, the hits recorded as joining no hand); behind a held card of the initial deal the button was
dropped (``UNEXPECTED_BUTTON``), so once resolved the round stayed in ``playing`` and the next coup's
bets were raised as ``PAST_POSTING`` on it. The hole card never reaches a public channel either way."""

from __future__ import annotations

from machine_support import (
    SHOE,
    Driver,
    baccarat_config,
    uth_config,
)
from machine_support import blackjack_locked as _locked
from machine_support import leaked as _leaked
from machine_support import raised_alarm as _alarm

from tablesense.daemon.table.machine import Phase
from tablesense.drivers.events import Button, Heartbeat

R = {"shoe": "1", "round": "1"}


def _cards(d: Driver) -> list[tuple[str | None, str | None, str]]:
    (floor,) = d.floor()
    return [(c.card, c.position, c.status) for c in floor.cards]


def test_hits_queued_behind_an_unreadable_hole_card_keep_their_places_when_round_end_comes_first() -> None:
    """5H to box 1, 7C up, 5D to box 1, the hole card unreadable, hits 8S and 9C (queued behind it), then
    round-end; the supervisor enters the hole card (QS). Before the fix the hits became EXTRA_CARD."""
    d = _locked()
    d.cards(["5H", "7C", "5D"])
    d.unreadable()  # the hole card
    d.cards(["8S", "9C"])  # hits: queued behind it
    d.button(Button.ROUND_END)
    assert d.results() == [] and d.state.held
    assert d.command("enter_card", card="QS", **R).ok
    assert "EXTRA_CARD" not in d.codes() and "UNEXPECTED_BUTTON" not in d.codes()
    assert d.machine.phase is Phase.COMPLETE and not d.state.held
    assert _cards(d) == [("5H", "1", "dealt"), ("7C", "dealer", "dealt"), ("5D", "1", "dealt"),
                         ("QS", "dealer", "entered"), ("8S", "play", "dealt"), ("9C", "play", "dealt")]
    assert [(s.spot, s.outcome, s.category, s.net) for s in d.settlements()] == [
        ("PP1", "win", "colored_pair", 6000)]
    (res,) = d.results()
    assert res.dealer == ("7C",) and res.boxes[0].cards == ("5H", "5D")
    assert d.public_cards() == ["5H", "7C", "5D"]
    assert _leaked(d, "QS", "8S", "9C") == []


def test_round_end_while_the_initial_deal_is_held_ends_the_round_once_it_is_resolved() -> None:
    """The dealer's up card unreadable: box 1's second card, the hole card and a hit queue behind it;
    round-end, then the supervisor enters the up card. Before the fix the button was dropped and the
    next coup's bets were raised as past-posting on the round still in play."""
    d = _locked()
    d.card("5H")
    d.unreadable()  # the dealer's up card
    d.cards(["5D", "QS", "8S"])
    d.button(Button.ROUND_END)
    assert "UNEXPECTED_BUTTON" not in d.codes()
    assert d.command("enter_card", card="9D", **R).ok
    assert d.machine.phase is Phase.COMPLETE and len(d.results()) == 1
    assert _cards(d) == [("5H", "1", "dealt"), ("9D", "dealer", "entered"), ("5D", "1", "dealt"),
                         ("QS", "dealer", "dealt"), ("8S", "play", "dealt")]
    assert [(s.spot, s.category) for s in d.settlements()] == [("PP1", "colored_pair")]
    d.remove("B1")  # paid and collected; the next coup's bets
    d.remove("PP1")
    d.bet("B1", 2000)
    d.bet("PP1", 1000)
    d.button(Button.NO_MORE_BETS)
    assert "PAST_POSTING" not in d.codes()
    assert (d.state.round, d.state.phase) == (2, "dealing")
    assert _leaked(d, "QS", "8S") == []


def test_round_end_behind_a_sequence_gap_ends_the_round_after_the_supervisor_deals_on() -> None:
    """The up card's frame (9D) is lost: box 1's second card (7C) carries the gap and is set aside, the
    hole card and two hits queue; round-end; the supervisor enters 9D and 7C and acknowledges."""
    d = _locked()
    d.card("5H")
    d.card("7C", skip=1)
    d.cards(["QS", "8S", "9C"])
    d.button(Button.ROUND_END)
    assert d.command("enter_card", card="9D", **R).ok
    assert d.command("enter_card", card="7C", **R).ok
    assert d.command("ack_alarm", alarm_id=_alarm(d, "SEQUENCE_GAP")).ok
    assert d.machine.phase is Phase.COMPLETE and len(d.results()) == 1
    assert "EXTRA_CARD" not in d.codes() and "UNEXPECTED_BUTTON" not in d.codes()
    placed = [(card, position) for card, position, status in _cards(d) if status != "re_entered"]
    assert placed == [("5H", "1"), ("QS", "dealer"), ("8S", "play"), ("9C", "play"), ("9D", "dealer"),
                      ("7C", "1")]  # the record lists them in draw order, the entered cards last
    slots = [(p, c) for _, p, c in d.machine.snapshot()["slots"]]
    assert slots == [("1", "5H"), ("dealer", "9D"), ("1", "7C"), ("dealer", "QS"), ("play", "8S"),
                     ("play", "9C")]
    assert [(s.spot, s.outcome) for s in d.settlements()] == [("PP1", "lose")]
    assert _leaked(d, "QS", "8S", "9C") == []


def test_a_card_drawn_after_the_held_round_end_is_an_extra_card() -> None:
    """The button ends the round in its place: a card the dealer draws after it (a mis-pull) is an
    extra card, the hit before it a play card."""
    d = _locked()
    d.cards(["5H", "7C", "5D"])
    d.unreadable()
    d.card("8S")
    d.button(Button.ROUND_END)
    d.card("2C")  # after the button
    assert d.command("enter_card", card="QS", **R).ok
    assert d.codes().count("EXTRA_CARD") == 1 and d.state.held and d.results() == []
    assert d.command("ack_alarm", alarm_id=_alarm(d, "EXTRA_CARD")).ok
    assert d.machine.phase is Phase.COMPLETE
    assert _cards(d)[-2:] == [("8S", "play", "dealt"), ("2C", None, "set_aside")]
    assert _leaked(d, "QS", "8S", "2C") == []


def test_a_held_round_end_that_comes_too_early_is_still_an_unexpected_button() -> None:
    """The supervisor acknowledges the gap without entering (the lost frame was no card) and the set-aside
    card stays out: the deal is one card short when the button's turn comes, so it does not apply and is
    raised then; the round ends at the dealer's next round-end."""
    d = _locked()
    d.card("5H")
    d.card("7C", skip=1)  # set aside
    d.card("QS")  # queued
    d.button(Button.ROUND_END)
    assert "UNEXPECTED_BUTTON" not in d.codes()
    assert d.command("ack_alarm", alarm_id=_alarm(d, "SEQUENCE_GAP")).ok
    (unexpected,) = [a for a in d.alarms() if a.code == "UNEXPECTED_BUTTON"]
    assert "cards still due" in unexpected.text
    assert d.machine.phase is Phase.DEALING and d.results() == []
    d.cards(["6D", "9S"])  # box 1's second card, the hole card
    d.button(Button.ROUND_END)
    assert d.machine.phase is Phase.COMPLETE and len(d.results()) == 1


def test_voiding_a_round_with_a_held_round_end_leaves_nothing_behind() -> None:
    d = _locked()
    d.cards(["5H", "7C", "5D"])
    d.unreadable()
    d.card("8S")
    d.button(Button.ROUND_END)
    assert "round_end_at" in d.machine.snapshot()
    assert d.command("void_round", **R).ok
    assert "round_end_at" not in d.machine.snapshot()
    d.button(Button.ROUND_END)  # the dealer clears the table: the next round opens as usual
    assert (d.state.round, d.state.phase) == (2, "betting")


def test_uth_reveal_pressed_while_the_deal_is_held_reveals_once_it_is_resolved() -> None:
    d = Driver(uth_config())
    d.bet("A1", 1000)
    d.bet("U1", 500)
    d.button(Button.NO_MORE_BETS)
    d.card("AH")
    d.unreadable()  # the dealer's first card
    d.cards(["AD", "KD", "2H", "5S", "9D", "JC", "3S"])
    d.button(Button.ROUND_END)  # the reveal
    assert d.settlements() == [] and d.state.cards == ()
    assert d.command("enter_card", card="KH", **R).ok
    assert d.machine.phase is Phase.COMPLETE and "UNEXPECTED_BUTTON" not in d.codes()
    (s,) = d.settlements()
    assert (s.spot, s.category) == ("U1", "aces")


def test_baccarat_round_end_while_held_is_still_an_unexpected_button() -> None:
    """A baccarat coup ends by its cards (§ 631a.11): the button never waits for them."""
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.cards(["2H", "3D"])
    d.unreadable()
    d.card("3C")  # queued
    out = d.button(Button.ROUND_END)
    assert d.codes(out) == ["UNEXPECTED_BUTTON"]
    assert "round_end_at" not in d.machine.snapshot()


def test_round_end_after_a_gap_on_a_heartbeat_waits_for_the_lost_hole_card() -> None:
    """The hole card's frame is lost and the shoe's heartbeat carries the gap; the dealer presses
    round-end (no hits). The supervisor enters the hole card and acknowledges: the round ends."""
    d = _locked()
    d.cards(["5H", "7C", "5D"])
    d.seq(SHOE)  # the hole card's frame (QS) is lost
    d.feed(Heartbeat(SHOE, d.seq(SHOE)))
    d.button(Button.ROUND_END)
    assert "UNEXPECTED_BUTTON" not in d.codes() and d.results() == []
    assert d.command("enter_card", card="QS", **R).ok
    assert d.command("ack_alarm", alarm_id=_alarm(d, "SEQUENCE_GAP")).ok
    assert d.machine.phase is Phase.COMPLETE and "UNEXPECTED_BUTTON" not in d.codes()
    assert _cards(d)[-1] == ("QS", "dealer", "entered")
    assert _leaked(d, "QS") == []
