"""Baccarat rounds through the pure state machine: dealing order, settlement moments, the round record."""

from __future__ import annotations

from machine_support import Driver, baccarat_config

from tablesense.daemon.rules.baccarat import settle_baccarat
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.settlement import Bet, Hand, Wager
from tablesense.daemon.table import Channel
from tablesense.daemon.table.machine import Phase
from tablesense.drivers.events import Button


def _bets(d: Driver) -> None:
    d.bet("1P", 2000)
    d.bet("1B", 1000)
    d.bet("1T", 500)
    d.bet("1PP", 1000)
    d.bet("1BP", 1000)
    d.bet("1HM", 1000)


def test_natural_round_settles_every_wager_as_the_rules_core_does() -> None:
    cfg = baccarat_config()
    d = Driver(cfg)
    _bets(d)
    d.button(Button.NO_MORE_BETS)
    assert d.state.phase == "dealing"
    d.cards("9H 3D KS KC")  # Player 9 natural, Banker 3: no third card
    assert d.machine.phase is Phase.COMPLETE
    got = {s.spot: (s.outcome, s.category, s.odds, s.net, s.commission) for s in d.settlements()}
    cards = [Card.parse(c) for c in ["9H", "3D", "KS", "KC"]]
    wagers = [Wager("1P", Bet.PLAYER, 2000), Wager("1B", Bet.BANKER, 1000), Wager("1T", Bet.TIE, 500),
              Wager("1PP", Bet.PERFECT_PAIRS, 1000, Hand.PLAYER),
              Wager("1BP", Bet.PERFECT_PAIRS, 1000, Hand.BANKER), Wager("1HM", Bet.HOUSE_MONEY, 1000)]
    expected = {s.wager.spot: (s.outcome.value, s.category, str(s.odds) if s.odds else None, s.net,
                               s.commission) for s in settle_baccarat(cards, wagers, cfg.rules())}
    assert got == expected
    assert got["1P"][0] == "win" and got["1P"][3] == 2000
    (res,) = d.results()
    assert res.baccarat is not None
    assert (res.baccarat.player, res.baccarat.banker) == (("9H", "KS"), ("3D", "KC"))
    b = res.baccarat
    assert (b.winner, b.player_natural, b.player_total) == ("player", True, 9)
    (floor,) = d.floor()
    assert [c.card for c in floor.cards] == ["9H", "3D", "KS", "KC"]
    assert [c.position for c in floor.cards] == ["player", "banker", "player", "banker"]
    assert len(floor.wagers) == 6 and len(floor.settlements) == 6
    assert floor.locked_ts is not None and floor.completed_ts is not None


def test_third_cards_follow_the_tableau_and_banker_win_pays_less_commission() -> None:
    d = Driver(baccarat_config())
    d.bet("1B", 1000)
    d.button(Button.NO_MORE_BETS)
    # Player 0+2=2 draws (5th card, a 2); Banker 4+0=4 draws on a Player third card of 2 (6th card).
    d.cards("QH 4D 2S KC 2H")
    assert d.machine.phase is Phase.DEALING
    assert [c.position for c in d.state.cards] == ["player", "banker", "player", "banker", "player"]
    d.card("3C")
    assert d.machine.phase is Phase.COMPLETE
    (s,) = d.settlements()
    # Player 2+2 = 4, Banker 4+3 = 7: Banker wins 1000, commission 5 % = 50.
    assert (s.outcome, s.net, s.commission, s.odds) == ("win", 950, 50, "1 to 1")
    (res,) = d.results()
    assert res.baccarat is not None and res.baccarat.banker_total == 7 and res.baccarat.winner == "banker"


def test_pairs_and_house_money_settle_on_card_four_before_any_third_card() -> None:
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.bet("1PP", 1000)
    d.bet("1BP", 500)
    d.bet("1HM", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("5H 2C 5D")
    assert d.settlements() == []
    at_four = d.card("3C")  # Player 5H 5D: a coloured pair (both red); Banker 2C 3C: 5
    settled = {s.spot: s for s in d.settlements(at_four)}
    assert set(settled) == {"1PP", "1BP", "1HM"}
    pp = settled["1PP"]
    assert (pp.category, pp.odds, pp.net) == ("colored_pair", "12 to 1", 12000)
    assert settled["1BP"].outcome == "lose" and settled["1BP"].net == -500
    assert (settled["1HM"].category, settled["1HM"].net) == ("one_pair", 3000)
    # The settlements come before the round state that shows card 4, and before any third card exists.
    channels = [e.channel for e in at_four]
    assert channels.index(Channel.SETTLEMENTS) < channels.index(Channel.ROUND)
    assert len(d.state.cards) == 4
    assert d.machine.phase is Phase.DEALING
    d.card("9S")  # Player 0 draws a 9; Banker 5 stands on a Player third card of 9
    assert {s.spot for s in d.settlements()} == {"1PP", "1BP", "1HM", "1P"}
    assert sum(1 for s in d.settlements() if s.spot == "1PP") == 1


def test_a_card_after_the_round_is_complete_is_an_extra_card_when_rounds_start_on_the_button() -> None:
    d = Driver(baccarat_config(start="button"))
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("9H 3D KS KC")
    assert d.machine.phase is Phase.COMPLETE
    out = d.card("4S")
    assert d.codes(out) == ["EXTRA_CARD"]
    assert d.state.held and d.state.hold_codes == ("EXTRA_CARD",)
    assert "4S" not in d.public_cards()
    # The next round opens held: it settles nothing until a supervisor acknowledges.
    d.button(Button.NO_MORE_BETS)
    d.cards("9C 3H KD KH")
    assert d.machine.phase is Phase.PLAYING or d.machine.phase is Phase.DEALING
    assert len(d.settlements()) == 1
    alarm = next(a for a in d.alarms() if a.code == "EXTRA_CARD")
    assert d.command("ack_alarm", alarm=alarm.alarm_id).ok
    assert len(d.settlements()) == 2 and d.machine.phase is Phase.COMPLETE
    floor = d.floor()[-1]
    stray = [c for c in floor.cards if c.status == "set_aside"]
    assert [(c.card, c.position) for c in stray] == [("4S", None)]
    assert [c.card for c in floor.cards if c.status == "dealt"] == ["9C", "3H", "KD", "KH"]


def test_a_card_after_the_round_starts_the_next_round_when_rounds_start_on_the_card() -> None:
    d = Driver(baccarat_config(start="card"))
    d.bet("1P", 1000)
    d.cards("9H 3D KS KC")  # the first card locks the round (no button)
    assert len(d.settlements()) == 1
    d.remove("1P")  # the dealer collects the losing Player bet: the table is cleared
    d.card("4S")
    assert d.state.round == 2 and d.state.phase == "dealing" and d.codes() == []
    assert d.public_cards() == ["4S"]


def test_in_card_mode_a_fifth_card_after_a_natural_starts_the_next_round() -> None:
    d = Driver(baccarat_config(start="card"))
    d.cards("9H 3D KS KC")
    d.cards("2C 2D 3S 3H")
    assert [f.round for f in d.floor()] == [1]
    assert d.state.round == 2


def test_void_button_returns_every_unsettled_wager_and_marks_the_round_void() -> None:
    d = Driver(baccarat_config())
    _bets(d)
    d.button(Button.NO_MORE_BETS)
    d.cards("5H 2C 5D 3C")  # two-card wagers settle here; the Player draws next
    early = {s.spot for s in d.settlements()}
    assert early == {"1PP", "1BP", "1HM"}
    d.button(Button.VOID_ROUND)
    voided = [s for s in d.settlements() if s.outcome == "void"]
    assert {s.spot for s in voided} == {"1P", "1B", "1T"}
    assert all(s.net == 0 and s.category == "void_round" for s in voided)
    (res,) = d.results()
    assert res.void and res.baccarat is None
    (floor,) = d.floor()
    assert floor.void and "ROUND_VOID" in [a.code for a in floor.alarms]
    # A settled round cannot be voided again, nor have a card entered.
    reply = d.command("void_round")
    assert not reply.ok and "already settled" in reply.reason
    assert not d.command("enter_card", card="QS").ok


def test_ez_baccarat_banker_pushes_on_a_dragon_7_and_takes_no_commission() -> None:
    d = Driver(baccarat_config(game="ez-baccarat"))
    d.bet("1B", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("QH 4D 2S KC 2H 3C")  # Banker wins with a three-card 7: Dragon 7
    (s,) = d.settlements()
    assert (s.outcome, s.category, s.net) == ("push", "dragon_7", 0)
    (res,) = d.results()
    assert res.baccarat is not None and res.baccarat.dragon_7
    d.bet("1B", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("2C 7D 4S KH")  # Player 6 stands, Banker 7 stands: a two-card Banker 7 win
    last = d.settlements()[-1]
    assert (last.outcome, last.net, last.commission) == ("win", 1000, 0)


def test_wager_limit_alarm_before_the_deal_names_seat_and_spot() -> None:
    d = Driver(baccarat_config())
    out = d.bet("1PP", 9000)  # perfect_pairs max 5000
    (a,) = d.alarms(out)
    assert (a.code, a.seat, a.spot, a.severity) == ("WAGER_LIMIT", "1", "1PP", "warning")
    d.button(Button.NO_MORE_BETS)
    assert d.codes().count("WAGER_LIMIT") == 1  # not raised twice for the same stake


def test_presence_only_spot_uses_its_nominal_stake() -> None:
    d = Driver(baccarat_config())
    d.bet("2PP", None)
    d.button(Button.NO_MORE_BETS)
    d.cards("5H 2C 5D 7C")
    (s,) = d.settlements()
    assert (s.spot, s.stake, s.net) == ("2PP", 500, 6000)
    (w,) = d.machine.snapshot()["record"]["wagers"]
    assert w["presence_only"] is True
