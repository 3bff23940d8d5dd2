"""Scripted table traffic for the journal and recall tests: real inputs (drivers.events, Command) and the
real message Structs the state machine emits, without depending on the machine itself.

A baccarat round here is: a bet placed on the pad, four cards P, B, P, B (the public round state after
each, the Player Pair settlement once the fourth card is known), then the dealer's round-end button
with the results, the floor record and the next round opening. ``Traffic`` keeps the clock and the
device sequence numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tablesense.daemon.messages import (
    AlarmMessage,
    AlarmRecord,
    BaccaratOutcome,
    CardRecord,
    DeviceStatus,
    FloorRound,
    PublicCard,
    RoundResults,
    RoundState,
    SettlementMessage,
    SettlementRecord,
    WagerRecord,
)
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.table.inputs import RESEND_WINDOW, Channel, Command, Emit, TimedInput
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    DealerButton,
    DeviceState,
    Heartbeat,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)

TABLE = "bac-7"
SHOE = "shoe"
PAD = "pad"
Step = tuple[TimedInput, list[Emit]]


@dataclass
class Traffic:
    """Generates inputs with their emits; ``seq`` counters per device, a clock stepping 1 s per input."""

    table: str = TABLE
    start: datetime = field(default_factory=lambda: datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
    shoe: int = 0
    round: int = 0
    _tick: int = 0
    _dev_seq: dict[str, int] = field(default_factory=dict)

    def ts(self) -> str:
        self._tick += 1
        t = self.start + timedelta(seconds=self._tick)
        return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def next_seq(self, device: str) -> int:
        self._dev_seq[device] = self._dev_seq.get(device, 0) + 1
        return self._dev_seq[device]

    def state(self, ts: str, phase: str, cards: tuple[PublicCard, ...] = (), void: bool = False) -> Emit:
        return Emit(Channel.ROUND, RoundState(table=self.table, ts=ts, shoe=self.shoe, round=self.round,
                                              game="baccarat", phase=phase, cards=cards, void=void),
                    retain=True)

    def new_shoe(self) -> list[Step]:
        """A new shoe: the shoe's NEW_SHOE event, round 1 opens for betting."""
        self.shoe += 1
        self.round = 1
        ts = self.ts()
        return [(TimedInput(ts, ShoeStatus(SHOE, self.next_seq(SHOE), ShoeStatusKind.NEW_SHOE)),
                 [self.state(ts, "betting")])]

    def heartbeat(self, device: str = SHOE) -> Step:
        return (TimedInput(self.ts(), Heartbeat(device, self.next_seq(device))), [])

    def quiet(self, beats: int = 2 * RESEND_WINDOW) -> list[Step]:
        """A quiet spell (the dealer changing the shoe, say): ``beats`` heartbeats from the shoe and from
        the pad, as a device sends one whenever quiet for 2 s (docs/protocol.md §3). After a replay's start,
        enough of them that a rebuilt machine no longer needs the devices' frames from before it (the
        journal keeps a device's last frames while it has sent fewer: ``Journal.devices_before_replay``)."""
        return [self.heartbeat(device) for _ in range(beats) for device in (SHOE, PAD)]

    def device_state(self, device: str, state: LinkState) -> Step:
        ts = self.ts()
        return (TimedInput(ts, DeviceState(device, state)),
                [Emit(Channel.DEVICE, DeviceStatus(table=self.table, ts=ts, name=device, state=str(state)),
                      device=device, retain=True)])

    def baccarat_round(self, cards: tuple[str, str, str, str] = ("QH", "QS", "3D", "8C"),
                       stake: int = 2500, alarm: bool = False, void: bool = False) -> list[Step]:
        """One complete round of the current shoe (then the next round opens)."""
        steps: list[Step] = []
        ts = self.ts()
        bet = SpotChanged(PAD, self.next_seq(PAD), "P1-PP", SpotState.PLACED, stake)
        steps.append((TimedInput(ts, bet), []))
        positions = ("player", "banker", "player", "banker")
        public: list[PublicCard] = []
        records: list[CardRecord] = []
        for i, text in enumerate(cards, start=1):
            ts = self.ts()
            seq = self.next_seq(SHOE)
            public.append(PublicCard(index=i, card=text, position=positions[i - 1]))
            records.append(CardRecord(index=i, card=text, position=positions[i - 1], face_up=True,
                                      status="dealt", ts=ts, device=SHOE, device_seq=seq))
            emits = [self.state(ts, "dealing", tuple(public))]
            if i == 4:
                emits.append(self.settlement(ts, stake, cards))
                if alarm:
                    emits.append(Emit(Channel.ALARMS, AlarmMessage(
                        table=self.table, ts=ts, shoe=self.shoe, round=self.round, alarm_id=f"{self.shoe}.1",
                        code="PAST_POSTING", severity="warning", text="spot P1-PP changed after lock",
                        spot="P1-PP")))
            steps.append((TimedInput(ts, CardDrawn(SHOE, seq, Card.parse(text))), emits))
        ts = self.ts()
        pair = Card.parse(cards[0]).rank == Card.parse(cards[2]).rank
        settled = self.settlement(ts, stake, cards).message
        assert isinstance(settled, SettlementMessage)
        floor = FloorRound(
            table=self.table, ts=ts, shoe=self.shoe, round=self.round, game="baccarat", void=void,
            cards=tuple(records), wagers=(WagerRecord(spot="P1-PP", seat="1", bet="player_pair", hand=None,
                                                       stake=stake),),
            settlements=(SettlementRecord(spot="P1-PP", seat="1", bet="player_pair", hand=None, stake=stake,
                                          outcome=settled.outcome, category=settled.category,
                                          odds=settled.odds, net=settled.net, commission=0,
                                          changed_after_lock=alarm, ts=records[-1].ts),),
            alarms=(AlarmRecord(alarm_id=f"{self.shoe}.1", code="PAST_POSTING", severity="warning",
                                text="spot P1-PP changed after lock", state="raised", held=False,
                                ts=records[-1].ts, spot="P1-PP"),) if alarm else (),
            baccarat=BaccaratOutcome(player=(cards[0], cards[2]), banker=(cards[1], cards[3]), player_total=3,
                                     banker_total=8, winner="banker", player_natural=False,
                                     banker_natural=True, player_pair=pair, banker_pair=False),
            opened_ts=steps[0][0].ts, locked_ts=records[0].ts, completed_ts=ts)
        results = RoundResults(table=self.table, ts=ts, shoe=self.shoe, round=self.round, game="baccarat",
                               void=void, baccarat=floor.baccarat)
        emits = [Emit(Channel.RESULTS, results), Emit(Channel.FLOOR_ROUNDS, floor)]
        self.round += 1
        emits.append(self.state(ts, "betting"))
        steps.append((TimedInput(ts, DealerButton(PAD, self.next_seq(PAD), Button.ROUND_END)), emits))
        return steps

    def settlement(self, ts: str, stake: int, cards: tuple[str, ...]) -> Emit:
        pair = Card.parse(cards[0]).rank == Card.parse(cards[2]).rank
        return Emit(Channel.SETTLEMENTS, SettlementMessage(
            table=self.table, ts=ts, shoe=self.shoe, round=self.round, spot="P1-PP", seat="1",
            bet="player_pair", hand=None, stake=stake, outcome="win" if pair else "lose",
            category="pair" if pair else "no_pair", odds="11 to 1" if pair else None,
            net=stake * 11 if pair else -stake))

    def command(self, name: str = "ack_alarm", **args: str) -> Step:
        return (TimedInput(self.ts(), Command(name, dict(args), operator="pitboss")), [])

    def open_blackjack_round(self) -> list[Step]:
        """A blackjack round left open after the initial deal: 3 public cards and the dealer's hole card."""
        steps: list[Step] = []
        public: list[PublicCard] = []
        for i, (text, pos) in enumerate((("8S", "1"), ("6D", "dealer"), ("8H", "1"), ("KC", "dealer")),
                                        start=1):
            ts = self.ts()
            seq = self.next_seq(SHOE)
            if i < 4:  # the 4th card is the dealer's hole card: face down, never public
                public.append(PublicCard(index=i, card=text, position=pos))
            steps.append((TimedInput(ts, CardDrawn(SHOE, seq, Card.parse(text))),
                          [Emit(Channel.ROUND, RoundState(table=self.table, ts=ts, shoe=self.shoe,
                                                          round=self.round, game="blackjack", phase="dealing",
                                                          cards=tuple(public)), retain=True)]))
        return steps


class RealTable:
    """The daemon's real messages for realistic rounds: a table config from ``deploy/examples`` (baccarat:
    17 spots), the real :class:`~daemon.table.machine.TableMachine`, and the simulators' shoe and bet
    pads, whose frames go through the real protocol codec. ``steps()`` yields what the app journals:
    ``(TimedInput, emits)`` per input (a ``TableStart`` first).

    ``spots``: bets per round (default: every spot of the config). ``heartbeat_every``: seconds between
    each device's heartbeat frames (0: none); ``round_seconds``: the simulated length of a round (the
    clock of the inputs, so heartbeats fall between them as at a live table).
    """

    def __init__(self, game: str = "baccarat", *, seed: int = 7, table: str = "bac-01",
                 spots: int | None = None, heartbeat_every: float = 0.0, round_seconds: float = 45.0,
                 start: datetime | None = None) -> None:
        import random

        from tablesense.daemon.config import parse_config
        from tablesense.daemon.table.machine import TableMachine
        from tablesense.drivers.protocols import get_codec
        from tablesense.simulators.dealer import sim_config_toml
        from tablesense.simulators.pads import VirtualPads
        from tablesense.simulators.shoe import VirtualShoe

        self.config = parse_config(sim_config_toml(game, urls={"shoe": "/dev/null", "pads": "/dev/null"},
                                                   host="127.0.0.1", port=1883, journal="/nonexistent",
                                                   table=table))
        self.machine = TableMachine(self.config)
        self.rng = random.Random(seed)
        self.shoe = VirtualShoe(self.config.shoe_decks, seed=seed, burn="rule" if game != "uth" else 0,
                                cut_card_at="default")
        self.pads = VirtualPads(list(self.config.spots), rfid=True)
        codec = get_codec("tsref")
        self._codecs = {"shoe": codec("shoe"), "pads": codec("pads")}
        self.bets = list(self.config.spots)[:spots] if spots is not None else list(self.config.spots)
        self.heartbeat_every = heartbeat_every
        self.round_seconds = round_seconds
        self.clock = start or datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
        self._next_beat = self.clock
        self._started = False
        self.rounds = 0

    def _ts(self) -> str:
        return self.clock.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _apply(self, event: object) -> Step:
        inp = TimedInput(self._ts(), event)
        return inp, list(self.machine.handle(inp))

    def _frames(self, device: str, make: Callable[[], bytes], seconds: float) -> list[Step]:
        """Let ``seconds`` pass (heartbeats), then the frames ``make()`` returns, decoded by the codec."""
        out = self._beats(seconds)
        for event in self._codecs[device].feed(make()):
            self.clock += timedelta(milliseconds=20)
            out.append(self._apply(event))
        return out

    def _beats(self, seconds: float) -> list[Step]:
        self.clock += timedelta(seconds=seconds)
        out: list[Step] = []
        if self.heartbeat_every <= 0:
            return out
        while self._next_beat <= self.clock:
            for device, model in (("shoe", self.shoe), ("pads", self.pads)):
                for event in self._codecs[device].feed(model.heartbeat()):
                    out.append(self._apply(event))
            self._next_beat += timedelta(seconds=self.heartbeat_every)
        return out

    def round(self) -> list[Step]:
        """One round: bets on every chosen spot, no more bets, the cards the drawing rules call for,
        round end, chips cleared (a new shoe first when the shoe in play is nearly out)."""
        from tablesense.daemon.rules.baccarat import next_card_hand
        from tablesense.daemon.table.inputs import TableStart
        from tablesense.drivers.events import CardDrawn as _CardDrawn

        steps: list[Step] = []
        if not self._started:
            steps.append(self._apply(TableStart()))
            steps += self._frames("shoe", lambda: self.shoe.identity() + self.shoe.start_shoe(), 1.0)
            self._started = True
        elif self.shoe.remaining < 12:
            steps += self._frames("shoe", self.shoe.start_shoe, 5.0)
        share = self.round_seconds / 10
        wagers = {spot: self.rng.choice((500, 1000, 2500, 5000)) for spot in self.bets}
        steps += self._frames("pads", lambda: self.pads.open_round(wagers), 4 * share)
        steps += self._frames("pads", self.pads.no_more_bets, share)
        cards: list[Card] = []
        while next_card_hand(cards) is not None:
            drawn = self._frames("shoe", self.shoe.draw, share / 2)
            cards += [i.event.card for i, _ in drawn if isinstance(i.event, _CardDrawn)]
            steps += drawn
        steps += self._frames("pads", self.pads.round_end, share)
        steps += self._frames("pads", self.pads.clear, 2 * share)
        self.rounds += 1
        return steps


def dictionary_sample(size: int = 32 * 1024) -> bytes:
    """The bytes :mod:`daemon.journal.zdict` was made from (``python tests/journal_support.py``): rows of
    realistic baccarat rounds (a 17-spot table, mid-shoe) in the archive's order -- a few inputs of every
    kind, round states, settlements, results, then a floor record and a scoreboard last (deflate finds
    the dictionary's last bytes at the shortest distances). At most ``size`` bytes."""
    from tablesense.daemon.journal.codec import encode_event
    from tablesense.daemon.journal.seal import InputRow, MessageRow, encode_row

    table = RealTable(seed=11, heartbeat_every=2.0)
    steps: list[Step] = []
    for _ in range(30):
        steps = table.round()
    inputs: dict[str, bytes] = {}
    by_channel: dict[str, list[bytes]] = {}
    entry, seq = 50_000, 1_500_000
    for inp, emits in steps:
        entry += 1
        kind, payload = encode_event(inp.event)
        inputs.setdefault(f"{kind}{len(inputs) % 3}", encode_row(InputRow(entry, inp.ts, kind, payload)))
        for emit in emits:
            seq += 1
            msg_id = f"{table.config.table}-0a1b2c3d-{seq}-4e5f6a7b"
            import msgspec
            message = msgspec.structs.replace(emit.message, seq=seq, msg_id=msg_id)
            row = MessageRow(seq, entry, msg_id, str(emit.channel.value), emit.device, emit.retain, emit.qos,
                             msgspec.json.encode(message))
            by_channel.setdefault(str(emit.channel.value), []).append(encode_row(row))
    parts = list(inputs.values())[:12]
    parts += by_channel.get("round", [])[-2:] + by_channel.get("settlements", [])[:6]
    parts += by_channel.get("results", [])[-1:]
    parts += by_channel.get("floor/rounds", [])[-1:] + by_channel.get("scoreboard", [])[-1:]
    return b"".join(parts)[-size:]



# --- reading and tampering with a sealed journal, as tablesense verify and an attacker would ----------


def sealed_rows(directory: Path, key: bytes | None = None) -> list[Any]:
    """Every row the journal in ``directory`` holds, in chain order, each block verified against the chain
    (read-only connection; ``key``: the test session's key by default)."""
    return _sealed(directory, key)[0]


def sealed_messages(directory: Path, key: bytes | None = None) -> list[tuple[int, str, str, int]]:
    """``(seq, msg_id, channel, delivered)`` of every message the journal holds, from one verified
    snapshot (also while the daemon writes it). ``delivered``: the journal recorded the broker's
    acknowledgement (the daemon records them in batches, :data:`daemon.journal.store.MARK_DELAY`)."""
    from tablesense.daemon.journal.seal import MessageRow

    rows, pending = _sealed(directory, key)
    return [(r.seq, r.msg_id, r.channel, int(r.seq not in pending))
            for r in rows if isinstance(r, MessageRow)]


def _sealed(directory: Path, key: bytes | None) -> tuple[list[Any], set[int]]:
    from tablesense.daemon.journal import sealed_snapshot
    from tablesense.daemon.journal.key import load_key

    snap = sealed_snapshot(directory, load_key() if key is None else key)
    return snap.rows, snap.pending


def forge(directory: Path, change: Callable[[Any], Any], pack: Callable[[Any], bytes] | None = None) -> int:
    """What a person with the journal file but not the key can do to its rows: decode every stored row
    (raw or archived: the formats are public), pass it to ``change``, and store what it returns (a new row,
    or the same to keep it) re-encoded and, for archives, recompressed (with ``pack``, default
    ``pack_unit``) -- everything that can be recomputed without the key. Returns the number of rows
    changed. The hints (keyed) stay as they were."""
    import sqlite3

    from tablesense.daemon.journal import blocks as bk
    from tablesense.daemon.journal.seal import MessageRow, decode_row, encode_row, pack_unit, unpack_unit

    pack = pack or pack_unit

    conn = sqlite3.connect(directory / "journal.sqlite")
    changed = 0
    try:
        for table, col in (("log", "id"), ("outbox", "seq")):
            for key, blob in conn.execute(f"SELECT {col}, row FROM {table}").fetchall():
                row = decode_row(bytes(blob), table)
                new = change(row)
                if new != row:
                    conn.execute(f"UPDATE {table} SET row = ? WHERE {col} = ?", (encode_row(new), key))
                    changed += 1
        for (unit,) in conn.execute("SELECT DISTINCT unit FROM blocks WHERE unit != 0").fetchall():
            parts = conn.execute("SELECT part FROM archive WHERE id BETWEEN ? AND ? ORDER BY id",
                                 bk.archive_keys(unit)).fetchall()
            hints, rows = unpack_unit(b"".join(bytes(p[0]) for p in parts), "unit")
            new_rows = []
            for blob, row in rows:
                new = change(row)
                changed += new != row
                new_rows.append((encode_row(new) if new != row else blob, new))
            members = conn.execute("SELECT id, last_entry, first_seq, last_seq FROM blocks WHERE unit = ? "
                                   "ORDER BY id", (unit,)).fetchall()
            packed = []
            for bid, last_entry, first_seq, last_seq in members:
                mine = [(b, r) for b, r in new_rows
                        if (first_seq <= r.seq <= last_seq if isinstance(r, MessageRow)
                            else bid <= r.entry <= last_entry)]
                packed.append((bid, hints[bid], [b for b, r in mine if not isinstance(r, MessageRow)],
                               [(r.channel, b) for b, r in mine if isinstance(r, MessageRow)]))
            conn.execute("DELETE FROM archive WHERE id BETWEEN ? AND ?", bk.archive_keys(unit))
            conn.executemany("INSERT INTO archive VALUES (?, ?)", bk.archive_rows(unit, pack(packed)))
        conn.commit()
    finally:
        conn.close()
    return changed


def replace_json(row: Any, schema: str, match: Callable[[dict[str, Any]], bool],
                 update: dict[str, Any]) -> Any:
    """``row`` with its JSON payload's fields ``update``d when it is a ``schema`` message (or input kind)
    that ``match``es; else ``row`` itself."""
    import msgspec

    from tablesense.daemon.journal.seal import InputRow, MessageRow

    if isinstance(row, MessageRow | InputRow):
        body = msgspec.json.decode(row.payload)
        tag = body.get("schema") if isinstance(row, MessageRow) else row.kind
        if tag == schema and match(body):
            body.update(update)
            return msgspec.structs.replace(row, payload=msgspec.json.encode(body))
    return row


if __name__ == "__main__":  # regenerate the dictionary module (a new ZDICT_ID: old archives keep theirs)
    import base64
    import hashlib
    import sys
    import zlib

    sample = dictionary_sample()
    packed = base64.b64encode(zlib.compress(sample, 9)).decode()
    lines = "\n".join(f'    "{packed[i:i + 100]}"' for i in range(0, len(packed), 100))
    sys.stdout.write(f'_PACKED = (\n{lines}\n)\nSHA256 = "{hashlib.sha256(sample).hexdigest()}"\n'
                     f"SIZE = {len(sample)}\n")
