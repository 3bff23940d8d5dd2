"""UTH through the pure state machine: configured deal orders, nothing public before the reveal,
Ultimate Pairs settled at the reveal (paytable F uses the dealer's cards)."""

from __future__ import annotations

import msgspec
import pytest
from machine_support import Driver, card_tokens, public_payloads, uth_config

from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.settlement import Bet, Wager
from tablesense.daemon.rules.uth import settle_uth
from tablesense.daemon.table import Channel
from tablesense.daemon.table.machine import Phase
from tablesense.daemon.table.uth_deal import deal_sequence
from tablesense.drivers.events import Button

HANDS = {"1": ["AH", "AD"], "2": ["KS", "QS"], "3": ["7C", "7D"], "dealer": ["AC", "AS"]}
BOARD = ["2H", "5S", "9D", "JC", "3S"]


def _deal_cards(order: list[str]) -> list[str]:
    """The cards in draw order for a position sequence (hands and board from HANDS/BOARD)."""
    taken = {p: list(cs) for p, cs in HANDS.items()} | {"board": list(BOARD), "burn": ["4C", "4D"]}
    return [taken[p].pop(0) for p in order]


@pytest.mark.parametrize(("deal", "board", "burns"), [("card_by_card", "after", 0), ("stacks", "before", 1)])
def test_deal_orders_and_nothing_public_before_the_reveal(deal: str, board: str, burns: int) -> None:
    cfg = uth_config(deal=deal, board=board, burns=burns)
    d = Driver(cfg)
    for n in range(1, 4):
        d.bet(f"A{n}", 1000)
        d.bet(f"U{n}", 500)
    d.button(Button.NO_MORE_BETS)
    order = [p for p, _ in deal_sequence(cfg, ["1", "2", "3"])]
    if deal == "stacks":
        assert order[burns + 4:][:4] == ["board", "1", "1", "2"]
    else:
        assert order[:5] == ["1", "2", "3", "dealer", "1"]
    d.cards(_deal_cards(order))
    assert d.state.phase == "reveal"
    before = list(d.emits)
    assert d.settlements() == [] and d.results() == [] and d.state.cards == ()
    all_cards = {str(Card.parse(c)) for cs in HANDS.values() for c in cs} | set(BOARD)
    assert all(not (card_tokens(p) & all_cards) for p in public_payloads(before))
    out = d.button(Button.ROUND_END)
    assert d.machine.phase is Phase.COMPLETE
    got = {s.spot: (s.outcome, s.category, s.odds, s.net) for s in d.settlements(out)}
    hands = {p: [Card.parse(c) for c in cs] for p, cs in HANDS.items()}
    wagers = [Wager(str(n), Bet.ULTIMATE_PAIRS, 500) for n in range(1, 4)]
    expected = {f"U{s.wager.spot}": (s.outcome.value, s.category, str(s.odds) if s.odds else None, s.net)
                for s in settle_uth(hands, wagers, cfg.rules())}
    assert got == expected
    assert got["U1"][1:3] == ("aces_with_dealer_aces", "1000 to 1")
    (res,) = d.results()
    assert res.dealer == ("AC", "AS") and res.board == tuple(BOARD)
    first = res.boxes[0]
    assert (first.position, first.cards, first.pair) == ("1", ("AH", "AD"), "aces_with_dealer_aces")
    assert len(d.state.cards) == 3 * 2 + 2 + 5  # everything but burns is public after the reveal
    (floor,) = d.floor()
    assert [c.status for c in floor.cards].count("burned") == burns


def test_extra_card_after_the_deal_and_early_reveal() -> None:
    d = Driver(uth_config())
    d.bet("A1", 1000)
    d.bet("U1", 500)
    d.button(Button.NO_MORE_BETS)
    d.cards("AH KH")
    out = d.button(Button.ROUND_END)
    assert d.codes(out) == ["UNEXPECTED_BUTTON"]
    d.cards("AD KD")  # seat 1 and dealer second cards
    d.cards(BOARD)
    out = d.card("2C")
    assert d.codes(out) == ["EXTRA_CARD"] and d.state.held
    d.button(Button.ROUND_END)  # the reveal happens, but a held round settles nothing
    assert d.settlements() == []
    alarm = next(a for a in d.alarms() if a.code == "EXTRA_CARD")
    assert d.command("ack_alarm", alarm=alarm.alarm_id).ok
    (s,) = d.settlements()
    assert s.category == "aces"


def test_ultimate_pairs_without_ante_is_returned_at_once_and_its_seat_gets_no_cards() -> None:
    d = Driver(uth_config(paytable="A"))
    d.bet("A1", 1000)
    d.bet("U2", 500)
    out = d.button(Button.NO_MORE_BETS)
    (s,) = d.settlements(out)
    assert (s.spot, s.outcome, s.category) == ("U2", "push", "ineligible_no_ante_wager")
    d.cards("AH AC AD AS")
    d.cards(BOARD)
    assert d.state.phase == "reveal"


def test_uth_floor_record_has_every_card_only_once_complete() -> None:
    d = Driver(uth_config())
    d.bet("A1", 1000)
    d.bet("U1", 500)
    d.button(Button.NO_MORE_BETS)
    d.cards("AH KH AD KD")
    d.cards(BOARD)
    assert d.messages(Channel.FLOOR_ROUNDS) == []
    d.button(Button.ROUND_END)
    (floor,) = d.floor()
    assert [c.card for c in floor.cards] == ["AH", "KH", "AD", "KD", *BOARD]
    assert floor.dealer == ("KH", "KD")
    assert msgspec.json.decode(msgspec.json.encode(floor))["schema"] == "tablesense.floor_round"


def test_a_burn_frame_from_the_shoe_fills_the_configured_burn_before_the_board() -> None:
    from tablesense.drivers.events import ShoeStatusKind

    d = Driver(uth_config(burns=1))
    d.bet("A1", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("AH KH AD KD")
    d.status(ShoeStatusKind.BURN, "4C")
    d.cards(BOARD)
    assert d.state.phase == "reveal" and d.codes() == []
    d.button(Button.ROUND_END)
    (floor,) = d.floor()
    assert [(c.card, c.status) for c in floor.cards][4] == ("4C", "burned")
    assert "4C" not in d.public_cards()
