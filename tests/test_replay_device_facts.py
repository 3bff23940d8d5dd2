"""A machine rebuilt from the journal knows its devices as the machine that never stopped does, also when
what it knows was learnt two shoes back or more (docs/journal.md "Crash recovery", "Devices";
docs/state-machine.md "Recovery").

The replay starts at the previous shoe's first input, but the machine's device facts come from any input
before: a device's session from the identity frame of its power-up, its link state and a lost link, its
last sequence number and the frames it may resend, whether it reads cards. The journal keeps them
(:class:`~daemon.journal.blocks.DeviceFacts`, snapshotted at each shoe start like the pads) and
:meth:`Journal.devices_before_replay` hands them to :meth:`TableMachine.seed_devices`. Without them a
device that restarted while the daemon was down is taken for a sequence gap (``SEQUENCE_GAP``, not
``DEVICE_RESTARTED``), and the rebuilt machine's snapshot (``sessions``, ``links``, ``lost``,
``device_seq``, ``recent``, ``card_devices``) differs from the live one's."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from journal_support import RealTable
from machine_support import PADS, SHOE, Driver, baccarat_config, encode_all

from tablesense.daemon.config import TableConfig
from tablesense.daemon.journal import Journal
from tablesense.daemon.journal import blocks as bk
from tablesense.daemon.journal.key import load_key
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.table import Command, Emit, TableMachine, TimedInput
from tablesense.daemon.table.inputs import RESEND_WINDOW, DeviceSeed, RejectedInput
from tablesense.drivers.events import (
    CardDrawn,
    DeviceIdentity,
    DeviceState,
    Heartbeat,
    LinkState,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)

AUX = "aux"
"""A second card reader the config does not name (its role is learnt from the cards it sends)."""


def step(machine: TableMachine, inp: TimedInput) -> list[Emit]:
    if isinstance(inp.event, Command):
        return machine.handle_command(inp)[1]
    return machine.handle(inp)


def rebuild(cfg: TableConfig, journal: Journal) -> TableMachine:
    """What the daemon does at start (daemon/app.py ``App._rebuilt_machine``)."""
    shoe = journal.replay_shoe
    machine = TableMachine(cfg, shoe=shoe if isinstance(shoe, int) else 1)
    machine.seed_pads([inp.event for inp in journal.pads_before_replay()
                       if isinstance(inp.event, SpotChanged)])
    machine.seed_devices(journal.devices_before_replay())
    for inp in journal.replay_inputs():
        step(machine, inp)
    return machine


def identity(d: Driver, device: str, session: str, seq: int | None = None) -> list[Emit]:
    """An identity frame (``seq`` given: the device numbers afresh from it, as after a power-up); the live
    machine's emits."""
    if seq is not None:
        d._seq[device] = seq - 1
    return d.feed(DeviceIdentity(device, d.seq(device), "Acme", "X-1", "1.0", f"SN-{device}", session))


def first_shoe(d: Driver) -> None:
    """Shoe 1: every device fact is learnt here. Both devices announce their session and come online; the
    pads reject a frame (journaled as such), then drop off and stay away; a reader the config does not
    name deals one card, then drops off too. A chip on a spot the spot map does not have, and a spot
    change from the shoe (a role that never sends one), are not bets."""
    d.link(SHOE, LinkState.ONLINE)
    d.link(PADS, LinkState.ONLINE)
    identity(d, SHOE, "shoe-boot-1", seq=0)
    identity(d, PADS, "pads-boot-1", seq=0)
    d.status(ShoeStatusKind.NEW_SHOE)
    d.link(AUX, LinkState.ONLINE)
    d.bet("1P", 1000)
    d.bet("9Z", 500)  # a spot the spot map does not have: UNKNOWN_SPOT, once
    d.cards("3H 2C")
    d.feed(CardDrawn(AUX, d.seq(AUX), Card.parse("2D")))
    d.cards("2S")
    for _ in range(5):
        d.feed(Heartbeat(PADS, d.seq(PADS)))
    d.feed(RejectedInput("SpotChanged", '{"device":"pads","seq":99}', "TypeError: x", PADS, d.seq(PADS)))
    d.remove("1P")
    d.link(AUX, LinkState.DISCONNECTED)
    d.link(PADS, LinkState.DISCONNECTED)
    d.cards("4C 4D KC KD")
    d.feed(SpotChanged(SHOE, d.seq(SHOE), "1B", SpotState.PLACED, 900))  # WRONG_DEVICE: not applied


def later_shoes(d: Driver, shoes: int = 3) -> None:
    """Shoes 2 to ``shoes + 1``: the shoe alone deals (rounds start with a card), nothing about the
    devices changes."""
    hands = ["7C 7D QS QH", "6C 6D 6H 6S", "9C 9D 8S 8H", "KH 5S 5C JD"]
    for n in range(shoes):
        d.status(ShoeStatusKind.NEW_SHOE)
        for hand in hands[:2 + n % 2]:
            d.cards(hand)


def device_facts(machine: TableMachine) -> dict[str, object]:
    snap = machine.snapshot()
    return {k: snap[k] for k in ("device_seq", "sessions", "recent", "links", "lost", "card_devices")}


@pytest.fixture
def config() -> TableConfig:
    return baccarat_config(decks=1, burn='mode = "none"')


@pytest.fixture
def journaled(tmp_path: Path, config: TableConfig) -> Iterator[tuple[Driver, Journal]]:
    """Four shoes, the device facts all from the first, journaled with the live machine's emits."""
    d = Driver(config)
    first_shoe(d)
    later_shoes(d)
    live = TableMachine(config)
    with Journal(tmp_path, config.table) as journal:
        for inp in d.inputs:
            journal.append(inp, step(live, inp))
        yield d, journal


def test_the_rebuilt_machine_equals_the_live_one(config: TableConfig,
                                                 journaled: tuple[Driver, Journal]) -> None:
    """Four shoes, the device facts learnt in the first only: the machine rebuilt from the journal (replay
    from shoe 3) has the live machine's snapshot, device facts included."""
    d, journal = journaled
    assert journal.replay_shoe == 3  # the device facts precede the replay
    live = d.machine.snapshot()
    assert live["sessions"] == {PADS: "pads-boot-1", SHOE: "shoe-boot-1"}
    assert live["links"] == {AUX: "disconnected", PADS: "disconnected", SHOE: "online"}
    assert live["lost"] == [AUX, PADS] and AUX in live["card_devices"]
    assert rebuild(config, journal).snapshot() == live


def test_a_device_restarted_while_the_daemon_was_down_is_device_restarted(
        config: TableConfig, journaled: tuple[Driver, Journal]) -> None:
    """The shoe powered up again while the daemon was down: its identity frame (a new session, numbered
    from 0) is a restart for the rebuilt machine as for the live one: DEVICE_RESTARTED, no SEQUENCE_GAP,
    and its old frames are forgotten."""
    d, journal = journaled
    machine = rebuild(config, journal)
    live = identity(d, SHOE, "shoe-boot-2", seq=0)
    rebuilt = step(machine, d.inputs[-1])
    assert d.codes(rebuilt) == ["DEVICE_RESTARTED"] == d.codes(live)
    assert encode_all(rebuilt) == encode_all(live)
    assert machine.snapshot() == d.machine.snapshot() and machine.session(SHOE) == "shoe-boot-2"


def test_the_pads_are_seeded_as_the_live_machine_took_them(config: TableConfig,
                                                          journaled: tuple[Driver, Journal]) -> None:
    """The spot changes before the replay seed the pads as the live machine applied them: the shoe's
    spot change (WRONG_DEVICE, never applied) locks no wager on 1B, and the spot the spot map does not
    have is known, not alarmed again."""
    d, journal = journaled
    assert {(i.event.device, i.event.spot) for i in journal.pads_before_replay()} >= {  # type: ignore[union-attr]
        (SHOE, "1B"), (PADS, "9Z")}
    machine = rebuild(config, journal)
    snap = machine.snapshot()
    assert snap["pads"] == d.machine.snapshot()["pads"] and "1B" not in snap["pads"]
    assert snap["unknown_spots"] == ["9Z"]
    d.bet("9Z", 200)
    d.cards("2H 3S 4H 5D")  # a round: no wager on 1B
    rebuilt = [e for inp in d.inputs[-5:] for e in step(machine, inp)]
    assert encode_all(rebuilt) == encode_all(d.emits[-len(rebuilt):])
    assert "UNKNOWN_SPOT" not in d.codes(rebuilt) and not d.settlements(rebuilt)


def test_frames_from_before_the_replay_are_still_resends(config: TableConfig,
                                                         journaled: tuple[Driver, Journal]) -> None:
    """The pads went away in shoe 1 with frames they may never have had acknowledged: back after two
    shoes, a frame they resend is a resend to the rebuilt machine as to the live one (dropped, not applied
    again after a SEQUENCE_GAP), and so is the frame that was rejected."""
    d, journal = journaled
    machine = rebuild(config, journal)
    pads = [inp.event for inp in d.inputs if getattr(inp.event, "device", None) == PADS
            and not isinstance(inp.event, DeviceState | RejectedInput)]
    for ev in pads[-3:]:
        assert d.machine.is_resend(ev) and machine.is_resend(ev)  # type: ignore[arg-type]
    rejected = next(inp.event for inp in d.inputs if isinstance(inp.event, RejectedInput))
    resent = SpotChanged(PADS, rejected.seq or 0, "1P", SpotState.PLACED, 99)
    assert d.machine.is_resend(resent) == machine.is_resend(resent)
    assert machine.last_seq(PADS) == d.machine.last_seq(PADS) == d._seq[PADS]


def test_a_restart_after_any_input_changes_nothing_downstream(tmp_path: Path, config: TableConfig) -> None:
    """After every input, a daemon restart (the journal closed and opened again, the machine rebuilt from it
    alone) gives the live machine's snapshot and, for every later input, byte-for-byte its emits: the
    shoes after the device facts, then the pads coming back, resending and restarting, and the shoe
    restarting."""
    d = Driver(config)
    first_shoe(d)
    later_shoes(d)
    d.link(PADS, LinkState.ONLINE)
    identity(d, PADS, "pads-boot-2", seq=0)  # the pads restarted while away
    d.bet("1B", 500)
    d.bet("9Z", 700)  # still not in the spot map: no second UNKNOWN_SPOT
    identity(d, SHOE, "shoe-boot-2", seq=0)
    d.cards("2H 3S 4H 5D")
    live = TableMachine(config)
    per_input = [step(live, inp) for inp in d.inputs]
    assert encode_all(e for out in per_input for e in out) == encode_all(d.emits)
    codes = d.codes()
    assert "DEVICE_RESTARTED" in codes and codes.count("SEQUENCE_GAP") == 0
    assert codes.count("UNKNOWN_SPOT") == 1 and codes.count("WRONG_DEVICE") == 1
    machine = TableMachine(config)
    journal = Journal(tmp_path, config.table)
    try:
        for k, (inp, out) in enumerate(zip(d.inputs, per_input, strict=True)):
            journal.append(inp, out)
            step(machine, inp)
            if k % 7 == 6:  # a restart (the writer's device facts rebuilt from the journal at open)
                journal.close()
                journal = Journal(tmp_path, config.table)
            rebuilt = rebuild(config, journal)
            assert rebuilt.snapshot() == machine.snapshot(), f"restart after input {k}: {inp}"
            later = [e for rest in d.inputs[k + 1:] for e in step(rebuilt, rest)]
            assert encode_all(later) == encode_all([e for o in per_input[k + 1:] for e in o]), k
    finally:
        journal.close()


def test_the_facts_do_not_depend_on_batches_or_restarts(tmp_path: Path, config: TableConfig) -> None:
    """The journal keeps the device facts in memory (rebuilt at open from its sealed shoe snapshot and the
    inputs since): journaled one input at a time, in group commits (a shoe starting inside one), or with
    the journal opened again now and then, it seals the same snapshots and seeds the same facts."""
    d = Driver(config)
    first_shoe(d)
    later_shoes(d)
    live = TableMachine(config)
    steps = [(inp, step(live, inp)) for inp in d.inputs]
    results = []
    for name, batch, reopen in (("one", 1, 0), ("groups", 9, 0), ("restarts", 1, 5)):
        journal = Journal(tmp_path / name, config.table)
        try:
            for i in range(0, len(steps), batch):
                journal.append_many(steps[i:i + batch])
                if reopen and i % reopen == reopen - 1:
                    journal.close()
                    journal = Journal(tmp_path / name, config.table)
            state = journal._state
            results.append((state.anchor_device_facts, state.replay_device_facts,
                            journal.devices_before_replay()))
        finally:
            journal.close()
    assert results[0] == results[1] == results[2]
    assert {f.device for f in results[0][1] or ()} == {AUX, PADS, SHOE}


def test_seeding_raises_no_alarm_and_emits_nothing(config: TableConfig) -> None:
    """``seed_devices`` only sets what the machine knows: a device lost and restarted long ago raises
    nothing again, and the next input's emits are the live machine's."""
    d = Driver(config)
    first_shoe(d)
    machine = TableMachine(config)
    machine.seed_devices([
        DeviceSeed(SHOE, seq=d._seq[SHOE], session="shoe-boot-1", link=LinkState.ONLINE, reads_cards=True),
        DeviceSeed(PADS, seq=d._seq[PADS], session="pads-boot-1", link=LinkState.DISCONNECTED, lost=True),
        DeviceSeed(AUX, seq=1, link=LinkState.DISCONNECTED, lost=True, reads_cards=True)])
    snap = machine.snapshot()
    assert not snap["alarms"] and not snap["holds"] and not snap["record"]["alarms"]
    assert snap["links"] == d.machine.snapshot()["links"] and snap["lost"] == [AUX, PADS]
    assert snap["card_devices"] == [AUX, SHOE]
    # the pads' role never reads cards, even if the journal says they sent a card frame
    machine.seed_devices([DeviceSeed(PADS, reads_cards=True)])
    assert machine.snapshot()["card_devices"] == [AUX, SHOE]
    # the pads come back: as for the live machine, a DISCONNECTED -> ONLINE change, no new alarm
    d.link(PADS, LinkState.ONLINE)
    assert d.codes(machine.handle(d.inputs[-1])) == []


# ------------------------------------------------------------------------------------ retention


def _aux_beats(table: RealTable, count: int, first: int) -> list[tuple[TimedInput, list[Emit]]]:
    return [table._apply(Heartbeat(AUX, first + i)) for i in range(count)]


def test_retention_keeps_the_frames_a_rebuilt_machine_needs(tmp_path: Path) -> None:
    """A reader quiet since the first round: retention (the last 10 rounds) deletes older rounds but keeps
    the block with its last frames, so the machine rebuilt in shoe 4 still has them (its snapshot is the
    live one's); once it has sent enough frames again, that block may go."""
    table = RealTable(seed=3, spots=2)
    steps = table.round() + _aux_beats(table, 5, 1)  # nothing else keeps that block: no message of aux
    with Journal(tmp_path, table.config.table, retention_rounds=10) as journal:
        def journal_all(steps: list[tuple[TimedInput, list[Emit]]]) -> None:
            for inp, emits in steps:
                for row in journal.append(inp, emits):
                    journal.mark_delivered(row.row_id)  # the broker has them all

        journal_all(steps)
        while journal.current_shoe is None or journal.current_shoe < 4:
            journal_all(table.round())
        assert journal.prune() > 0
        assert journal.first_seq() == 1  # the first round's block stays
        assert rebuild(table.config, journal).snapshot() == table.machine.snapshot()
        assert table.machine.snapshot()["recent"][AUX] == [1, 2, 3, 4, 5]
        # back: once its latest frames hold a window (the journal tells with twice the window at most)
        # without those of the first round, these are no longer needed
        journal_all(_aux_beats(table, 2 * RESEND_WINDOW + 2, 6))
        while journal.current_shoe < 5:
            journal_all(table.round())
        assert journal.prune() > 0 and (journal.first_seq() or 0) > 1
        assert rebuild(table.config, journal).snapshot() == table.machine.snapshot()


# ------------------------------------------------------------------------------------ older journals


def _drop_device_facts(directory: Path) -> None:
    """Make the journal's sealed state what a tablesense before the device facts wrote (no such fields),
    sealed again with the key, as that tablesense sealed it."""
    conn = sqlite3.connect(directory / "journal.sqlite")
    try:
        meta = bk.Meta(*conn.execute("SELECT schema_version, table_id, epoch, created_at, key_id FROM meta"
                                     ).fetchone())
        data = bytes(conn.execute("SELECT data FROM state").fetchone()[0])
        fields = msgspec.msgpack.decode(data)
        assert "anchor_device_facts" in fields
        old = msgspec.msgpack.encode({k: v for k, v in fields.items() if not k.endswith("device_facts")})
        conn.execute("UPDATE state SET data = ?, seal = ?", (old, bk.state_seal(load_key(), meta, old)))
        conn.commit()
    finally:
        conn.close()


def test_a_journal_written_before_the_device_facts_opens_and_learns_them(tmp_path: Path,
                                                                          config: TableConfig) -> None:
    """A journal whose sealed state has no device facts (an older tablesense) opens and replays as before
    (nothing to seed from before its shoe); the facts learnt from then on seed a machine rebuilt two
    shoes later."""
    d = Driver(config)
    d.status(ShoeStatusKind.NEW_SHOE)
    d.cards("3H 2C 2D 2S")
    d.status(ShoeStatusKind.NEW_SHOE)
    d.cards("4C 4D KC KD")
    live = TableMachine(config)
    with Journal(tmp_path, config.table) as journal:
        for inp in d.inputs:
            journal.append(inp, step(live, inp))
    _drop_device_facts(tmp_path)
    done = len(d.inputs)
    with Journal(tmp_path, config.table) as journal:
        assert journal.devices_before_replay() == []
        assert rebuild(config, journal).snapshot() == d.machine.snapshot()
        identity(d, SHOE, "shoe-boot-1")  # learnt after the upgrade, then two shoes
        d.link(PADS, LinkState.DISCONNECTED)
        later_shoes(d, shoes=2)
        for inp in d.inputs[done:]:
            journal.append(inp, step(live, inp))
        assert journal.replay_shoe == 3
        assert device_facts(rebuild(config, journal)) == device_facts(d.machine)
