"""Blackjack through the pure state machine: dealing order, Perfect Pairs at each box's second card,
and the hole card kept off every public channel."""

from __future__ import annotations

import msgspec
import pytest
from machine_support import Driver, blackjack_config, card_tokens, public_payloads

from tablesense.daemon.rules.blackjack import settle_blackjack
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.settlement import Bet, Wager
from tablesense.daemon.table import Channel
from tablesense.daemon.table.machine import Phase
from tablesense.drivers.events import Button

# Boxes 1-5 first cards, dealer up, boxes second cards, hole card.
FIRST = ["QH", "7C", "2D", "9S", "5H"]
UP = "6D"
SECOND = ["QD", "7C", "3D", "9S", "KH"]
HOLE = "AS"


def _five_boxes(d: Driver) -> None:
    for n in range(1, 6):
        d.bet(f"B{n}", 1000)
        d.bet(f"PP{n}", 500)
    d.button(Button.NO_MORE_BETS)


@pytest.mark.parametrize("hole_card", [True, False])
def test_five_boxes_deal_in_order_and_perfect_pairs_settle_at_each_second_card(hole_card: bool) -> None:
    cfg = blackjack_config(hole_card=hole_card)
    d = Driver(cfg)
    _five_boxes(d)
    d.cards(FIRST)
    d.card(UP)
    assert d.settlements() == []
    for n, c in enumerate(SECOND, start=1):
        out = d.card(c)
        (s,) = d.settlements(out)
        assert s.spot == f"PP{n}" and s.seat == str(n)
    assert d.state.phase == ("dealing" if hole_card else "playing")
    if hole_card:
        d.card(HOLE)
        assert d.state.phase == "playing"
    positions = [c.position for c in d.state.cards]
    assert positions == ["1", "2", "3", "4", "5", "dealer", "1", "2", "3", "4", "5"]
    got = {s.spot: (s.outcome, s.category, s.net) for s in d.settlements()}
    hands = {str(n): [Card.parse(FIRST[n - 1]), Card.parse(SECOND[n - 1])] for n in range(1, 6)}
    wagers = [Wager(str(n), Bet.PERFECT_PAIRS, 500) for n in range(1, 6)]
    expected = {f"PP{s.wager.spot}": (s.outcome.value, s.category, s.net)
                for s in settle_blackjack(hands, wagers, cfg.rules())}
    assert got == expected
    assert got["PP1"] == ("win", "colored_pair", 6000)  # Q♥ Q♦
    assert got["PP2"] == ("win", "perfect_pair", 12500)  # 7♣ 7♣ (six decks)
    # Hits and dealer draws: recorded for the floor, never public.
    d.cards("8C 4S")
    assert len(d.state.cards) == 11
    d.button(Button.ROUND_END)
    assert d.machine.phase is Phase.COMPLETE
    (res,) = d.results()
    assert res.dealer == (UP,)
    pairs = ["colored_pair", "perfect_pair", "no_pair", "perfect_pair", "no_pair"]
    assert [b.pair for b in res.boxes] == pairs
    (floor,) = d.floor()
    dealt = [(c.card, c.position) for c in floor.cards]
    assert dealt[-2:] == [("8C", "play"), ("4S", "play")]
    if hole_card:
        assert (HOLE, "dealer") in dealt and floor.dealer == (UP, HOLE)
        assert not next(c for c in floor.cards if c.card == HOLE).face_up


def test_the_hole_card_never_appears_on_a_public_channel() -> None:
    d = Driver(blackjack_config(hole_card=True))
    for _ in range(3):
        _five_boxes(d)
        d.cards(FIRST)
        d.card(UP)
        d.cards(SECOND)
        d.card(HOLE)
        d.cards("8C 2S")
        d.button(Button.ROUND_END)
    leaked = [p for p in public_payloads(d.emits) if HOLE in card_tokens(p) or "2S" in card_tokens(p)]
    assert leaked == []
    floor = [e for e in d.emits if e.channel is Channel.FLOOR_ROUNDS]
    assert len(floor) == 3 and all(HOLE in card_tokens(msgspec.json.encode(e.message)) for e in floor)


def test_perfect_pairs_without_a_blackjack_wager_is_flagged_and_returned() -> None:
    d = Driver(blackjack_config())
    d.bet("B1", 1000)
    d.bet("PP1", 500)
    out = d.bet("PP3", 500)  # box 3 holds no blackjack wager
    assert d.alarms(out) == []
    out = d.button(Button.NO_MORE_BETS)
    (a,) = d.alarms(out)
    assert (a.code, a.seat, a.spot) == ("PP_WITHOUT_BLACKJACK", "3", "PP3")
    (s,) = d.settlements(out)
    assert (s.spot, s.outcome, s.category, s.net) == ("PP3", "push", "ineligible_no_blackjack_wager", 0)
    d.cards("QH 6D QS AS")  # box 1, dealer, box 1, hole: box 3 is dealt no cards
    assert [c.position for c in d.state.cards] == ["1", "dealer", "1"]
    assert len(d.settlements()) == 2


def test_next_no_more_bets_ends_the_round_and_locks_the_next() -> None:
    d = Driver(blackjack_config())
    d.bet("B1", 1000)
    d.bet("PP1", 500)
    d.button(Button.NO_MORE_BETS)
    d.cards("QH 6D QS AS 5C")
    out = d.button(Button.NO_MORE_BETS)
    assert [r.round for r in d.results()] == [1]
    assert d.state.round == 2 and d.state.phase == "dealing"
    assert len(d.messages(Channel.FLOOR_ROUNDS, out)) == 1


def test_round_end_before_the_initial_deal_is_ignored_with_an_info_alarm() -> None:
    d = Driver(blackjack_config())
    d.bet("B1", 1000)
    d.button(Button.NO_MORE_BETS)
    d.card("QH")
    out = d.button(Button.ROUND_END)
    assert d.codes(out) == ["UNEXPECTED_BUTTON"]
    assert d.state.phase == "dealing"


def test_unreadable_hole_card_holds_but_never_shows() -> None:
    d = Driver(blackjack_config())
    d.bet("B1", 1000)
    d.bet("PP1", 500)
    d.button(Button.NO_MORE_BETS)
    d.cards("QH 6D QS")
    d.unreadable()
    assert d.state.held
    d.button(Button.ROUND_END)
    assert d.results() == []  # a held round does not complete
    assert d.command("enter_card", card=HOLE).ok
    assert len(d.results()) == 1
    assert all(HOLE not in card_tokens(p) for p in public_payloads(d.emits))
