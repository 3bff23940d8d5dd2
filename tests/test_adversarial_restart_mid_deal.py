"""Mid-deal, two more ways the deal can lose its place: the shoe restarts (a new session: the frames it
had not had acknowledged are gone, and they may have been cards), or the daemon rejects a card frame
(``INPUT_REJECTED``: the frame is journaled, nothing of it applied). Either way the next card must not
take the lost card's place: the cards after it wait, privately, until the supervisor enters what is
missing (``enter_card``) and acknowledges the alarm, exactly as after a sequence gap
(docs/state-machine.md, "Holds"). Before, blackjack's hole card went into the up card's place, face up
on the round topic signage reads."""

from __future__ import annotations

from machine_support import SHOE, Driver, blackjack_config, card_tokens, public_payloads

from tablesense.daemon.table.inputs import RejectedInput
from tablesense.drivers.events import Button, DeviceIdentity, ShoeStatusKind


def _identity(d: Driver, session: str, seq: int) -> None:
    d._seq[SHOE] = seq
    d.feed(DeviceIdentity(SHOE, seq, "acme", "CS-8", "2.4.1", "SN12345", session))


def _locked() -> Driver:
    d = Driver(blackjack_config())
    _identity(d, "a", 1)
    d.status(ShoeStatusKind.NEW_SHOE)
    d.bet("B1", 1000)
    d.bet("PP1", 500)
    d.button(Button.NO_MORE_BETS)
    return d


def _slots(d: Driver) -> list[tuple[str, str]]:
    return [(position, card) for _, position, card in d.machine.snapshot()["slots"] if card]


def test_a_shoe_restart_mid_deal_stops_the_deal_until_the_supervisor_resolves_it() -> None:
    d = _locked()
    d.card("5H")  # box 1
    # the up card (9D) left the shoe, its frame unacknowledged; the shoe restarts and forgets it
    _identity(d, "b", 0)
    (restart,) = [a for a in d.alarms() if a.code == "DEVICE_RESTARTED"]
    d.cards(["7C", "QS"])  # box 1's second card, the hole card
    assert d.public_cards() == ["5H"]
    assert [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)] == []
    assert d.command("enter_card", card="9D", shoe="1", round="1").ok
    assert d.command("ack_alarm", alarm_id=restart.alarm_id).ok
    assert _slots(d) == [("1", "5H"), ("dealer", "9D"), ("1", "7C"), ("dealer", "QS")]
    assert [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)] == []


def test_a_restart_that_lost_nothing_is_acknowledged_and_the_deal_goes_on() -> None:
    d = _locked()
    d.card("5H")
    _identity(d, "b", 0)
    (restart,) = [a for a in d.alarms() if a.code == "DEVICE_RESTARTED"]
    d.cards(["9D", "7C"])
    assert d.command("ack_alarm", alarm_id=restart.alarm_id).ok
    assert _slots(d) == [("1", "5H"), ("dealer", "9D"), ("1", "7C")]


def test_a_rejected_card_frame_mid_deal_stops_the_deal() -> None:
    d = _locked()
    d.card("5H")
    seq = d.seq(SHOE)  # the up card's frame: its application raised, journaled as rejected
    d.feed(RejectedInput(kind="CardDrawn", payload='{"card":"9D"}', error="KeyError: x", device=SHOE,
                         seq=seq))
    (rejected,) = [a for a in d.alarms() if a.code == "INPUT_REJECTED"]
    d.cards(["7C", "QS"])
    assert d.public_cards() == ["5H"]
    assert [p for p in public_payloads(d.emits) if "QS" in card_tokens(p)] == []
    assert d.command("enter_card", card="9D", shoe="1", round="1").ok
    assert d.command("ack_alarm", alarm_id=rejected.alarm_id).ok
    assert _slots(d) == [("1", "5H"), ("dealer", "9D"), ("1", "7C"), ("dealer", "QS")]
