"""The shoe's count of an unreadable card when the supervisor does not enter it (docs/state-machine.md,
"Holds"): an unreadable card left the shoe, so it is counted out once, whatever the supervisor does. It
is counted out as unknown when it comes out (``remaining`` one lower, the composition unchanged: its
value is not known), and moved into the composition only when a supervisor enters its value. Checked
against the cards physically drawn for each way the procedure can go: the value entered, the round
voided instead, the alarm acknowledged instead (refused for ``CARD_UNREADABLE``; for an unreadable card
that carried a sequence gap the acknowledgement leaves it out of every hand, still counted out), and a
second unreadable card while the first waits.

An unreadable card carrying a gap whose ``SEQUENCE_GAP`` was acknowledged without an entry stays out:
before the fix a card the supervisor entered later in the same round (for another lost frame) was taken
as it, the shoe counted the unreadable card back in (one card too many remaining) and the floor record
called it ``re_entered``."""

from __future__ import annotations

from machine_support import SHOE, Driver, baccarat_config, blackjack_locked

from tablesense.daemon.rules.cards import Card, ShoeComposition
from tablesense.drivers.events import Button

R = {"shoe": "1", "round": "1"}
DECKS = 8


def _locked() -> Driver:
    d = Driver(baccarat_config(decks=DECKS))
    d.bet("1P", 1000)
    d.bet("1PP", 500)
    d.button(Button.NO_MORE_BETS)
    return d


def _counts_after(known: list[str]) -> list[int]:
    """The composition's per-card counts after the cards ``known`` came out (unknown cards never do)."""
    shoe = ShoeComposition(DECKS)
    for text in known:
        shoe.take(Card.parse(text))
    return [n for _, n in shoe.counts()]


def _check_shoe(d: Driver, drawn: int, known: list[str]) -> None:
    """The shoe counts ``drawn`` cards out (the public state says so too) and its composition lacks
    exactly the ``known`` ones."""
    snap = d.machine.snapshot()
    assert snap["remaining"] == 52 * DECKS - drawn
    assert d.state.cards_remaining == 52 * DECKS - drawn
    assert snap["counts"] == _counts_after(known)


def _alarm(d: Driver, code: str) -> str:
    return [a.alarm_id for a in d.alarms() if a.code == code and a.state == "raised"][-1]


def test_an_unreadable_card_entered_moves_from_unknown_into_the_composition() -> None:
    d = _locked()
    d.card("5H")
    d.unreadable()
    d.card("3C")  # queued behind it
    _check_shoe(d, drawn=3, known=["5H", "3C"])
    assert d.command("enter_card", card="2D", **R).ok
    _check_shoe(d, drawn=3, known=["5H", "3C", "2D"])


def test_an_unreadable_card_stays_counted_out_when_the_round_is_voided() -> None:
    d = _locked()
    d.card("5H")
    d.unreadable()
    d.card("3C")
    assert d.command("void_round", reason="card damaged", **R).ok
    _check_shoe(d, drawn=3, known=["5H", "3C"])
    (floor,) = d.floor()
    assert [(c.card, c.status) for c in floor.cards] == [("5H", "dealt"), (None, "unreadable"),
                                                         ("3C", "queued")]
    d.button(Button.ROUND_END)
    d.bet("1P", 1000)
    d.cards("9H 3D KS KC")  # the next round: the shoe goes on from the right count
    _check_shoe(d, drawn=7, known=["5H", "3C", "9H", "3D", "KS", "KC"])


def test_an_unreadable_card_cannot_be_acknowledged_away() -> None:
    d = _locked()
    d.card("5H")
    d.unreadable()
    reply = d.command("ack_alarm", alarm_id=_alarm(d, "CARD_UNREADABLE"))
    assert not reply.ok and "enter_card" in reply.reason
    assert d.state.held
    _check_shoe(d, drawn=2, known=["5H"])


def test_a_second_unreadable_card_is_counted_and_raised_on_its_own() -> None:
    d = _locked()
    d.card("5H")
    d.unreadable()  # card 2
    d.unreadable()  # card 3: queued behind card 2, counted out at once
    d.card("3C")
    _check_shoe(d, drawn=4, known=["5H", "3C"])
    (first,) = [a for a in d.alarms() if a.code == "CARD_UNREADABLE"]
    assert (first.text.split()[1], first.count) == ("2", 1)
    assert d.command("enter_card", card="2D", **R).ok
    _check_shoe(d, drawn=4, known=["5H", "3C", "2D"])
    second = [a for a in d.alarms() if a.code == "CARD_UNREADABLE" and a.state == "raised"][-1]
    assert second.alarm_id != first.alarm_id and (second.text.split()[1], second.count) == ("3", 1)
    assert d.state.held
    assert d.command("enter_card", card="4D", **R).ok
    _check_shoe(d, drawn=4, known=["5H", "3C", "2D", "4D"])
    assert d.public_cards() == ["5H", "2D", "4D", "3C"] and d.state.phase == "complete"


def test_two_unreadable_cards_stay_counted_out_when_the_round_is_voided() -> None:
    d = _locked()
    d.card("5H")
    d.unreadable()
    d.unreadable()
    assert d.command("void_round", **R).ok
    _check_shoe(d, drawn=3, known=["5H"])


def test_an_unreadable_card_acknowledged_out_is_not_taken_by_a_later_entry() -> None:
    """The Banker's first card's frame is lost and not resent; the frame after it is an unreadable card,
    which carries the gap (set aside). The supervisor judges the lost frame no card and acknowledges
    without entering: the unreadable card stays out of every hand, counted out. Later in the same deal
    a second frame is lost (8S) and the card after it (4D) carries that gap: the supervisor enters the
    lost 8S and the set-aside 4D and acknowledges. Physically five cards left the shoe: 5H, the
    unreadable card, 3C, 8S, 4D. Before the fix 8S was taken as the acknowledged unreadable card: the
    shoe counted four out and the floor record called the unreadable card ``re_entered``."""
    d = _locked()
    d.card("5H")
    d.seq(SHOE)  # a frame lost
    d.unreadable()  # carries the gap: set aside
    assert d.command("ack_alarm", alarm_id=_alarm(d, "SEQUENCE_GAP")).ok  # judged no card: it stays out
    _check_shoe(d, drawn=2, known=["5H"])
    d.card("3C")
    d.card("4D", skip=1)  # 8S's frame lost; 4D carries the gap
    assert d.command("enter_card", card="8S", **R).ok
    assert d.command("enter_card", card="4D", **R).ok
    assert d.command("ack_alarm", alarm_id=_alarm(d, "SEQUENCE_GAP")).ok
    _check_shoe(d, drawn=5, known=["5H", "3C", "8S", "4D"])
    d.card("KD")  # the Player's third card completes the coup
    (floor,) = d.floor()
    assert [(c.card, c.status) for c in floor.cards[:2]] == [("5H", "dealt"), (None, "set_aside")]
    _check_shoe(d, drawn=6, known=["5H", "3C", "8S", "4D", "KD"])


def test_the_command_that_completes_a_round_is_in_its_published_floor_record() -> None:
    """Blackjack: the hole card unreadable; the dealer ends the round; the supervisor's ``enter_card``
    places the hole card and so completes the round. The floor record published at that moment names the
    command (who, what, when): the evidence of a supervisor's hand in the round. Before, the command was
    added to the round's record only after the record had been published (the published floor record had
    ``commands == []``; only a voided round's ``void_round`` was in it)."""
    d = blackjack_locked()
    d.cards(["5H", "7C", "5D"])
    d.unreadable()  # the hole card
    d.button(Button.ROUND_END)
    assert d.command("enter_card", card="QS", shoe="1", round="1").ok
    (record,) = d.floor()
    assert [(c.name, c.args.get("card"), c.operator, c.ok) for c in record.commands] == [
        ("enter_card", "QS", "supervisor-7", True)]
    assert len(d.machine.snapshot()["record"]["commands"]) == 1  # recorded once
