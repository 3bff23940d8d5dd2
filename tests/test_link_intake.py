"""The daemon's card intake (``App._process_device`` and its timers) against a real journal: each defect of
the intake review kept fixed.

* a shoe repeating a card 300 times cannot wedge the daemon, now or at its next start;
* an input whose application raises is journaled as rejected, and the machine equals its journal;
* a start whose journal cannot be replayed refuses to settle with one line instead of a traceback;
* a device restarted by a power cut is told from a resend (session, content) and its frames journaled;
* a frame whose journaling failed is taken again when resent, and no AK covers a frame not journaled;
* the deal watchdog becomes a journaled tick; a journal outage is journaled once the journal works.

No broker is needed: ``App.open`` builds the relay without connecting; acknowledgements are read from
``App.last_ack`` (what the links would send).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from machine_support import PADS, SHOE, baccarat_config

from tablesense.daemon import app as app_module
from tablesense.daemon.app import RESEND_WAIT, App
from tablesense.daemon.journal import JournalUnwritable
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.table.inputs import JournalOutage, RejectedInput, Tick
from tablesense.daemon.table.machine import TableMachine
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    DealerButton,
    DeviceIdentity,
    Heartbeat,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_app(directory: Path, clock: Clock | None = None, extra: str = "") -> App:
    a = App(baccarat_config(extra=f'{extra}\n[journal]\ndirectory = "{directory}"\n'), clock=clock or Clock())
    a.open()
    return a


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    a = make_app(tmp_path / "journal")
    yield a
    if a.journal is not None:
        a.journal.close()


def journaled(app: App) -> list[Any]:
    assert app.journal is not None
    return [inp.event for inp in app.journal.replay_inputs()]


def outbox_codes(app: App) -> list[str]:
    assert app.journal is not None
    out = []
    for row in app.journal.pending(limit=100000):
        body = json.loads(row.payload)
        if body.get("schema") == "tablesense.alarm" and body["state"] == "raised":
            out.append(body["code"])
    return out


def equals_replay(app: App) -> bool:
    assert app.machine is not None
    return app.machine.snapshot() == app._rebuilt_machine().snapshot()


def shoe_ident(seq: int, session: str) -> DeviceIdentity:
    return DeviceIdentity(SHOE, seq, "acme", "CS-8", "2.4.1", "SN12345", session)


def card(seq: int, text: str) -> CardDrawn:
    return CardDrawn(SHOE, seq, Card.parse(text))


# ------------------------------------------------------------------------------ defect 1, whole daemon

async def test_300_aces_of_spades_never_wedge_the_daemon_nor_its_next_start(tmp_path: Path) -> None:
    """Defect 1: from the 257th held alarm every input failed, was not journaled, and after the next
    restart ``tablesense run`` exited 1 with a traceback on every start."""
    a = make_app(tmp_path / "j")
    assert await a._process_device(shoe_ident(0, "s1"))
    assert await a._process_device(ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE))
    for seq in range(2, 302):
        assert await a._process_device(card(seq, "AS"))
    assert a.last_ack[SHOE] == 301 and equals_replay(a)
    assert outbox_codes(a).count("CARD_NOT_IN_SHOE") == 9  # one alarm: raised at counts 1, 2, 4 ... 256
    assert a.journal is not None
    a.journal.close()
    again = make_app(tmp_path / "j")  # the next start replays its own journal
    assert again.refusal is None and again.machine is not None
    assert again.machine.snapshot() == a.machine.snapshot()  # type: ignore[union-attr]
    assert again.journal is not None
    again.journal.close()


# ------------------------------------------------------------------------------ rejected inputs

async def test_an_input_whose_application_raises_is_journaled_as_rejected(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    assert await app._process_device(SpotChanged(PADS, 1, "1P", SpotState.PLACED, 1000))
    assert await app._process_device(DealerButton(PADS, 2, Button.NO_MORE_BETS))
    assert await app._process_device(card(1, "9H"))
    real = TableMachine._place

    def broken(self: TableMachine, entry: Any, from_queue: bool = False) -> None:
        if entry.card == Card.parse("3D"):
            self._record.cards.append(entry)  # half-changed, then the defect strikes
            raise RuntimeError("defect")
        real(self, entry, from_queue)

    monkeypatch.setattr(TableMachine, "_place", broken)
    assert await app._process_device(card(2, "3D"))  # journaled (as rejected), so acknowledged
    assert app.last_ack[SHOE] == 2 and app.rejected_inputs == 1
    rejected = journaled(app)[-1]
    assert isinstance(rejected, RejectedInput)
    assert (rejected.kind, rejected.device, rejected.seq) == ("CardDrawn", SHOE, 2)
    assert json.loads(rejected.payload) == {"device": SHOE, "seq": 2, "card": {"rank": 3, "suit": "D"}}
    assert "RuntimeError: defect" in rejected.error
    assert outbox_codes(app)[-1] == "INPUT_REJECTED"
    assert equals_replay(app)  # exactly the replay of the journal: the half-change is gone
    assert app.machine is not None and app.machine.snapshot()["holds"]
    from tablesense.daemon.journal.recall import open_for_recall

    with open_for_recall(app.journal.path.parent) as reader:  # type: ignore[union-attr]
        (current,) = reader.rounds(last=1)
    shown = [e.detail for e in current.events if e.kind == "RejectedInput"]
    assert shown and all("payload" not in d for d in shown)  # recall of an open round shows no card
    assert not await app._process_device(card(2, "3D"))  # its resend is recognised
    assert await app._process_device(card(3, "KS"))  # and the next frame is no gap
    assert "SEQUENCE_GAP" not in outbox_codes(app)
    monkeypatch.setattr(TableMachine, "_place", real)
    assert equals_replay(app)


async def test_a_start_whose_journal_cannot_be_replayed_refuses_to_settle_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A start never fails on replaying its own journal: it runs in the refusing state."""
    a = make_app(tmp_path / "j")
    assert await a._process_device(SpotChanged(PADS, 1, "1P", SpotState.PLACED, 1000))
    assert await a._process_device(card(1, "9H"))
    assert a.journal is not None
    a.journal.close()

    def broken(self: TableMachine, ev: Any) -> None:
        raise KeyError("a defect met only on replay")

    monkeypatch.setattr(TableMachine, "_on_spot", broken)
    again = make_app(tmp_path / "j")  # no exception
    assert again.refusal is not None
    assert again.refusal.startswith("journal cannot be replayed: settling refused")
    assert "SpotChanged" in again.refusal and "KeyError" in again.refusal and "\n" not in again.refusal
    assert json.loads(again._status_payload("online"))["state"] == "refusing"
    assert not await again._process_device(card(2, "3D"))  # nothing applied, nothing acknowledged
    assert again.last_ack == {} and again.links == {}
    ok, reason = await again._refuse_command(None)  # type: ignore[arg-type]
    assert not ok and reason == again.refusal


# ------------------------------------------------------------------------------ defect 2: device sessions

async def test_a_power_cut_restarting_the_shoe_at_zero_is_journaled_not_dropped(tmp_path: Path) -> None:
    """Defect 2: the journal's last shoe number is 17; after power-up the shoe numbers from 0 again. The
    new shoe and its first cards were dropped as resends, answered AK 17, never journaled."""
    a = make_app(tmp_path / "j")
    assert await a._process_device(shoe_ident(0, "boot-1"))
    assert await a._process_device(ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE))
    for seq in range(2, 18):
        assert await a._process_device(Heartbeat(SHOE, seq))
    assert a.journal is not None
    a.journal.close()
    # power cut: daemon and shoe restart together
    b = make_app(tmp_path / "j")
    frames = [shoe_ident(0, "boot-2"), ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE), card(2, "9H"),
              card(3, "3D")]
    for f in frames:
        assert await b._process_device(f), f
    assert journaled(b)[-4:] == frames
    assert b.last_ack[SHOE] == 3 and b.dropped_resends == 0
    assert "DEVICE_RESTARTED" in outbox_codes(b)
    assert equals_replay(b)
    assert b.journal is not None
    b.journal.close()


async def test_resends_of_the_same_session_after_a_daemon_restart_are_dropped(tmp_path: Path) -> None:
    a = make_app(tmp_path / "j")
    for f in (shoe_ident(0, "boot-1"), ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE), card(2, "9H")):
        assert await a._process_device(f)
    assert a.journal is not None
    a.journal.close()
    b = make_app(tmp_path / "j")  # the daemon crashed before acknowledging 2: the shoe resends it
    assert not await b._process_device(card(2, "9H"))
    assert b.dropped_resends == 1 and b.last_ack[SHOE] == 2  # acknowledged again, not doubled
    assert await b._process_device(card(2, "9D"))  # same number, other content: not a resend
    assert journaled(b)[-1] == card(2, "9D") and "SEQUENCE_GAP" in outbox_codes(b)  # it went back
    assert b.journal is not None
    b.journal.close()


# ------------------------------------------------------------------------------ defect 3: failed writes

async def test_a_card_whose_journaling_failed_is_taken_again_and_never_acknowledged_over(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 3: a card frame failed with SQLITE_FULL, the resends were dropped as duplicates, a later
    heartbeat was journaled and acknowledged, and the cumulative AK made the shoe discard the card."""
    assert app.journal is not None
    for f in (shoe_ident(0, "b"), ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE)):
        assert await app._process_device(f)
    assert await app._process_device(DealerButton(PADS, 1, Button.NO_MORE_BETS))
    real = app.journal.append
    calls = {"n": 0}

    def full_once(inp: Any, emits: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise JournalUnwritable("journal .../journal.sqlite: database or disk is full")
        return real(inp, emits)

    monkeypatch.setattr(app.journal, "append", full_once)
    assert not await app._process_device(card(2, "7D"))  # not journaled, not acknowledged
    assert app.last_ack[SHOE] == 1
    assert not await app._process_device(Heartbeat(SHOE, 3))  # space is back: held back behind frame 2
    assert app.last_ack[SHOE] == 1  # never AK 3 across the card that is not journaled
    assert await app._process_device(card(2, "7D"))  # the shoe resends it: taken again
    assert app.last_ack[SHOE] == 3  # then the heartbeat held back follows
    cards = [e for e in journaled(app) if isinstance(e, CardDrawn)]
    assert cards == [card(2, "7D")]  # exactly once
    assert isinstance(journaled(app)[-1], Heartbeat)
    assert "JournalOutage" in [type(e).__name__ for e in journaled(app)]  # the spell is on record
    assert equals_replay(app)


async def test_a_known_gap_is_never_acknowledged_over_until_it_is_on_record(tmp_path: Path) -> None:
    clock = Clock()
    a = make_app(tmp_path / "j", clock)
    for f in (shoe_ident(0, "b"), ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE)):
        assert await a._process_device(f)
    assert await a._process_device(DealerButton(PADS, 1, Button.NO_MORE_BETS))
    assert await a._process_device(card(2, "7D"))
    assert not await a._process_device(card(4, "3C"))  # frame 3 was lost on the line
    assert a.last_ack[SHOE] == 2 and a.held_back == 1
    await a._timer_step()  # not yet
    assert a.last_ack[SHOE] == 2
    clock.now += RESEND_WAIT + 0.1  # the shoe never resends 3 (it does not support resending)
    await a._timer_step()
    assert a.last_ack[SHOE] == 4  # applied with the gap on record: SEQUENCE_GAP, round held
    assert "SEQUENCE_GAP" in outbox_codes(a) and a.machine is not None and a.machine.snapshot()["holds"]
    assert equals_replay(a)
    assert a.journal is not None
    a.journal.close()


async def test_a_device_that_resends_fills_the_gap_in_order_without_an_alarm(app: App) -> None:
    for f in (shoe_ident(0, "b"), ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE)):
        assert await app._process_device(f)
    assert await app._process_device(DealerButton(PADS, 1, Button.NO_MORE_BETS))
    assert await app._process_device(card(2, "7D"))
    assert not await app._process_device(card(4, "3C"))  # 3 arrived with a bad checksum: dropped
    assert await app._process_device(card(3, "9S"))  # resent
    assert app.last_ack[SHOE] == 4
    assert [str(e.card) for e in journaled(app) if isinstance(e, CardDrawn)] == ["7D", "9S", "3C"]
    assert "SEQUENCE_GAP" not in outbox_codes(app)


# ------------------------------------------------------------------------------ the deal watchdog

async def test_the_deal_watchdog_is_a_journaled_tick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 7: two cards, then only heartbeats for minutes: no alarm. The app turns the elapsed time
    into a journaled Tick and the machine raises DEAL_STALLED (not holding)."""
    a = make_app(tmp_path / "j", extra="stall_seconds = 60")
    assert await a._process_device(DealerButton(PADS, 1, Button.NO_MORE_BETS))
    assert await a._process_device(card(1, "2C"))
    assert await a._process_device(card(2, "4H"))
    assert a.machine is not None
    due = a.machine.stall_due()
    assert due is not None
    await a._timer_step()
    assert not any(isinstance(e, Tick) for e in journaled(a))
    monkeypatch.setattr(app_module, "now_iso", lambda: due)
    await a._timer_step()
    assert isinstance(journaled(a)[-1], Tick)
    assert outbox_codes(a)[-1] == "DEAL_STALLED" and not a.machine.snapshot()["holds"]
    await a._timer_step()  # once per quiet spell
    assert sum(isinstance(e, Tick) for e in journaled(a)) == 1
    assert equals_replay(a)
    assert a.journal is not None
    a.journal.close()


# ------------------------------------------------------------------------------ journal outage on record

async def test_a_journal_outage_is_published_once_from_memory_and_journaled_when_writable(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    assert app.journal is not None and app.relay is not None
    published: list[bytes] = []
    monkeypatch.setattr(app.relay, "publish_alarm", published.append)
    real = app.journal.append
    failing = {"on": True}

    def append(inp: Any, emits: Any) -> Any:
        if failing["on"]:
            raise JournalUnwritable("disk full")
        return real(inp, emits)

    monkeypatch.setattr(app.journal, "append", append)
    for seq in range(1, 4):
        assert not await app._process_device(SpotChanged(PADS, 1, "1P", SpotState.PLACED, 100 * seq))
    assert len(published) == 1  # one from-memory alarm per failing spell, not one per input
    assert json.loads(published[0])["code"] == "INTERNAL_ERROR" and json.loads(published[0])["seq"] == 0
    failing["on"] = False
    assert await app._process_device(SpotChanged(PADS, 1, "1P", SpotState.PLACED, 300))
    outage = [e for e in journaled(app) if isinstance(e, JournalOutage)]
    assert len(outage) == 1 and outage[0].failures == 3
    assert outbox_codes(app)[-1] == "INTERNAL_ERROR"
    assert equals_replay(app)


async def test_a_frame_whose_journaling_failed_is_applied_by_the_host_when_no_resend_comes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A device that does not resend (acknowledging is optional): the frame was received intact, so once
    RESEND_WAIT has passed the host journals it itself, then what was held back behind it."""
    clock = Clock()
    a = make_app(tmp_path / "j", clock)
    assert a.journal is not None
    for f in (shoe_ident(0, "b"), ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE)):
        assert await a._process_device(f)
    real = a.journal.append
    calls = {"n": 0}

    def full_once(inp: Any, emits: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise JournalUnwritable("disk full")
        return real(inp, emits)

    monkeypatch.setattr(a.journal, "append", full_once)
    assert not await a._process_device(card(2, "7D"))
    assert not await a._process_device(card(3, "9S"))  # held back behind it
    await a._timer_step()
    assert a.last_ack[SHOE] == 1
    clock.now += RESEND_WAIT + 0.1
    await a._timer_step()
    assert [str(e.card) for e in journaled(a) if isinstance(e, CardDrawn)] == ["7D", "9S"]
    assert a.last_ack[SHOE] == 3 and "SEQUENCE_GAP" not in outbox_codes(a)
    assert equals_replay(a)
    a.journal.close()
