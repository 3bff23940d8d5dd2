"""Cards set aside mid-deal, the cases the first change missed (docs/state-machine.md, "Holds"): a second
set-aside card in the same deal, a set-aside card behind cards already queued (an unreadable card, a
possible re-scan), a lost frame whose gap lands on a heartbeat instead of a card, an unreadable card
carrying the gap, and a gap among blackjack's later cards. Each failed before the fix: a card took a lost
card's place (blackjack's hole card published face up on the round topic) or the shoe miscounted."""

from __future__ import annotations

from machine_support import SHOE, Driver, baccarat_config, blackjack_config, card_tokens, public_payloads

from tablesense.drivers.events import Button, Heartbeat, LinkState, ShoeStatusKind

R = {"shoe": "1", "round": "1"}


def _blackjack(decks: int = 6, boxes: tuple[str, ...] = ("1",)) -> Driver:
    d = Driver(blackjack_config(decks=decks))
    d.status(ShoeStatusKind.NEW_SHOE)
    for box in boxes:
        d.bet(f"B{box}", 1000)
    d.button(Button.NO_MORE_BETS)
    return d


def _slots(d: Driver) -> list[tuple[str, str | None]]:
    return [(p, c) for _, p, c in d.machine.snapshot()["slots"]]


def _leaked(d: Driver, card: str) -> bool:
    return any(card in card_tokens(p) for p in public_payloads(d.emits))


def _alarm(d: Driver, code: str) -> str:
    return [a.alarm_id for a in d.alarms() if a.code == code and a.state == "raised"][-1]


def test_a_second_set_aside_card_stops_the_deal_again_after_the_first_is_acknowledged() -> None:
    d = _blackjack(decks=1, boxes=("1", "2"))
    d.card("5H")  # box 1; box 2's first card (2D) is lost
    d.card("6H", skip=1)  # the dealer's up card carries the gap: set aside
    d.card("7C")  # box 1's second card: queued
    d.card("5H")  # box 2's second card misread as a card already out: set aside
    d.card("QS")  # the hole card
    assert d.command("enter_card", card="2D", **R).ok
    assert d.command("enter_card", card="6H", **R).ok
    assert d.command("ack_alarm", alarm_id=_alarm(d, "SEQUENCE_GAP")).ok
    assert _slots(d) == [("1", "5H"), ("2", "2D"), ("dealer", "6H"), ("1", "7C")]  # QS waits
    assert not _leaked(d, "QS")
    assert d.command("enter_card", card="9S", **R).ok  # the misread card's real value
    assert d.command("ack_alarm", alarm_id=_alarm(d, "CARD_NOT_IN_SHOE")).ok
    assert _slots(d)[-2:] == [("2", "9S"), ("dealer", "QS")]
    assert not _leaked(d, "QS") and not d.state.held


def test_a_gap_behind_an_unreadable_card_keeps_the_order_the_cards_left_the_shoe() -> None:
    d = _blackjack()
    d.unreadable()  # box 1's first card
    d.card("7C")  # the dealer's up card: queued behind it
    d.card("8D", skip=1)  # box 1's second card (5D) lost; the hole card carries the gap
    assert d.command("enter_card", card="5H", **R).ok
    assert _slots(d) == [("1", "5H"), ("dealer", "7C")]
    assert d.command("enter_card", card="5D", **R).ok
    assert d.command("enter_card", card="8D", **R).ok
    assert _slots(d) == [("1", "5H"), ("dealer", "7C"), ("1", "5D"), ("dealer", "8D")]
    assert not _leaked(d, "8D")


def test_a_gap_behind_a_possible_rescan_keeps_the_order_the_cards_left_the_shoe() -> None:
    d = _blackjack()
    d.card("5H")
    d.link(SHOE, LinkState.DISCONNECTED)
    d.link(SHOE, LinkState.ONLINE)
    d.card("5H")  # possible re-scan; a real second 5H, the dealer's up card
    d.card("8D", skip=1)  # box 1's second card (9C) lost; the hole card carries the gap
    assert d.command("rescan", action="keep", **R).ok
    assert d.command("enter_card", card="9C", **R).ok
    assert _slots(d) == [("1", "5H"), ("dealer", "5H"), ("1", "9C")]


def test_a_gap_on_a_heartbeat_queues_the_cards_after_it() -> None:
    """The dealer pauses: the shoe's heartbeat, not a card, carries the gap of the lost up card."""
    d = _blackjack()
    d.card("5H")
    d.seq(SHOE)  # the up card's frame (9D) is lost
    d.feed(Heartbeat(SHOE, d.seq(SHOE)))
    d.cards(["7C", "QS"])
    assert d.public_cards() == ["5H"] and not _leaked(d, "QS")
    assert d.command("enter_card", card="9D", **R).ok
    assert d.command("ack_alarm", alarm_id=_alarm(d, "SEQUENCE_GAP")).ok
    assert _slots(d) == [("1", "5H"), ("dealer", "9D"), ("1", "7C"), ("dealer", "QS")]
    assert not _leaked(d, "QS")


def test_an_unreadable_card_carrying_a_gap_is_counted_once_when_entered() -> None:
    d = _blackjack()
    start = d.machine.snapshot()["remaining"]
    d.card("5H")
    d.seq(SHOE)  # 9D lost
    d.unreadable()  # 7C, unreadable, carries the gap
    assert d.command("enter_card", card="9D", **R).ok
    assert d.command("enter_card", card="7C", **R).ok
    assert d.command("ack_alarm", alarm_id=_alarm(d, "SEQUENCE_GAP")).ok
    assert d.machine.snapshot()["remaining"] == start - 3


def test_a_gap_among_blackjacks_later_cards_does_not_turn_the_hits_into_extra_cards() -> None:
    d = _blackjack()
    d.cards("5H 6H 7H 8H")
    d.card("2C", skip=1)  # a hit carrying a gap
    d.card("3C")
    d.button(Button.ROUND_END)
    assert d.command("ack_alarm", alarm_id=_alarm(d, "SEQUENCE_GAP")).ok
    assert "EXTRA_CARD" not in d.codes() and d.machine.phase.value == "complete"


def test_a_misread_card_that_carries_a_gap_names_the_gap_and_stops_the_deal_there_first() -> None:
    """One deck: the Banker's first card is lost (not resent) and the next card, the Player's second, is
    misread as a card already out. Both are raised: the deal stops at the lost card first, then at the
    misread one, and the supervisor enters each in its place."""
    d = Driver(baccarat_config(decks=1))
    d.bet("1P", 1000)
    d.bet("1PP", 500)
    d.button(Button.NO_MORE_BETS)
    d.card("2S")
    d.card("2S", skip=1)  # 9D's frame lost; 2H misread as 2S (already out), carrying the gap
    codes = d.codes()
    assert "SEQUENCE_GAP" in codes and "CARD_NOT_IN_SHOE" in codes
    (gap,) = [a for a in d.alarms() if a.code == "SEQUENCE_GAP"]
    (misread,) = [a for a in d.alarms() if a.code == "CARD_NOT_IN_SHOE"]
    d.card("KD")  # the dealer goes on: it waits
    assert d.public_cards() == ["2S"]
    assert d.command("enter_card", card="9D", shoe="1", round="1").ok  # the lost card
    assert d.command("ack_alarm", alarm_id=gap.alarm_id).ok
    assert d.public_cards() == ["2S", "9D"]  # the deal stops at the misread card now
    assert d.command("enter_card", card="2H", shoe="1", round="1").ok  # its real value
    assert d.command("ack_alarm", alarm_id=misread.alarm_id).ok
    slots = [(p, c) for _, p, c in d.machine.snapshot()["slots"] if c]
    assert slots == [("player", "2S"), ("banker", "9D"), ("player", "2H"), ("banker", "KD")]
    assert {s.spot: s.outcome for s in d.settlements()} == {"1P": "lose", "1PP": "win"}
