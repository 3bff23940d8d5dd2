"""Irregularities through the pure state machine: each alarm code, what the round does."""

from __future__ import annotations

from pathlib import Path

from machine_support import PADS, SHOE, Driver, baccarat_config

from tablesense.daemon.table import Channel
from tablesense.daemon.table.alarms import ALARMS, AlarmCode
from tablesense.daemon.table.machine import Phase
from tablesense.drivers.events import Button, LinkState, ShoeStatusKind


def _round(d: Driver) -> None:
    d.bet("1P", 1000)
    d.bet("1PP", 1000)
    d.button(Button.NO_MORE_BETS)


def test_a_card_the_shoe_cannot_hold_raises_an_integrity_alarm_holds_and_joins_no_hand() -> None:
    d = Driver(baccarat_config(decks=1))
    _round(d)
    d.cards("AS 2C")
    out = d.card("AS")  # a second A♠ from one deck
    (a,) = d.alarms(out)
    assert (a.code, a.severity, a.held) == ("CARD_NOT_IN_SHOE", "critical", True)
    assert "AS" not in a.text  # alarms never name a card
    assert d.public_cards() == ["AS", "2C"]
    assert d.state.held
    d.cards("5D 3C")  # the round continues to be dealt, but is held: nothing settles
    assert d.settlements() == []
    assert d.command("ack_alarm", alarm=a.alarm_id).ok
    assert {s.spot for s in d.settlements()} == {"1PP"}
    d.card("9S")
    assert d.machine.phase is Phase.COMPLETE
    floor = d.floor()[-1]
    assert [(c.card, c.status, c.position) for c in floor.cards][2] == ("AS", "set_aside", None)
    assert d.state.cards_remaining == 52 - 5


def test_unreadable_card_holds_until_a_supervisor_enters_it() -> None:
    d = Driver(baccarat_config())
    _round(d)
    d.cards("5H 2C")
    out = d.unreadable()
    assert d.codes(out) == ["CARD_UNREADABLE"]
    alarm = d.alarms(out)[0]
    d.card("3C")  # card 4: queued behind the unreadable card 3
    assert d.settlements() == [] and d.state.held
    assert d.public_cards() == ["5H", "2C"]
    refused = d.command("ack_alarm", alarm=alarm.alarm_id)
    assert not refused.ok and "enter_card" in refused.reason
    assert not d.command("enter_card", card="ZZ").ok
    assert d.command("enter_card", card="5D").ok
    assert not d.state.held
    assert d.public_cards() == ["5H", "2C", "5D", "3C"]
    (pp,) = d.settlements()
    assert (pp.spot, pp.category) == ("1PP", "colored_pair")
    d.card("9S")
    floor = d.floor()[-1]
    assert [(c.card, c.status) for c in floor.cards] == [("5H", "dealt"), ("2C", "dealt"), ("5D", "entered"),
                                                         ("3C", "dealt"), ("9S", "dealt")]
    assert floor.commands[-1].operator == "supervisor-7" and floor.commands[-1].ok


def test_unreadable_card_then_void_returns_every_wager() -> None:
    d = Driver(baccarat_config())
    _round(d)
    d.card("5H")
    d.unreadable()
    assert d.command("void_round", reason="card damaged").ok
    voided = sorted((s.spot, s.outcome, s.net) for s in d.settlements())
    assert voided == [("1P", "void", 0), ("1PP", "void", 0)]
    assert d.results()[-1].void and d.floor()[-1].void
    assert not d.state.held


def test_sequence_gap_sets_the_card_aside_and_holds_a_supervisor_can_enter_it_back() -> None:
    d = Driver(baccarat_config())
    _round(d)
    d.cards("5H 2C")
    out = d.card("5D", skip=2)  # shoe sequence 3 then 6
    (a,) = d.alarms(out)
    assert (a.code, a.held, a.device) == ("SEQUENCE_GAP", True, SHOE)
    assert d.public_cards() == ["5H", "2C"]
    remaining = d.state.cards_remaining
    assert d.command("enter_card", card="5D").ok  # the set-aside card goes where the rules put it
    assert d.state.cards_remaining == remaining  # not counted out twice
    assert d.public_cards() == ["5H", "2C", "5D"]
    d.card("3C")
    assert d.settlements() == []  # still held
    assert d.command("ack_alarm", alarm=a.alarm_id).ok
    assert [s.spot for s in d.settlements()] == ["1PP"]


def test_past_posting_alarm_names_seat_and_spot_and_settles_at_the_locked_value() -> None:
    d = Driver(baccarat_config())
    _round(d)
    d.card("9H")
    out = d.bet("1P", 50000)  # the Player bet raised after lock
    (a,) = d.alarms(out)
    assert (a.code, a.seat, a.spot, a.severity) == ("PAST_POSTING", "1", "1P", "critical")
    d.cards("3D KS KC")
    player = next(s for s in d.settlements() if s.spot == "1P")
    assert (player.stake, player.net) == (1000, 1000)
    floor = d.floor()[-1]
    # the past-posting mark is in the floor record only, never on the public settlement (signage)
    assert [s.changed_after_lock for s in floor.settlements if s.spot == "1P"] == [True]
    after = [c for c in floor.spot_changes if c.after_lock]
    assert [(c.spot, c.amount) for c in after] == [("1P", 50000)]


def test_past_posting_alarm_text_says_empty_for_chips_taken_off_not_none() -> None:
    d = Driver(baccarat_config())
    _round(d)
    d.card("9H")
    (a,) = d.alarms(d.remove("1P"))
    assert a.code == "PAST_POSTING"
    assert "changed from 1000 to empty after the wagers were locked" in a.text and "None" not in a.text


def test_presence_only_change_after_lock_is_not_called_a_past_post() -> None:
    d = Driver(baccarat_config())
    d.bet("2PP", None)
    d.button(Button.NO_MORE_BETS)
    d.card("9H")
    out = d.remove("2PP")
    (a,) = d.alarms(out)
    assert (a.code, a.spot) == ("PRESENCE_CHANGED_AFTER_LOCK", "2PP")
    d.cards("9D KS KC")
    (s,) = d.settlements()
    assert s.stake == 500
    assert [r.changed_after_lock for r in d.floor()[-1].settlements] == [True]


def test_pads_going_to_locked_with_the_same_amount_is_not_a_change() -> None:
    from tablesense.drivers.events import SpotState

    d = Driver(baccarat_config())
    _round(d)
    out = d.bet("1P", 1000, SpotState.LOCKED)
    assert d.alarms(out) == []


def test_shoe_lost_mid_round_holds_until_it_is_back() -> None:
    d = Driver(baccarat_config())
    _round(d)
    d.cards("5H 2C 5D")
    out = d.link(SHOE, LinkState.DISCONNECTED)
    assert d.codes(out) == ["DEVICE_LOST"] and d.state.held
    (status,) = d.messages(Channel.DEVICE, out)
    assert (status.name, status.state) == (SHOE, "disconnected")
    assert [e.retain for e in out if e.channel is Channel.DEVICE] == [True]
    d.card("3C")
    assert d.settlements() == []
    d.link(SHOE, LinkState.ONLINE)
    assert not d.state.held
    assert [s.spot for s in d.settlements()] == ["1PP"]


def test_pads_lost_does_not_hold_the_round() -> None:
    d = Driver(baccarat_config())
    _round(d)
    out = d.link(PADS, LinkState.DISCONNECTED)
    (a,) = d.alarms(out)
    assert a.code == "DEVICE_LOST" and not a.held


def test_face_value_burn_never_enters_a_round() -> None:
    d = Driver(baccarat_config(burn='mode = "face_value"'))
    assert d.state.phase == "burn"
    d.status(ShoeStatusKind.NEW_SHOE)
    d.card("3H")  # exposed: burns 3 more
    d.cards("AS AD")
    assert d.state.phase == "burn"
    d.card("AC")
    assert d.state.phase == "betting"
    assert d.state.cards_remaining == 416 - 4
    d.bet("1P", 1000)
    d.cards("9H 3D KS KC")
    floor = d.floor()[-1]
    assert [b.card for b in floor.burns] == ["3H", "AS", "AD", "AC"]
    assert floor.burns[0].face_up and not floor.burns[1].face_up
    assert [c.card for c in floor.cards] == ["9H", "3D", "KS", "KC"]


def test_a_ten_or_face_card_exposed_burns_ten() -> None:
    d = Driver(baccarat_config(burn='mode = "face_value"'))
    d.card("KH")
    d.cards(["2C"] * 9)
    assert d.state.phase == "burn"
    d.card("2D")
    assert d.state.phase == "betting"


def test_unreadable_exposed_card_waits_for_the_supervisor() -> None:
    d = Driver(baccarat_config(burn='mode = "face_value"'))
    out = d.unreadable()
    assert d.codes(out) == ["BURN"]
    d.card("2C")  # burned while the count is unknown
    assert d.command("enter_card", card="2S").ok  # the exposed card was a 2: one more to burn
    assert d.state.phase == "burn"
    d.card("2D")
    assert d.state.phase == "betting"


def test_fixed_burn_and_burn_frames_from_the_shoe() -> None:
    d = Driver(baccarat_config(burn='mode = "fixed"\ncount = 2'))
    d.cards("2C 3C")
    assert d.state.phase == "betting"
    d2 = Driver(baccarat_config())
    d2.status(ShoeStatusKind.BURN, "7S")
    d2.status(ShoeStatusKind.BURN)  # a burn the shoe could not read
    assert d2.state.phase == "betting" and d2.state.cards_remaining == 416 - 2
    d2.cards("9H 3D KS KC")
    assert [b.card for b in d2.floor()[-1].burns] == ["7S", None]


def test_cut_card_mid_round_allows_one_more_round_then_the_shoe_ends() -> None:
    d = Driver(baccarat_config())
    d.card("9H")
    out = d.status(ShoeStatusKind.CUT_CARD)
    assert d.codes(out) == ["CUT_CARD"] and d.state.cut_card
    d.cards("3D KS KC")
    d.cards("9C 3H KD KH")
    assert d.state.last_round and d.state.round == 2
    assert d.machine.phase is Phase.SHOE_END and d.state.phase == "shoe_end"
    out = d.card("2S")
    assert d.codes(out) == ["EXTRA_CARD"]
    d.status(ShoeStatusKind.NEW_SHOE)
    assert (d.state.shoe, d.state.round, d.state.phase, d.state.held) == (2, 1, "betting", False)
    assert d.state.cards_remaining == 416


def test_cut_card_before_the_first_card_makes_this_round_the_last() -> None:
    d = Driver(baccarat_config())
    d.status(ShoeStatusKind.CUT_CARD)
    d.cards("9H 3D KS KC")
    assert d.machine.phase is Phase.SHOE_END


def test_new_shoe_command_refused_mid_round_and_new_shoe_frame_voids_it() -> None:
    d = Driver(baccarat_config())
    _round(d)
    d.card("9H")
    reply = d.command("new_shoe")
    assert not reply.ok and "void it first" in reply.reason
    d.status(ShoeStatusKind.NEW_SHOE)
    assert d.results()[-1].void and d.state.shoe == 2
    assert d.command("new_shoe").ok and d.state.shoe == 2  # nothing out of shoe 2 yet: same shoe


def test_commands_are_validated() -> None:
    d = Driver(baccarat_config())
    assert not d.command("reboot").ok
    assert not d.command("void_round").ok  # no round in play
    assert not d.command("ack_alarm", alarm="1.99").ok
    assert not d.command("enter_card", card="QS").ok
    assert "operator" in d.command("void_round", operator="  ").reason
    assert not d.command("ack_alarm", alarm="x" * 1000).ok
    floor_cmds = d.machine.snapshot()["record"]["commands"]
    assert len(floor_cmds) == 6 and all(not c["ok"] for c in floor_cmds)


def test_sequence_gap_on_pads_is_reported_without_holding() -> None:
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.seq(PADS, 3)
    out = d.bet("1B", 1000)
    (a,) = d.alarms(out)
    assert a.code == "SEQUENCE_GAP" and not a.held


def test_every_alarm_code_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "state-machine.md").read_text(encoding="utf-8")
    for code in AlarmCode:
        assert f"`{code.value}`" in doc, f"{code.value} missing from docs/state-machine.md"
        assert ALARMS[code].severity.value in ("info", "warning", "critical")


def test_void_command_is_kept_in_the_voided_rounds_record_with_its_operator() -> None:
    d = Driver(baccarat_config())
    _round(d)
    d.card("9H")
    assert d.command("void_round", operator="pit-boss-3", reason="misdeal").ok
    (floor,) = d.floor()
    (cmd,) = floor.commands
    assert (cmd.name, cmd.operator, cmd.ok) == ("void_round", "pit-boss-3", True)
    assert cmd.args == {"reason": "misdeal"}


def test_a_new_shoe_starts_a_clean_round_record_with_the_command_that_started_it() -> None:
    d = Driver(baccarat_config(start="button"))
    d.bet("1P", 1000)
    d.cards("9H 3D KS KC")
    d.card("2S")  # a stray card: EXTRA_CARD, reported on the alarms channel
    assert d.command("new_shoe", operator="pit-boss-3").ok
    d.cards("9C 3H KD KH")
    floor = d.floor()[-1]
    assert (floor.shoe, floor.round) == (2, 1)
    assert [c.card for c in floor.cards] == ["9C", "3H", "KD", "KH"]
    assert [(c.name, c.operator) for c in floor.commands] == [("new_shoe", "pit-boss-3")]
    assert floor.wagers[0].spot == "1P"  # the pads still hold the bet


def test_unknown_spots_are_reported_once_and_not_kept() -> None:
    d = Driver(baccarat_config())
    out = d.bet("9Z", 1000)
    assert d.codes(out) == ["UNKNOWN_SPOT"]
    assert d.codes(d.bet("9Z", 2000)) == []
    assert d.machine.snapshot()["pads"] == {}


def test_a_device_restarting_its_sequence_between_rounds_is_no_gap_but_mid_round_it_is() -> None:
    from tablesense.daemon.rules.cards import Card
    from tablesense.drivers.events import CardDrawn

    d = Driver(baccarat_config())
    d.cards("9H 3D KS KC")
    d.link(SHOE, LinkState.DISCONNECTED)
    d.link(SHOE, LinkState.ONLINE)
    out = d.feed(CardDrawn(SHOE, 1, Card.parse("2C")))  # the shoe restarted: sequence 1 again
    assert d.codes(out) == [] and d.public_cards() == ["2C"]
    d.link(SHOE, LinkState.DISCONNECTED)
    d.link(SHOE, LinkState.ONLINE)
    out = d.feed(CardDrawn(SHOE, 1, Card.parse("2D")))  # mid-round: cards may have been missed
    assert d.codes(out) == ["SEQUENCE_GAP"] and d.state.held


def test_shoe_empty_mid_round_holds_and_between_rounds_ends_the_shoe() -> None:
    d = Driver(baccarat_config())
    _round(d)
    d.card("9H")
    out = d.status(ShoeStatusKind.EMPTY)
    assert d.codes(out) == ["SHOE_EXHAUSTED"] and d.state.held
    d2 = Driver(baccarat_config())
    out = d2.status(ShoeStatusKind.EMPTY)
    assert d2.codes(out) == [] and d2.state.phase == "shoe_end"


def test_more_cards_than_a_one_deck_shoe_holds() -> None:
    from tablesense.daemon.rules.cards import ALL_CARDS

    d = Driver(baccarat_config(decks=1))
    for c in ALL_CARDS[:-1]:
        d.card(str(c))
    assert d.state.cards_remaining == 1 and d.codes() == []
    out = d.card(str(ALL_CARDS[-1]))  # the last card: this round still needs cards
    assert d.state.cards_remaining == 0 and d.codes(out) == ["SHOE_EXHAUSTED"] and d.state.held
    out = d.card("AS")  # one more: set aside, counted on the same alarm
    (a,) = d.alarms(out)
    assert (a.code, a.count) == ("SHOE_EXHAUSTED", 2)


def test_device_error_and_lid_open_are_reported_and_acknowledged() -> None:
    from tablesense.drivers.events import DeviceError

    d = Driver(baccarat_config())
    _round(d)
    d.card("9H")
    out = d.feed(DeviceError(SHOE, d.seq(SHOE), "E42", "card jam"))
    (err,) = d.alarms(out)
    assert (err.code, err.device, err.held) == ("DEVICE_ERROR", SHOE, False) and "card jam" in err.text
    out = d.status(ShoeStatusKind.LID_OPEN)
    assert d.codes(out) == ["LID_OPEN"]
    assert d.command("ack_alarm", alarm=err.alarm_id).ok
    assert d.alarms()[-1].state == "acknowledged" and d.alarms()[-1].alarm_id == err.alarm_id
    assert not d.command("ack_alarm", alarm=err.alarm_id).ok  # only once


def test_an_input_the_machine_cannot_apply_is_rejected_and_journaled_as_rejected() -> None:
    """Applying an input that raises (a codec defect: not a Card) raises InputRejected; the caller rebuilds
    the machine from what is journaled and feeds the RejectedInput in its place: INPUT_REJECTED holds, the
    frame counts as received (no gap after it), a supervisor releases the hold."""
    import pytest

    from tablesense.daemon.table import TimedInput, replay
    from tablesense.daemon.table.inputs import RejectedInput
    from tablesense.daemon.table.machine import InputRejected
    from tablesense.drivers.events import CardDrawn

    d = Driver(baccarat_config())
    _round(d)
    bad = CardDrawn(SHOE, d.seq(SHOE), "AS")  # type: ignore[arg-type]  # a codec defect: not a Card
    with pytest.raises(InputRejected, match=r"AttributeError|TypeError"):
        d.machine.handle(TimedInput("2026-11-29T01:00:00Z", bad))
    d.machine, _ = replay(d.config, d.inputs)  # what the app does: the machine equals the journal again
    out = d.feed(RejectedInput("CardDrawn", '{"device":"shoe","seq":1,"card":"AS"}', "TypeError: x", SHOE,
                               bad.seq))
    (a,) = d.alarms(out)
    assert (a.code, a.severity, a.held) == ("INPUT_REJECTED", "critical", True)
    assert d.command("ack_alarm", alarm=a.alarm_id).ok
    d.cards("9H 3D KS KC")  # numbered after the rejected frame: no sequence gap
    assert {s.spot for s in d.settlements()} == {"1P", "1PP"} and "SEQUENCE_GAP" not in d.codes()
    assert replay(d.config, d.inputs)[0].snapshot() == d.machine.snapshot()
