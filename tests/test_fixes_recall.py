"""Recall of a round still open never shows a face-down card, also when a supervisor entered it with the
``enter_card`` command (journaled with its args): the real machine and journal, read back by recall."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from machine_support import Driver, blackjack_config, uth_config

from tablesense.daemon.cli import main
from tablesense.daemon.config import TableConfig
from tablesense.daemon.journal import Journal
from tablesense.daemon.table import Command, Emit
from tablesense.drivers.events import Button, CardUnreadable, ShoeStatusKind


class JournaledDriver(Driver):
    """The machine test driver, journaling every input with what it emitted, as the daemon does."""

    def __init__(self, config: TableConfig, journal: Journal) -> None:
        super().__init__(config)
        self.journal = journal

    def feed(self, event: Any) -> list[Emit]:
        out = super().feed(event)
        self.journal.append(self.inputs[-1], out)
        return out


def _recall_json(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    assert main(["recall", "--journal", str(directory), "--json", "--last", "1"]) == 0
    out = capsys.readouterr().out
    (record,) = json.loads(out)
    assert main(["recall", "--journal", str(directory), "--last", "1"]) == 0
    return record, out + capsys.readouterr().out


def test_entered_blackjack_hole_card_is_not_shown_while_the_round_is_open(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Journal(tmp_path, "bj") as j:
        d = JournaledDriver(blackjack_config(), j)
        d.bet("B1", 1000)
        d.button(Button.NO_MORE_BETS)
        d.cards("QH 6D QS")
        d.feed(CardUnreadable("shoe", d.seq("shoe")))  # the hole card, unread
        d.feed(Command("enter_card", {"shoe": "1", "round": "1", "card": "JC"}, "supervisor-7", "c-1"))
        assert d.replies[-1].ok, d.replies[-1].reason
        assert "JC" not in [c.card for c in d.state.cards]  # the machine keeps it face down
    record, out = _recall_json(tmp_path, capsys)
    assert record["status"] == "open"
    assert [c["card"] for c in record["cards"]] == ["QH", "6D", "QS"]
    assert record["hidden_cards"] == 1
    assert "JC" not in out  # neither the card list nor the command's args show the hole card
    (cmd,) = [e for e in record["events"] if e["kind"] == "Command"]
    assert cmd["detail"]["name"] == "enter_card" and "card" not in cmd["detail"]["args"]
    assert cmd["detail"]["args"]["round"] == "1"  # the rest of the command is shown as journaled


def test_entered_face_up_card_is_shown_with_its_command(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with Journal(tmp_path, "bj") as j:
        d = JournaledDriver(blackjack_config(), j)
        d.bet("B1", 1000)
        d.button(Button.NO_MORE_BETS)
        d.card("QH")
        d.feed(CardUnreadable("shoe", d.seq("shoe")))  # the dealer's up card, unread
        d.feed(Command("enter_card", {"shoe": "1", "round": "1", "card": "6D"}, "supervisor-7", "c-1"))
        assert d.replies[-1].ok, d.replies[-1].reason
        assert "6D" in [c.card for c in d.state.cards]  # face up: public
    record, out = _recall_json(tmp_path, capsys)
    assert [(c["card"], c["position"], c["status"]) for c in record["cards"]] == [
        ("QH", "1", "dealt"), ("6D", "dealer", "entered")]
    (cmd,) = [e for e in record["events"] if e["kind"] == "Command"]
    assert cmd["detail"]["args"]["card"] == "6D"
    assert "6D" in out


def test_entered_uth_hand_card_is_not_shown_before_the_reveal(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with Journal(tmp_path, "uth") as j:
        d = JournaledDriver(uth_config(), j)
        d.bet("A1", 1000)
        d.button(Button.NO_MORE_BETS)
        d.card("2C")
        d.feed(CardUnreadable("shoe", d.seq("shoe")))
        d.feed(Command("enter_card", {"shoe": "1", "round": "1", "card": "AH"}, "supervisor-7", "c-1"))
        assert d.replies[-1].ok, d.replies[-1].reason
        assert d.state.cards == ()  # UTH hands are face down until the reveal
    record, out = _recall_json(tmp_path, capsys)
    assert record["status"] == "open" and record["cards"] == []
    assert "AH" not in out and "2C" not in out


def test_burn_card_reported_by_the_shoe_is_not_shown_while_the_round_is_open(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Journal(tmp_path, "uth") as j:
        d = JournaledDriver(uth_config(burns=1), j)
        d.bet("A1", 1000)
        d.button(Button.NO_MORE_BETS)
        d.cards("AH KH AD KD")
        d.status(ShoeStatusKind.BURN, "4C")  # burned face down before the board
        d.card("2S")
    record, out = _recall_json(tmp_path, capsys)
    assert record["status"] == "open"
    (burn,) = [e for e in record["events"] if e["kind"] == "ShoeStatus"]
    assert burn["detail"]["kind"] == "burn" and "card" not in burn["detail"]
    assert "4C" not in out and "rank" not in out


def _journal_hold_release(directory: Path, public_after: tuple[tuple[int, str, str], ...]) -> None:
    """A round whose second card was unreadable (held); a JC read while held waits; the supervisor
    enters JC for the unreadable card and the machine answers with ``public_after``."""
    from tablesense.daemon.messages import PublicCard, RoundState
    from tablesense.daemon.rules.cards import Card
    from tablesense.daemon.table.inputs import Channel, TimedInput
    from tablesense.drivers.events import CardDrawn, ShoeStatus

    def state(*cards: tuple[int, str, str]) -> list[Emit]:
        return [Emit(Channel.ROUND, RoundState(
            table="t", ts="2026-11-29T12:00:00.000Z", shoe=1, round=1, game="blackjack", phase="dealing",
            cards=tuple(PublicCard(index=i, card=c, position=p) for i, c, p in cards)), retain=True)]

    steps = [
        (ShoeStatus("shoe", 1, ShoeStatusKind.NEW_SHOE), state()),
        (CardDrawn("shoe", 2, Card.parse("QH")), state((1, "QH", "1"))),
        (CardUnreadable("shoe", 3), state((1, "QH", "1"))),
        (CardDrawn("shoe", 4, Card.parse("JC")), state((1, "QH", "1"))),  # waits while the round is held
        (Command("enter_card", {"shoe": "1", "round": "1", "card": "JC"}, "supervisor-7", "c-1"),
         state(*public_after)),
    ]
    with Journal(directory, "t") as j:
        for n, (event, emits) in enumerate(steps, start=1):
            j.append(TimedInput(f"2026-11-29T12:00:{n:02d}.000Z", event), emits)


def test_a_card_placed_by_the_same_command_does_not_reveal_the_entered_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The entered card stays face down; the JC read while the round was held becomes public with the
    same answer: the command's card is still withheld (it would tell which card is face down)."""
    _journal_hold_release(tmp_path, ((1, "QH", "1"), (3, "JC", "1")))
    record, _ = _recall_json(tmp_path, capsys)
    (cmd,) = [e for e in record["events"] if e["kind"] == "Command"]
    assert "card" not in cmd["detail"]["args"] and "withheld" in cmd["detail"]
    assert [(c["index"], c["card"], c["status"]) for c in record["cards"]] == [(1, "QH", "dealt"),
                                                                              (3, "JC", "dealt")]
    (other := tmp_path / "b").mkdir()
    _journal_hold_release(other, ((1, "QH", "1"), (2, "JC", "1"), (3, "JC", "1")))  # both face up
    record, _ = _recall_json(other, capsys)
    (cmd,) = [e for e in record["events"] if e["kind"] == "Command"]
    assert cmd["detail"]["args"]["card"] == "JC"
    assert [(c["index"], c["status"], c["device_seq"]) for c in record["cards"]] == [
        (1, "dealt", 2), (2, "entered", None), (3, "dealt", 4)]
