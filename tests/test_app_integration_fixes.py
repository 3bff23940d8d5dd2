"""Integration fixes found in review (issues 4-6): the app uses the machine's public API only, prunes the
journal, refuses to settle on a damaged journal; the machine's sequence check handles the wrap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from machine_support import SHOE, Driver, baccarat_config

from daemon.rules.cards import Card
from daemon.table.machine import Phase
from drivers.events import Button, CardDrawn, ShoeStatusKind

ROOT = Path(__file__).resolve().parent.parent


def test_app_touches_no_private_member_of_the_machine() -> None:
    """daemon/app.py seeds a rebuilt machine's bet pads through ``TableMachine.seed_pads`` (it used
    ``machine._pads.update``): ruff's flake8-self rule finds any private member access in the app."""
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "SLF001",
                          "--output-format", "concise", str(ROOT / "daemon" / "app.py")],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def _wrap_driver() -> Driver:
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.button(Button.NO_MORE_BETS)
    return d


def test_shoe_sequence_wrapping_from_99999_to_0_is_no_gap() -> None:
    """docs/protocol.md §4: a device counts 0..99999 then 0 again, and that wrap is not a gap."""
    d = _wrap_driver()
    codes = []
    for seq, card in ((99998, "5H"), (99999, "2C"), (0, "5D"), (1, "3C")):
        codes += d.codes(d.feed(CardDrawn(SHOE, seq, Card.parse(card))))
    assert "SEQUENCE_GAP" not in codes
    assert d.public_cards() == ["5H", "2C", "5D", "3C"]
    assert not d.state.held


def test_a_real_gap_across_the_wrap_holds_the_round() -> None:
    """99998 then 1: frames 99999 and 0 were lost; the card joins no hand and the round is held."""
    d = _wrap_driver()
    d.feed(CardDrawn(SHOE, 99997, Card.parse("5H")))
    d.feed(CardDrawn(SHOE, 99998, Card.parse("2C")))
    out = d.feed(CardDrawn(SHOE, 1, Card.parse("5D")))
    (a,) = d.alarms(out)
    assert (a.code, a.held, a.device) == ("SEQUENCE_GAP", True, SHOE)
    assert "99998 then 1" in a.text
    assert d.public_cards() == ["5H", "2C"]


def test_round_end_on_a_completed_baccarat_round_is_a_normal_action() -> None:
    """The dealer's round-end button after a baccarat round completed by its cards opens the next round
    without an alarm, also on the shoe's last round after the cut card (the machine stays in shoe_end)."""
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.cards("9H 3D KS KC")  # Player 9, Banker 3: natural, complete with the fourth card
    assert d.machine.phase is Phase.COMPLETE
    out = d.button(Button.ROUND_END)
    assert d.codes(out) == []
    assert (d.state.round, d.state.phase) == (2, "betting")
    d.status(ShoeStatusKind.CUT_CARD)  # before round 2's first card: round 2 is the shoe's last
    d.cards("9C 3H KD KH")
    assert d.machine.phase is Phase.SHOE_END
    before = len(d.emits)
    out = d.button(Button.ROUND_END)
    assert d.codes(out) == [] and "UNEXPECTED_BUTTON" not in d.codes()
    assert d.machine.phase is Phase.SHOE_END and len(d.emits) == before  # nothing changes, nothing to publish
    d.status(ShoeStatusKind.NEW_SHOE)
    assert (d.state.shoe, d.state.round, d.state.phase) == (2, 1, "betting")


def test_round_end_in_the_middle_of_a_baccarat_deal_is_an_alarm() -> None:
    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.cards("2H 3D")
    out = d.button(Button.ROUND_END)  # two cards out: the initial deal is not done
    assert d.codes(out) == ["UNEXPECTED_BUTTON"]
    d.cards("3S 3C")  # Player 5, Banker 6: the Player's third card is due
    out = d.button(Button.ROUND_END)
    (a,) = d.alarms(out)
    assert a.code == "UNEXPECTED_BUTTON" and "cards still due" in a.text
    assert d.machine.phase is not Phase.COMPLETE and d.results() == []
    d.card("KD")  # the third card completes the round as usual
    assert d.machine.phase is Phase.COMPLETE and len(d.results()) == 1
