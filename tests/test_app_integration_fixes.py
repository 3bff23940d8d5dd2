"""Integration fixes found in review: the app uses the machine's public API only, prunes the
journal, refuses to settle on a damaged journal; the machine's sequence check handles the wrap."""

from __future__ import annotations

import asyncio
import contextlib
import random
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from link_support import wait_until
from machine_support import SHOE, Driver, baccarat_config
from test_link_reack import PtyDevice

from tablesense.daemon.app import PRUNE_EVERY_ROUNDS, App
from tablesense.daemon.broker import MosquittoBroker
from tablesense.daemon.config import ConfigError, parse_config
from tablesense.daemon.journal import audit, load_key, open_for_recall
from tablesense.daemon.journal.seal import UNIT_BLOCKS
from tablesense.daemon.rules.baccarat import next_card_hand
from tablesense.daemon.rules.cards import Card, Rank, Suit
from tablesense.daemon.table.machine import Phase
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    DealerButton,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)
from tablesense.simulators.dealer import sim_config_toml

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


@contextlib.asynccontextmanager
async def _running(app: App) -> AsyncIterator[App]:
    """``app`` running in-process; stopped (exit status 0) on leaving."""
    task = asyncio.create_task(app.run())
    try:
        await wait_until(lambda: app.links.get("shoe") is not None
                         and app.links["shoe"].state is LinkState.ONLINE, "shoe link online")
        yield app
    finally:
        app.stop()
        assert await task == 0


async def test_after_a_restart_resent_frames_are_answered_with_ak_for_the_last_journaled(
        tmp_path: Path) -> None:
    """A device that lost the AKs resends frames the journal already holds: the restarted app drops them
    and answers with AK for the last number journaled (docs/protocol.md §3), not for each resent one."""
    dev = PtyDevice()
    dead = MosquittoBroker(tmp_path / "never-started")  # startup waits on no broker
    text = sim_config_toml("baccarat", urls={"shoe": dev.path, "pads": str(tmp_path / "no-pads")},
                           host=dead.host, port=dead.port, journal=tmp_path / "journal")
    config = parse_config(text)
    try:
        async with _running(App(config)):
            for seq, card in ((0, "QH"), (1, "QS"), (2, "3D")):
                dev.send(seq, card)
            await wait_until(lambda: 2 in dev.poll(), "frames journaled and acknowledged")
        dev.acks.clear()
        async with _running(App(config)) as again:
            dev.send(1, "QS")  # AK 1 and 2 were lost: the device resends both
            dev.send(2, "3D")
            dev.send(3, "8C")
            await wait_until(lambda: dev.poll()[-1:] == [3], "AK for the new frame")
        # one AK per resend when each frame is taken alone; frames that arrive together are one group
        # commit with one cumulative AK: never AK 1, never below the last number journaled
        assert dev.acks[-1] == 3 and all(a in (2, 3) for a in dev.acks), dev.acks
        assert again.dropped_resends == 2
    finally:
        dev.close()


ROUNDS_PER_SHOE = 12


class ScriptedTable:
    """Baccarat rounds as device events (the events a shoe and bet pads would send), fed straight to the
    app's input queue: a bet, no more bets, the cards the rules call for, round-end, chips cleared; a new
    shoe every :data:`ROUNDS_PER_SHOE` rounds with the cut card before the shoe's last round."""

    def __init__(self, app: App, seed: int = 5) -> None:
        self.app = app
        self.rng = random.Random(seed)
        self.seq = {"shoe": 0, "pads": 0}
        self.fed = 0
        self.shoes = 0
        self.dealt: list[str] = []
        self._cards: list[Card] = []
        self._round = 0

    def _next(self, device: str) -> int:
        self.seq[device] += 1
        return self.seq[device]

    async def _put(self, event: object) -> None:
        await self.app.queue.put(event)  # type: ignore[arg-type]
        self.fed += 1

    async def new_shoe(self) -> None:
        self.shoes += 1
        self._round = 0
        self._cards = [Card(rank, suit) for rank in Rank for suit in Suit] * 8
        self.rng.shuffle(self._cards)
        await self._put(ShoeStatus("shoe", self._next("shoe"), ShoeStatusKind.NEW_SHOE))

    async def round(self) -> None:
        if self.shoes == 0 or self._round == ROUNDS_PER_SHOE:
            await self.new_shoe()
        self._round += 1
        if self._round == ROUNDS_PER_SHOE:  # this round is the shoe's last
            await self._put(ShoeStatus("shoe", self._next("shoe"), ShoeStatusKind.CUT_CARD))
        await self._put(SpotChanged("pads", self._next("pads"), "1P", SpotState.PLACED, 2000))
        await self._put(DealerButton("pads", self._next("pads"), Button.NO_MORE_BETS))
        cards: list[Card] = []
        while next_card_hand(cards) is not None:
            cards.append(self._cards.pop())
            await self._put(CardDrawn("shoe", self._next("shoe"), cards[-1]))
        await self._put(DealerButton("pads", self._next("pads"), Button.ROUND_END))
        await self._put(SpotChanged("pads", self._next("pads"), "1P", SpotState.EMPTY, None))
        self.dealt.append(f"{self.shoes}-{self._round}")

    async def settled(self) -> None:
        """Every input fed is journaled and every message acknowledged by the broker."""
        journal = self.app.journal
        assert journal is not None
        await wait_until(lambda: self.app.queue.empty() and self.app.inputs >= self.fed
                         and journal.pending_count() == 0, "inputs journaled and delivered", bound=60)


def _kept(directory: Path) -> tuple[int, int, int]:
    """Closed blocks (about one per round), messages and inputs the journal holds (audited through a
    read-only connection, as ``tablesense verify`` reads it)."""
    report = audit(directory, load_key())
    assert report.ok, report.failure
    return report.blocks, report.messages, report.inputs


async def test_a_long_run_keeps_the_journal_bounded_and_recall_has_the_last_10_rounds(tmp_path: Path) -> None:
    """150 rounds over 13 shoes with ``retention_rounds = 10``, ``retention_days = 0``: the app prunes every
    10 completed rounds, so what the journal holds stops growing (bounded by the retention, the replay's
    two shoes and the pruning interval; sizes taken after 48, 96 and 144 rounds, the same point of a
    shoe), and recall still shows the current round and the 9 before it."""
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    try:
        text = sim_config_toml("baccarat", urls={"shoe": str(tmp_path / "no-shoe"),
                                                 "pads": str(tmp_path / "no-pads")},
                               host=broker.host, port=broker.port, journal=tmp_path / "journal")
        text = text.replace('[journal]\n', '[journal]\nretention_rounds = 10\nretention_days = 0\n')
        config = parse_config(text)
        assert (config.journal.retention_rounds, config.journal.retention_days) == (10, 0)
        app = App(config)
        app.open()
        task = asyncio.create_task(app.run())
        table = ScriptedTable(app)
        # rounds the journal may hold: retention, the replay's two shoes, the pruning interval, and an
        # archive unit of UNIT_BLOCKS rounds (retention deletes whole units)
        bound = 10 + 2 * ROUNDS_PER_SHOE + PRUNE_EVERY_ROUNDS + UNIT_BLOCKS + 1
        sizes = []
        try:
            for n in range(150):
                await table.round()
                # as a table does (its devices wait for acknowledgements): a flood of whole rounds is
                # committed in large groups and the maintenance, which gives way to appends, lags
                await table.settled()
                if (n + 1) % (4 * ROUNDS_PER_SHOE) == 0:  # the same point of a shoe: 48, 96, 144
                    await wait_until(lambda: app.maintenance_idle, "journal maintenance idle")
                    sizes.append(_kept(tmp_path / "journal"))
            await table.settled()
        finally:
            app.stop()
            assert await task == 0
        written = app.journal.last_seq if app.journal else 0
    finally:
        broker.stop()
    print(f"kept (rounds, outbox rows, inputs) after 48/96/144 rounds: {sizes}; "
          f"outbox rows written {written}; prunes {app.prunes}")
    assert app.prunes >= 14
    assert all(rounds <= bound for rounds, _, _ in sizes), sizes
    # the same point of a shoe, 96 rounds later: no more outbox rows and inputs kept (a pad input of a
    # pruned round once leaked, one per shoe)
    # (compared from 96 rounds on: retention deletes whole archive units, the first once 48 rounds are held)
    assert sizes[2][1] <= sizes[1][1] + 2 and sizes[2][2] <= sizes[1][2] + 2, sizes
    assert sizes[2][1] < written / 2
    with open_for_recall(tmp_path / "journal") as reader:
        records = reader.rounds(10)
    assert [r.round_id for r in records[:-1]] == table.dealt[-9:]
    assert all(r.status == "complete" and r.settlements for r in records[:-1])
    assert records[-1].status == "open"  # the current round: opened for betting after the last round-end


def test_retention_rounds_below_recall_is_a_config_error() -> None:
    text = sim_config_toml("baccarat", urls={"shoe": "/dev/null"}, host="127.0.0.1", port=1883,
                           journal="/tmp/never-created")
    with pytest.raises(ConfigError, match=r"journal\.retention_rounds.*at least 10"):
        parse_config(text.replace('[journal]\n', '[journal]\nretention_rounds = 9\n'))
    with pytest.raises(ConfigError, match=r"journal\.retention_days"):
        parse_config(text.replace('[journal]\n', '[journal]\nretention_days = -1\n'))
