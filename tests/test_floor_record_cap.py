"""The floor record fits the broker: a held round's record (a shoe repeating a card, a pad flapping, a
supervisor's commands) is capped at 192 KiB, below the shipped ``message_size_limit 262144``
(deploy/mosquitto/tablesense-tls.conf), by leaving out set-aside cards, spot changes, alarm records and
commands from the middle of their lists, counted in ``*_omitted``. Dealt cards are never left out.
(The end-to-end test with a real broker is tests/test_breaker_floor_record_size.py.)"""

from __future__ import annotations

from machine_support import PADS, Driver, baccarat_config

from tablesense.daemon.messages import CommandRecord, FloorRound, encode_message
from tablesense.daemon.table.record import FLOOR_RECORD_MAX_BYTES, cap_floor_round
from tablesense.drivers.events import Button, SpotChanged, SpotState


def flooded_round(d: Driver) -> None:
    """A wager, the lock, two cards, an unreadable card (held), then the shoe reports AS 1,100 times and
    the locked spot's pad reports its stake back and forth 1,100 times; a supervisor voids the round."""
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("2C 4H")
    d.unreadable()
    for _ in range(1100):
        d.card("AS")
    for n in range(1100):
        d.feed(SpotChanged(PADS, d.seq(PADS), "1P", SpotState.PLACED, 1000 + (n % 2) * 500))
    state = d.state
    assert d.command("void_round", shoe=str(state.shoe), round=str(state.round), reason="faulty shoe").ok


def test_a_flooded_rounds_floor_record_fits_the_broker_and_keeps_every_dealt_card() -> None:
    """Before: this record encoded to about 300 KB; the broker refused it (and Mosquitto 2.0.11 closed
    the daemon's connection at every attempt)."""
    d = Driver(baccarat_config(decks=8))
    flooded_round(d)
    (floor,) = d.floor()
    size = len(encode_message(floor))
    assert size <= FLOOR_RECORD_MAX_BYTES < 262144
    full = d.machine._record
    # every card but the set-aside ones is kept: the dealt two, the unreadable one, the AS queued behind
    # the hold (the shoe's 8 copies); only set-aside repeats are left out
    assert [c.record() for c in full.cards if c.status != "set_aside"] == [
        c for c in floor.cards if c.status != "set_aside"]
    assert [(c.card, c.status) for c in floor.cards[:3]] == [("2C", "dealt"), ("4H", "dealt"),
                                                              (None, "unreadable")]
    assert floor.void and floor.commands[-1].name == "void_round"  # the last command is kept
    omitted = (floor.cards_omitted, floor.spot_changes_omitted, floor.alarms_omitted,
               floor.commands_omitted)
    assert sum(omitted) > 0
    # the lists as the machine holds them (each bounded at 1,024): kept + omitted add up
    assert len(floor.spot_changes) + floor.spot_changes_omitted == len(full.spot_changes)
    assert len(floor.cards) + floor.cards_omitted == len(full.cards)
    assert len(floor.alarms) + floor.alarms_omitted == len(full.alarms)
    # first and last kept: the flapping's start and end, the first set-aside AS and the last one
    assert floor.spot_changes[0] == full.spot_changes[0] and floor.spot_changes[-1] == full.spot_changes[-1]
    aside = [c for c in full.cards if c.status == "set_aside"]
    kept_aside = [c for c in floor.cards if c.status == "set_aside"]
    assert kept_aside[0].index == aside[0].index and kept_aside[-1].index == aside[-1].index


def test_a_record_within_the_cap_is_unchanged() -> None:
    d = Driver(baccarat_config(decks=8))
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("9C 8H KD KS")
    (floor,) = d.floor()
    assert cap_floor_round(floor) is floor
    assert (floor.cards_omitted, floor.spot_changes_omitted, floor.alarms_omitted,
            floor.commands_omitted) == (0, 0, 0, 0)


def test_commands_alone_are_capped_too() -> None:
    """1,024 commands with long arguments (the machine keeps at most 1,024 a round) are about 1.6 MB."""
    command = CommandRecord(ts="2026-12-01T10:00:00Z", name="ack_alarm", args={"alarm_id": "x" * 256},
                            operator="o" * 256, ok=False, reason="r" * 1000)
    record = FloorRound(table="bac-01", ts="2026-12-01T10:00:00Z", shoe=1, round=1, game="baccarat",
                        commands=(command,) * 1024)
    assert len(encode_message(record)) > 8 * FLOOR_RECORD_MAX_BYTES
    capped = cap_floor_round(record)
    assert len(encode_message(capped)) <= FLOOR_RECORD_MAX_BYTES
    assert len(capped.commands) + capped.commands_omitted == 1024 and capped.commands
