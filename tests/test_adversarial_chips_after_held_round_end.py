"""Chips moved after the dealer has ended a held round (docs/state-machine.md, "Holds"): the round-end
button waits in its place behind a held card, or applied on a round a hold keeps from completing, or a
baccarat coup has its last card but is held. The dealer pays, collects and the players bet on the next
coup: changes after the round, which clear the table, not past-posts on it. They wait until the round is
resolved and are applied then, after it.

Before the fix they were raised as ``PAST_POSTING`` on the held round (critical alarms, the payouts
recorded as changes after its lock); in baccarat the coup, once resolved, was taken as not cleared, so the
next coup's first cards became ``EXTRA_CARD`` and that coup was never locked nor settled."""

from __future__ import annotations

from typing import Any

from machine_support import SHOE, Driver, baccarat_config, card_tokens, public_payloads
from machine_support import blackjack_locked as _locked

from tablesense.daemon.table import replay
from tablesense.drivers.events import Button, SpotChanged, SpotState

R1 = {"shoe": "1", "round": "1"}


def _pay_and_bet(d: Driver) -> None:
    """Box 1's chips collected, then the next coup's bets."""
    d.remove("B1")
    d.remove("PP1")
    d.bet("B1", 2000)
    d.bet("PP1", 1000)


def _raised(d: Driver, *codes: str) -> list[tuple[Any, ...]]:
    return [(a.round, a.code, a.spot) for a in d.alarms() if a.state == "raised" and a.code in codes]


def _replays_alike(d: Driver) -> None:
    again, _ = replay(d.config, d.inputs)
    assert again.snapshot() == d.machine.snapshot()


def test_chips_moved_after_a_round_end_waiting_behind_an_unreadable_hole_card_are_no_past_posting() -> None:
    """The hole card unreadable, a hit queued behind it, round-end; the dealer collects and the players
    bet the next coup; no-more-bets; the next coup dealt; the supervisor enters the hole card. Before
    the fix the four chip changes were four PAST_POSTING alarms on round 1."""
    d = _locked()
    d.cards(["5H", "7C", "5D"])
    d.unreadable()
    d.card("8S")
    d.button(Button.ROUND_END)
    _pay_and_bet(d)
    d.button(Button.NO_MORE_BETS)
    d.cards(["9H", "2C", "9D", "KS"])
    assert _raised(d, "PAST_POSTING") == []
    assert d.command("enter_card", card="QS", **R1).ok
    assert _raised(d, "PAST_POSTING", "PRESENCE_CHANGED_AFTER_LOCK", "EXTRA_CARD", "UNEXPECTED_BUTTON") == []
    (first,) = d.floor()
    assert [(c.spot, c.amount) for c in first.spot_changes] == [("B1", 1000), ("PP1", 500)]  # its bets only
    record = d.machine.snapshot()["record"]
    assert [(c["spot"], c["amount"], c["after_lock"]) for c in record["spot_changes"]] == [
        ("B1", None, False), ("PP1", None, False), ("B1", 2000, False), ("PP1", 1000, False)]
    assert [(w["spot"], w["stake"]) for w in record["wagers"]] == [("B1", 2000), ("PP1", 1000)]
    assert [(s.round, s.spot, s.stake, s.net) for s in d.settlements()] == [
        (1, "PP1", 500, 6000), (2, "PP1", 1000, 12000)]
    assert [p for p in public_payloads(d.emits) if card_tokens(p) & {"QS", "8S", "KS"}] == []
    _replays_alike(d)


def test_chips_moved_after_round_end_on_a_round_a_wrong_device_frame_holds_clear_the_table() -> None:
    """The round-end applies at once (no card waits) but a wrong-device frame keeps the round from
    completing; the dealer collects; the supervisor acknowledges: round 1 completes, then the chips
    move, between the rounds."""
    d = _locked()
    d.cards(["5H", "7C", "5D", "QS"])
    d.feed(SpotChanged(SHOE, d.seq(SHOE), "B1", SpotState.PLACED, 5))  # wrong device: holds
    d.button(Button.ROUND_END)
    d.remove("B1")
    d.remove("PP1")
    assert _raised(d, "PAST_POSTING") == [] and d.machine.snapshot()["pads"]["B1"] == (True, 1000)
    alarm = next(a.alarm_id for a in d.alarms() if a.code == "WRONG_DEVICE")
    assert d.command("ack_alarm", alarm_id=alarm).ok
    assert [f.round for f in d.floor()] == [1]
    assert [(c.spot, c.after_lock) for c in d.floor()[0].spot_changes] == [("B1", False), ("PP1", False)]
    assert _raised(d, "PAST_POSTING") == [] and d.machine.snapshot()["pads"]["B1"] == (False, None)
    assert d.machine.snapshot()["cleared"]
    _replays_alike(d)


def test_baccarat_chips_after_the_last_card_of_a_held_coup_clear_it_for_the_next_coup() -> None:
    """``start = "card"``: a wrong-device frame holds the coup mid-deal; its last card comes (a natural);
    the dealer pays and collects, a player bets the next coup; the supervisor acknowledges; the next
    coup is dealt. Before the fix the chips were PAST_POSTING on coup 1, which then counted as not
    cleared: the next coup's cards were EXTRA_CARD and coup 2 never existed."""
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.cards(["4H", "3D"])
    d.feed(SpotChanged(SHOE, d.seq(SHOE), "1P", SpotState.PLACED, 5))  # wrong device: holds
    d.cards(["5C", "9C"])  # player 9: a natural, the coup is over by its cards
    d.remove("1P")  # paid and collected
    d.bet("1B", 500)  # the next coup's bet
    alarm = next(a.alarm_id for a in d.alarms() if a.code == "WRONG_DEVICE")
    assert d.command("ack_alarm", alarm_id=alarm).ok
    d.cards(["2H", "3S", "6D", "5H"])  # a natural tie
    assert _raised(d, "PAST_POSTING", "EXTRA_CARD") == []
    _, second = d.floor()
    assert [c.card for c in second.cards] == ["2H", "3S", "6D", "5H"]
    assert [(w.spot, w.stake) for w in second.wagers] == [("1B", 500)]
    assert [(s.round, s.spot, s.outcome) for s in d.settlements()] == [(1, "1P", "win"), (2, "1B", "push")]
    _replays_alike(d)


def test_chips_after_a_round_end_that_does_not_apply_in_its_turn_are_past_posting_then() -> None:
    """The round-end waits behind a set-aside card; the supervisor acknowledges the gap without
    entering: the deal is short, the button does not apply in its turn, and the chips moved after it
    were moved during the round: PAST_POSTING, raised then, in order after the UNEXPECTED_BUTTON."""
    d = _locked()
    d.card("5H")
    d.card("7C", skip=1)  # set aside
    d.card("QS")  # queued
    d.button(Button.ROUND_END)
    d.remove("PP1")
    assert _raised(d, "PAST_POSTING") == []
    gap = next(a.alarm_id for a in d.alarms() if a.code == "SEQUENCE_GAP")
    assert d.command("ack_alarm", alarm_id=gap).ok
    assert _raised(d, "UNEXPECTED_BUTTON", "PAST_POSTING") == [
        (1, "UNEXPECTED_BUTTON", None), (1, "PAST_POSTING", "PP1")]
    assert d.machine.phase.value == "dealing"
    _replays_alike(d)
