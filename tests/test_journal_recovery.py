"""Crash recovery through the journal with the real state machine: after every single input, a machine
rebuilt from the journal alone (``replay_shoe``, ``pads_before_replay``, ``devices_before_replay``,
``replay_inputs``) must emit exactly what the machine that never crashed emits for every later input: no
settlement lost, changed or duplicated by a crash at any point."""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_support import Driver, baccarat_config, blackjack_config, encode_all

from tablesense.daemon.config import TableConfig
from tablesense.daemon.journal import Journal
from tablesense.daemon.table import Command, Emit, TableMachine, TimedInput
from tablesense.drivers.events import Button, ShoeStatusKind, SpotChanged


def step(machine: TableMachine, inp: TimedInput) -> list[Emit]:
    if isinstance(inp.event, Command):
        return machine.handle_command(inp)[1]
    return machine.handle(inp)


def rebuild(cfg: TableConfig, journal: Journal, seed_pads: bool = True) -> TableMachine:
    """What the daemon does at start: a fresh machine at the journal's shoe, pads and device facts as they
    stood, replay."""
    shoe = journal.replay_shoe
    machine = TableMachine(cfg, shoe=shoe if isinstance(shoe, int) else 1)
    if seed_pads:
        pads = [inp.event for inp in journal.pads_before_replay()]
        assert all(isinstance(ev, SpotChanged) for ev in pads)
        machine.seed_pads(pads)  # type: ignore[arg-type]
    machine.seed_devices(journal.devices_before_replay())
    for inp in journal.replay_inputs():
        step(machine, inp)
    return machine


def baccarat_script(d: Driver) -> None:
    """Two shoes: bets, pairs, an unreadable card entered by command, past-posting, a sequence gap, a void,
    the cut card, and chips left on the layout across the shoe change."""
    d.status(ShoeStatusKind.NEW_SHOE)
    d.cards("3H 2C 2D 2S")
    d.bet("1P", 1000)
    d.bet("1PP", 500)
    d.button(Button.NO_MORE_BETS)
    d.cards("5H 2C")
    d.unreadable()
    d.card("3C")
    d.command("enter_card", card="5D")
    d.bet("1P", 9000)
    d.card("9S")
    d.bet("1B", 1000)
    d.cards("9H 3D")
    d.card("KS", skip=1)
    d.command("void_round", reason="sequence gap")
    d.status(ShoeStatusKind.CUT_CARD)
    d.cards("4C 4D KC KD")
    d.bet("2PP", None)
    d.cards("8C 8D QC QD")
    d.status(ShoeStatusKind.NEW_SHOE)
    d.cards("KH " + " ".join(["2H"] * 10))
    d.cards("7C 7D QS QH 2S")
    d.remove("1P")
    d.cards("6C 6D 6H 6S")
    d.status(ShoeStatusKind.CUT_CARD)
    d.cards("9C 9D 8S 8H")  # the shoe's last round
    d.card("3S")  # a card after the last round: set aside into the next round's record
    d.bet("2P", 700)
    d.status(ShoeStatusKind.NEW_SHOE)  # shoe 3: 1PP (500) has sat on the layout since shoe 1
    d.cards("5H 2H 2H 2H 2H 2H")
    d.cards("9C 9D 8S 8H")
    d.cards("7S 7H 7D 7C")
    d.status(ShoeStatusKind.NEW_SHOE)  # shoe 4
    d.cards("4C 3H 3H 3H 3H")
    d.cards("KS QS JS 10S 9S")
    d.bet("1B", 2500)
    d.cards("2D 3D 4D 5D")


def blackjack_script(d: Driver) -> None:
    d.status(ShoeStatusKind.NEW_SHOE)
    for n in range(1, 4):
        d.bet(f"B{n}", 1000)
        d.bet(f"PP{n}", 500)
    d.button(Button.NO_MORE_BETS)
    d.cards("8S 9D 10H 6C 8H 9S 4H KC")
    d.button(Button.ROUND_END)
    d.bet("PP3", 1500)
    d.button(Button.NO_MORE_BETS)
    d.cards("AS AD 2C 7C AH 3D 5D QS")
    d.button(Button.ROUND_END)


@pytest.mark.parametrize("config, script", [
    (baccarat_config(burn='mode = "face_value"'), baccarat_script),
    (blackjack_config(), blackjack_script),
], ids=["baccarat", "blackjack"])
def test_a_crash_after_any_input_changes_nothing_downstream(tmp_path: Path, config: TableConfig,
                                                            script: object) -> None:
    d = Driver(config)
    script(d)  # type: ignore[operator]
    live = TableMachine(config)
    per_input = [step(live, inp) for inp in d.inputs]
    assert encode_all(e for out in per_input for e in out) == encode_all(d.emits)
    assert any(e.channel.value == "settlements" for out in per_input for e in out)
    with Journal(tmp_path, config.table) as journal:
        for k, (inp, out) in enumerate(zip(d.inputs, per_input, strict=True)):
            journal.append(inp, out)
            machine = rebuild(config, journal)  # the daemon was SIGKILLed right after input k
            later = [e for rest in d.inputs[k + 1:] for e in step(machine, rest)]
            expected = [e for out2 in per_input[k + 1:] for e in out2]
            assert encode_all(later) == encode_all(expected), f"crash after input {k}: {inp}"


def test_the_pads_left_before_the_replay_matter(tmp_path: Path) -> None:
    """Without seeding the pads, a chip left on a spot since shoe 1 is missing after a crash in shoe 4."""
    config = baccarat_config(burn='mode = "face_value"')
    d = Driver(config)
    baccarat_script(d)
    live = TableMachine(config)
    per_input = [step(live, inp) for inp in d.inputs]
    wrong = 0
    with Journal(tmp_path, config.table) as journal:
        for k, (inp, out) in enumerate(zip(d.inputs, per_input, strict=True)):
            journal.append(inp, out)
            if journal.replay_shoe == 3:
                assert journal.pads_before_replay(), "the pads as they stood when shoe 3 began"
                machine = rebuild(config, journal, seed_pads=False)
                later = [e for rest in d.inputs[k + 1:] for e in step(machine, rest)]
                wrong += encode_all(later) != encode_all([e for o in per_input[k + 1:] for e in o])
    assert wrong > 0
