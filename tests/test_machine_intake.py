"""Trustworthy card intake through the pure state machine: each defect of the intake review, kept fixed.

* a shoe repeating a card cannot wedge the machine (coalesced, bounded alarms);
* a device restart is told from a resend by its session, and a resend by its content;
* a card re-read after a link loss mid-round holds the round until a supervisor decides (``rescan``);
* a mis-pulled card is caught by the default ``[round] start = "card"``;
* the shoe ends when its inventory reaches zero, not one card too late;
* a stalled deal raises ``DEAL_STALLED`` from a journaled tick (the machine has no clock);
* a stake the pads sense above the money bound is never settled.
"""

from __future__ import annotations

import pytest
from machine_support import PADS, SHOE, Driver, baccarat_config

from tablesense.daemon.config import parse_config
from tablesense.daemon.rules.cards import ALL_CARDS, Card
from tablesense.daemon.rules.money import MAX_AMOUNT, max_stake
from tablesense.daemon.table import TimedInput, replay
from tablesense.daemon.table.inputs import Tick
from tablesense.daemon.table.machine import Phase
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    DealerButton,
    DeviceIdentity,
    Heartbeat,
    LinkState,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)


def same_as_replay(d: Driver) -> bool:
    return replay(d.config, d.inputs)[0].snapshot() == d.machine.snapshot()


# ------------------------------------------------------------------------------ alarms bounded (defect 1)

def test_a_shoe_repeating_one_card_300_times_never_wedges_the_machine() -> None:
    """Defect 1: from the 257th held alarm on ``TableMachine._alarm`` raised StopIteration. Now the repeats
    of one irregularity on one round are one alarm with a count, and every input is applied."""
    d = Driver(baccarat_config(decks=8))
    d.status(ShoeStatusKind.NEW_SHOE)
    for _ in range(300):
        d.card("AS")  # never raises
    raised = [a for a in d.alarms() if a.code == "CARD_NOT_IN_SHOE"]
    assert {a.alarm_id for a in raised} == {raised[0].alarm_id}  # one alarm ...
    assert [a.count for a in raised] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # its messages are bounded
    assert len(d.machine.snapshot()["alarms"]) <= 3 and d.state.held
    assert same_as_replay(d)
    # the supervisor acknowledges it: the final count goes out with the acknowledgement
    assert d.command("ack_alarm", alarm_id=raised[0].alarm_id).ok
    assert (d.alarms()[-1].state, d.alarms()[-1].count) == ("acknowledged", 292)


def test_open_alarms_stay_bounded_whatever_the_devices_do() -> None:
    d = Driver(baccarat_config(decks=1))
    for n in range(600):  # a pad flapping through spots the config does not know, and device errors
        d.feed(SpotChanged(PADS, d.seq(PADS), f"X{n % 300}", SpotState.PLACED, 100))
        d.feed(__import__("tablesense.drivers.events", fromlist=["DeviceError"]).DeviceError(
            SHOE, d.seq(SHOE), f"E{n}", "jam"))
    assert len(d.machine.snapshot()["alarms"]) <= 256
    assert same_as_replay(d)


# ------------------------------------------------------------------------------ sessions and resends (2)

def ident(d: Driver, session: str, seq: int | None = None) -> DeviceIdentity:
    return DeviceIdentity(SHOE, d.seq(SHOE) if seq is None else seq, "acme", "cs8", "2.4", "SN1", session)


def test_a_resend_is_recognised_by_number_and_content_in_the_same_session() -> None:
    d = Driver(baccarat_config())
    d.feed(ident(d, "b1"))
    card = CardDrawn(SHOE, d.seq(SHOE), Card.parse("9H"))
    d.feed(card)
    m = d.machine
    assert m.is_resend(card)
    assert not m.is_resend(CardDrawn(SHOE, card.seq, Card.parse("9D")))  # same number, other content
    assert not m.is_resend(CardDrawn(SHOE, card.seq + 1, Card.parse("9H")))


def test_a_device_restart_is_a_new_session_its_frames_are_new_and_it_raises_device_restarted() -> None:
    """Defect 2: after a power cut the shoe numbers from 0 again; its frames are not resends."""
    d = Driver(baccarat_config())
    d.feed(ident(d, "b1", 0))
    d._seq[SHOE] = 0
    d.status(ShoeStatusKind.NEW_SHOE)  # seq 1 of session b1
    for _ in range(16):
        d.feed(Heartbeat(SHOE, d.seq(SHOE)))  # ... up to 17
    old_new_shoe = next(i.event for i in d.inputs
                        if getattr(i.event, "kind", None) is ShoeStatusKind.NEW_SHOE)
    assert d.machine.is_resend(old_new_shoe)
    out = d.feed(ident(d, "b2", 0))  # power-up: new session, numbered from 0
    (a,) = d.alarms(out)
    assert (a.code, a.severity, a.held, a.device) == ("DEVICE_RESTARTED", "critical", True, SHOE)
    assert not d.machine.is_resend(old_new_shoe)  # the new session's $NS,00001 is new
    assert d.machine.session(SHOE) == "b2" and d.machine.last_seq(SHOE) == 0
    d._seq[SHOE] = 0
    out = d.status(ShoeStatusKind.NEW_SHOE)
    assert "SEQUENCE_GAP" not in d.codes(out)
    assert same_as_replay(d)


def test_the_same_session_again_is_no_restart() -> None:
    d = Driver(baccarat_config())
    d.feed(ident(d, "b1"))
    out = d.feed(ident(d, "b1"))  # in answer to a status request
    assert d.codes(out) == []


# ------------------------------------------------------------------------------ possible re-scan (defect 4)

def rescan_round(d: Driver) -> None:
    """P1 B1 P2 B2 = 2C 4H 3D 2S, the shoe link drops mid-round, and the reader reports 2S again."""
    d.bet("1P", 1000)
    d.bet("1B", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("2C 4H 3D 2S")
    d.link(SHOE, LinkState.DISCONNECTED)
    d.link(SHOE, LinkState.ONLINE)
    d.card("2S")


def test_a_card_re_read_after_a_link_loss_holds_the_round_and_set_aside_settles_the_real_deal() -> None:
    """Defect 4: 2S would have become the Player's third card (Player 7 over Banker 6)."""
    d = Driver(baccarat_config())
    rescan_round(d)
    assert "POSSIBLE_RESCAN" in d.codes() and d.state.held
    d.card("KS")  # the dealer goes on: queued behind the decision
    assert d.public_cards() == ["2C", "4H", "3D", "2S"] and not d.results()
    alarm = next(a for a in d.alarms() if a.code == "POSSIBLE_RESCAN")
    assert not d.command("ack_alarm", alarm_id=alarm.alarm_id).ok  # only rescan (or void) decides
    assert not d.command("rescan", action="maybe").ok
    assert d.command("rescan", action="set_aside", shoe="1", round="1").ok
    (res,) = d.results()
    assert (res.baccarat.winner, res.baccarat.player_total, res.baccarat.banker_total) == ("banker", 5, 6)
    floor = d.floor()[-1]
    assert [(c.card, c.status) for c in floor.cards] == [
        ("2C", "dealt"), ("4H", "dealt"), ("3D", "dealt"), ("2S", "dealt"), ("2S", "set_aside"),
        ("KS", "dealt")]
    assert d.state.cards_remaining == 416 - 5  # the re-read 2S is counted out of the shoe once
    assert floor.commands[-1].name == "rescan" and floor.commands[-1].operator == "supervisor-7"
    assert same_as_replay(d)


def test_keep_makes_the_card_the_players_third_card() -> None:
    d = Driver(baccarat_config())
    rescan_round(d)
    assert d.command("rescan", action="keep").ok
    (res,) = d.results()
    assert (res.baccarat.winner, res.baccarat.player_total, res.baccarat.banker_total) == ("player", 7, 6)
    assert d.state.cards_remaining == 416 - 5
    assert not d.command("rescan", action="keep").ok  # nothing waits any more
    assert same_as_replay(d)


def test_a_different_first_card_after_the_loss_is_no_rescan() -> None:
    d = Driver(baccarat_config())
    d.button(Button.NO_MORE_BETS)
    d.cards("2C 4H 3D 2S")
    d.link(SHOE, LinkState.DISCONNECTED)
    d.link(SHOE, LinkState.ONLINE)
    d.card("KS")
    d.card("2S")  # only the FIRST card after the loss is compared
    assert "POSSIBLE_RESCAN" not in d.codes() and len(d.results()) == 1


# ------------------------------------------------------------------------------ mis-pulled card (defect 5)

def test_the_default_config_catches_a_mis_pulled_card() -> None:
    """Defect 5: with ``start = "card"`` (the default) a card drawn after a complete round, before the
    dealer cleared it and while its wagers are still on the layout, became the next coup's first card."""
    cfg = baccarat_config(start="card")
    assert parse_config(cfg_text_without_round()).round.start == "card"  # it is the default
    d = Driver(cfg)
    d.bet("1P", 1000)
    d.cards("9H 3D KS KC")  # round 1: Player 9 wins
    out = d.card("4S")  # mis-pulled: the Player bet is not paid yet
    assert d.codes(out) == ["EXTRA_CARD"] and d.state.held and d.state.round == 1
    assert "before the table was cleared" in d.alarms(out)[0].text
    d.command("ack_alarm", alarm_id=d.alarms(out)[0].alarm_id)
    d.bet("1P", 2000)  # the dealer pays the Player bet: the table is cleared
    d.card("6D")  # the next coup's first card
    assert d.state.round == 2 and d.public_cards() == ["6D"]
    assert same_as_replay(d)


def test_in_card_mode_the_round_end_button_also_clears_the_table() -> None:
    d = Driver(baccarat_config(start="card"))
    d.bet("1P", 1000)
    d.cards("9H 3D KS KC")
    d.button(Button.ROUND_END)
    d.card("4S")
    assert d.codes() == [] and d.state.round == 2


def cfg_text_without_round() -> str:
    return """
table = "t"
game = "baccarat"
decks = 8
seats = ["1"]
[wagers.player]
[spots]
"1P" = { seat = "1", bet = "player" }
"""


# ------------------------------------------------------------------------------ end of shoe (defect 6)

def test_the_shoe_ends_when_its_inventory_reaches_zero() -> None:
    """Defect 6: an 8-deck shoe dealt to its 416th card showed 0 cards left and no end of shoe; only a
    417th card raised SHOE_EXHAUSTED. Now the 416th card, leaving a round short, raises it."""
    d = Driver(baccarat_config(decks=8))
    order = [str(c) for c in ALL_CARDS for _ in range(8)]
    for c in order[:414]:
        d.card(c)
    while d.machine.phase is not Phase.COMPLETE:
        assert d.command("void_round").ok
    d.cards(order[414:])  # cards 415 and 416: a new round that needs at least four
    assert d.state.cards_remaining == 0
    assert d.codes()[-1:] == ["SHOE_EXHAUSTED"] and d.state.held
    assert same_as_replay(d)


def test_the_last_card_completing_a_round_ends_the_shoe() -> None:
    d = Driver(baccarat_config(decks=1))
    cards = [str(c) for c in ALL_CARDS]
    # the last four cards, dealt as a round of their own: 9S KS ... one natural; put a natural last
    head, tail = cards[:48], ["9S", "KH", "KD", "KC"]
    head = [c for c in cards if c not in tail]
    for c in head:
        d.card(c)
    while d.machine.phase is not Phase.COMPLETE:
        d.command("void_round")
    d.cards(tail)  # P 9S KD, B KH KC: a natural 9, the round complete with the shoe's last card
    assert d.state.cards_remaining == 0 and d.machine.phase is Phase.SHOE_END
    assert "SHOE_EXHAUSTED" not in d.codes()


# ------------------------------------------------------------------------------ deal watchdog (defect 7)

def tick(d: Driver, ts: str) -> list[object]:
    inp = TimedInput(ts, Tick())
    d.inputs.append(inp)
    out = d.machine.handle(inp)
    d.emits += out
    return list(out)


def test_a_stalled_deal_raises_deal_stalled_from_a_journaled_tick() -> None:
    """Defect 7: two cards of a round, then only heartbeats for minutes: no alarm, no hold."""
    d = Driver(baccarat_config(extra="stall_seconds = 120"))
    d.button(Button.NO_MORE_BETS)
    d.cards("2C 4H")
    last = d.inputs[-1].ts
    due = d.machine.stall_due()
    assert due is not None and due.startswith(last[:11])
    assert tick(d, last) == [] or "DEAL_STALLED" not in d.codes()  # not yet due
    for _ in range(3):
        d.feed(Heartbeat(SHOE, d.seq(SHOE)))  # heartbeats are no deal
    out = tick(d, due)
    assert d.codes(out) == ["DEAL_STALLED"]  # type: ignore[arg-type]
    alarm = d.alarms(out)[0]  # type: ignore[arg-type]
    assert (alarm.severity, alarm.held) == ("warning", False) and not d.state.held
    assert d.machine.stall_due() is None  # once per quiet spell
    d.card("3D")
    assert d.alarms()[-1].state == "cleared" and d.alarms()[-1].alarm_id == alarm.alarm_id
    assert same_as_replay(d)


def test_the_watchdog_is_off_with_zero_and_between_rounds() -> None:
    d = Driver(baccarat_config(extra="stall_seconds = 0"))
    d.button(Button.NO_MORE_BETS)
    d.card("2C")
    assert d.machine.stall_due() is None
    d2 = Driver(baccarat_config())
    assert d2.machine.stall_due() is None  # betting: nothing is being dealt
    d2.button(Button.NO_MORE_BETS)
    assert d2.machine.stall_due() is not None  # default 300 s from the lock


# ------------------------------------------------------------------- money bound (every amount exact in JSON)

def test_a_sensed_stake_above_the_money_bound_is_ignored_naming_the_spot() -> None:
    d = Driver(baccarat_config())
    bound = max_stake([__import__("fractions").Fraction(25)])  # perfect pairs paytable A: 25 to 1
    assert bound * 25 <= MAX_AMOUNT < (bound + 1) * 25
    out = d.bet("1PP", bound + 1)
    (a,) = d.alarms(out)
    assert a.code == "WAGER_LIMIT" and a.spot == "1PP" and "ignored" in a.text
    assert "1PP" not in d.machine.snapshot()["pads"]
    d.bet("1PP", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("5H 2C 5D 3C")
    assert [(s.spot, s.stake) for s in d.settlements()] == [("1PP", 1000)]


@pytest.mark.parametrize("start", ["card", "button"])
def test_a_stray_card_in_either_mode_is_held_not_dealt(start: str) -> None:
    d = Driver(baccarat_config(start=start))
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("9H 3D KS KC")
    out = d.card("4S")
    assert d.codes(out) == ["EXTRA_CARD"] and d.state.held


# ------------------------------------------------------------------------------ device roles (breaker 3)

def test_a_card_from_the_pads_joins_no_hand_and_holds_the_round() -> None:
    """Only the shoe sends cards (docs/protocol.md §3). Before: the pads' ``$CD`` became the Banker's
    second card and the round settled on it, with no alarm."""
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("2C 4H 3D")
    out = d.feed(CardDrawn(PADS, d.seq(PADS), Card.parse("9H")))
    (a,) = d.alarms(out)
    assert (a.code, a.severity, a.held, a.device) == ("WRONG_DEVICE", "critical", True, PADS)
    assert d.public_cards() == ["2C", "4H", "3D"] and d.state.held
    assert d.state.cards_remaining == 416 - 3  # not taken from the shoe either
    d.card("2S")  # the real fourth card waits behind the hold
    assert not d.results()
    assert d.command("ack_alarm", alarm_id=a.alarm_id).ok
    assert d.public_cards() == ["2C", "4H", "3D", "2S"] and not d.state.held
    d.card("KS")  # the Player's third card (Player 5 draws): Banker 6 wins
    (res,) = d.results()
    assert (res.baccarat.winner, res.baccarat.player_total, res.baccarat.banker_total) == ("banker", 5, 6)
    assert same_as_replay(d)


def test_a_void_button_from_the_shoe_voids_nothing() -> None:
    """Only the pads send dealer buttons. Before: the shoe's ``$BT,VOID_ROUND`` voided the round."""
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("2C 4H 3D")
    out = d.feed(DealerButton(SHOE, d.seq(SHOE), Button.VOID_ROUND))
    assert d.codes(out) == ["WRONG_DEVICE"] and not d.state.void and d.state.held
    out = d.feed(SpotChanged(SHOE, d.seq(SHOE), "1P", SpotState.EMPTY, None))
    assert d.codes(out) == ["WRONG_DEVICE"]  # another event type: its own alarm
    assert "PAST_POSTING" not in d.codes()
    assert same_as_replay(d)


def test_a_card_re_read_after_a_shoe_restart_mid_round_holds_the_round() -> None:
    """A serial shoe restarts mid-round (new session, the line stays up) and reports its last card again.
    Before: only DEVICE_RESTARTED held the round; acknowledged, the card was counted twice."""
    d = Driver(baccarat_config())
    d.feed(ident(d, "b1"))
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("2C 4H 3D 2S")
    restarted = d.alarms(d.feed(ident(d, "b2", 0)))[0]
    assert restarted.code == "DEVICE_RESTARTED"
    d._seq[SHOE] = 0
    d.card("2S")
    assert "POSSIBLE_RESCAN" in d.codes() and d.public_cards() == ["2C", "4H", "3D", "2S"]
    assert d.command("ack_alarm", alarm_id=restarted.alarm_id).ok
    assert d.state.held and not d.results()  # acknowledging the restart does not deal the re-read
    assert d.command("rescan", action="set_aside").ok
    d.card("KS")
    (res,) = d.results()
    assert (res.baccarat.winner, res.baccarat.player_total, res.baccarat.banker_total) == ("banker", 5, 6)
    assert d.state.cards_remaining == 416 - 5
    assert same_as_replay(d)

