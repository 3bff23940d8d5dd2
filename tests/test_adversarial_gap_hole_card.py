"""The information barrier against a lost frame: blackjack, the shoe loses the frame of the dealer's up
card and does not resend it (a version 1 shoe; any shoe after the 3 s ``RESEND_WAIT``). The frame after
the gap (box 1's second card) is set aside, and the next card -- the dealer's hole card, dealt face down
-- is placed into the up card's slot and published face up on the retained ``round`` topic, which
signage reads: the players see the hole card.

The same shift puts cards in the wrong hands in baccarat (``test_adversarial_gap_deal_on.py``). The fix
belongs in ``daemon/table/machine.py`` (queue the cards after a card carrying a gap until the supervisor
resolves it, as after an unreadable card), which another engineer is changing: xfail until then."""

from __future__ import annotations

import pytest
from machine_support import Driver, blackjack_config, card_tokens, public_payloads

from tablesense.drivers.events import Button, ShoeStatusKind


def _deal() -> Driver:
    d = Driver(blackjack_config())
    d.status(ShoeStatusKind.NEW_SHOE)
    d.bet("B1", 1000)
    d.bet("PP1", 500)
    d.button(Button.NO_MORE_BETS)
    d.card("5H")  # box 1, first card
    d.card("7C", skip=1)  # the dealer's up card's frame was lost; this is box 1's second card
    d.card("QS")  # the dealer's hole card, face down
    return d


def test_the_gap_holds_the_round() -> None:
    d = _deal()
    assert "SEQUENCE_GAP" in d.codes()
    assert d.state.held


@pytest.mark.xfail(strict=True, reason="daemon/table/machine.py places the card after a gap card into the "
                   "next slot: the hole card lands in the up card's slot and is published face up")
def test_the_hole_card_after_a_gap_never_reaches_a_public_topic() -> None:
    d = _deal()
    leaked = [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)]
    assert leaked == [], leaked[0][:200]


@pytest.mark.xfail(strict=True, reason="daemon/table/machine.py places the card after a set-aside "
                   "CARD_NOT_IN_SHOE card into its slot: the hole card is published face up")
def test_the_hole_card_after_a_misread_card_never_reaches_a_public_topic() -> None:
    """One deck: box 1's second card is misread as a card the shoe already gave (``CARD_NOT_IN_SHOE``,
    set aside, held); the hole card then takes box 1's second slot, face up, and Perfect Pairs is settled
    on it. An unreadable card instead queues the cards after it (checked below)."""
    d = Driver(blackjack_config(decks=1))
    d.status(ShoeStatusKind.NEW_SHOE)
    d.bet("B1", 1000)
    d.bet("PP1", 500)
    d.button(Button.NO_MORE_BETS)
    d.cards(["5H", "7C", "5H", "QS"])  # box 1, dealer up, box 1 (misread), hole card
    assert "CARD_NOT_IN_SHOE" in d.codes()
    leaked = [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)]
    assert leaked == [], leaked[0][:200]


def test_the_hole_card_after_an_unreadable_card_stays_private() -> None:
    d = Driver(blackjack_config())
    d.status(ShoeStatusKind.NEW_SHOE)
    d.bet("B1", 1000)
    d.bet("PP1", 500)
    d.button(Button.NO_MORE_BETS)
    d.cards(["5H", "7C"])
    d.unreadable()
    d.card("QS")
    assert not [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)]
