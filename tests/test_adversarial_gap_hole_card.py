"""The information barrier against a lost frame: blackjack, the shoe loses the frame of the dealer's up
card and does not resend it (a version 1 shoe; any shoe after the 3 s ``RESEND_WAIT``). The frame after
the gap (box 1's second card) is set aside, and the cards after it wait, queued and private, until the
supervisor enters what is missing and acknowledges the alarm: the next card -- the dealer's hole card,
dealt face down -- must never take the up card's place and be published face up on the retained
``round`` topic, which signage reads. The same for a card the reader misread as one the shoe cannot
hold (``CARD_NOT_IN_SHOE``). Baccarat's hands: ``test_adversarial_gap_deal_on.py``."""

from __future__ import annotations

from machine_support import Driver, blackjack_config, card_tokens, public_payloads

from tablesense.drivers.events import Button, ShoeStatusKind


def _locked(decks: int = 6, pairs: bool = True) -> Driver:
    """A blackjack table, one box bet (and its Perfect Pairs unless ``pairs`` is false), no more bets."""
    d = Driver(blackjack_config(decks=decks))
    d.status(ShoeStatusKind.NEW_SHOE)
    d.bet("B1", 1000)
    if pairs:
        d.bet("PP1", 500)
    d.button(Button.NO_MORE_BETS)
    return d


def _deal() -> Driver:
    d = _locked()
    d.card("5H")  # box 1, first card
    d.card("7C", skip=1)  # the dealer's up card's frame was lost; this is box 1's second card
    d.card("QS")  # the dealer's hole card, face down
    return d


def test_the_gap_holds_the_round() -> None:
    d = _deal()
    assert "SEQUENCE_GAP" in d.codes()
    assert d.state.held


def test_the_hole_card_after_a_gap_never_reaches_a_public_topic() -> None:
    d = _deal()
    leaked = [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)]
    assert leaked == [], leaked[0][:200]


def test_the_hole_card_after_a_misread_card_never_reaches_a_public_topic() -> None:
    """One deck: box 1's second card is misread as a card the shoe already gave (``CARD_NOT_IN_SHOE``,
    set aside, held); the hole card then takes box 1's second slot, face up, and Perfect Pairs is settled
    on it. An unreadable card instead queues the cards after it (checked below)."""
    d = _locked(decks=1)
    d.cards(["5H", "7C", "5H", "QS"])  # box 1, dealer up, box 1 (misread), hole card
    assert "CARD_NOT_IN_SHOE" in d.codes()
    leaked = [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)]
    assert leaked == [], leaked[0][:200]


def test_the_hole_card_after_an_unreadable_card_stays_private() -> None:
    d = _locked()
    d.cards(["5H", "7C"])
    d.unreadable()
    d.card("QS")
    assert not [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)]


def test_after_the_supervisor_enters_the_lost_cards_the_hole_card_takes_its_own_place() -> None:
    """The supervisor enters the lost up card and the set-aside card, then acknowledges the gap: the
    queued hole card is dealt into the hole, face down, and stays off every public channel."""
    d = _deal()
    (gap,) = [a for a in d.alarms() if a.code == "SEQUENCE_GAP"]
    assert d.public_cards() == ["5H"]
    assert d.command("enter_card", card="9D", shoe="1", round="1").ok  # the lost up card
    assert d.command("enter_card", card="7C", shoe="1", round="1").ok  # box 1's second, set aside
    assert d.public_cards() == ["5H", "9D", "7C"]  # QS still waits
    assert d.command("ack_alarm", alarm_id=gap.alarm_id).ok
    slots = [(position, card) for _, position, card in d.machine.snapshot()["slots"] if card]
    assert slots == [("1", "5H"), ("dealer", "9D"), ("1", "7C"), ("dealer", "QS")]
    assert not d.state.held
    assert [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)] == []
    (pp,) = [s for s in d.settlements() if s.spot == "PP1"]  # 5H 7C: no pair, on the real cards
    assert pp.outcome == "lose"


def test_a_misread_card_can_be_entered_with_its_real_value() -> None:
    """One deck, box 1's second card misread as a card already out (``CARD_NOT_IN_SHOE``): the
    supervisor enters its real value and acknowledges; the hole card follows into the hole."""
    d = _locked(decks=1)
    d.cards(["5H", "7C", "5H", "QS"])
    (misread,) = [a for a in d.alarms() if a.code == "CARD_NOT_IN_SHOE"]
    assert d.command("enter_card", card="5D", shoe="1", round="1").ok
    assert d.command("ack_alarm", alarm_id=misread.alarm_id).ok
    slots = [(position, card) for _, position, card in d.machine.snapshot()["slots"] if card]
    assert slots == [("1", "5H"), ("dealer", "7C"), ("1", "5D"), ("dealer", "QS")]
    assert [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)] == []
    (pp,) = [s for s in d.settlements() if s.spot == "PP1"]  # 5H 5D: a coloured pair
    assert pp.outcome == "win"


def test_a_gap_acknowledged_without_entering_deals_the_queued_cards_on() -> None:
    """The supervisor judges that the lost frame was no card (a heartbeat) and acknowledges at once:
    the queued cards take the places in the order they came; the set-aside card stays out."""
    d = _locked(pairs=False)
    d.card("5H")
    d.card("9D", skip=1)  # carries the gap: set aside
    d.card("7C")
    assert d.public_cards() == ["5H"]
    (gap,) = [a for a in d.alarms() if a.code == "SEQUENCE_GAP"]
    assert d.command("ack_alarm", alarm_id=gap.alarm_id).ok
    assert d.public_cards() == ["5H", "7C"]


def test_voiding_the_round_clears_the_queue() -> None:
    d = _deal()
    assert d.command("void_round", shoe="1", round="1").ok
    assert d.machine.snapshot()["aside"] is None and d.machine.snapshot()["queue"] == []
    assert [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)] == []
