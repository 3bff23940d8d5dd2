"""Test support for the floor service: throwaway PostgreSQL databases, a simulated table that speaks the
batch contract (status birth fields, ``cmd/replay`` by seq) on a real broker, and an MQTT-aware loopback
proxy that makes chosen messages vanish between the broker and the floor.

* :func:`pg_url` creates a database ``floor_test_<random>`` on the machine's PostgreSQL (127.0.0.1:5432,
  trust auth, user postgres) and drops it afterwards (the ``db_url`` fixture of tests/conftest.py gives
  each test such a database and an SQLite file in turn).
* :class:`ContractTable` publishes like ``tablesense run`` does (journaled messages with a table-wide
  ``seq`` and a stable ``msg_id`` ``{table}-{epoch}-{seq}-{random}``, the retained status with ``epoch``,
  ``last_seq``, ``chain_seq``, ``chain_head``, ``instance``), built from the daemon's own message Structs and
  settled by the rules core; it keeps its own journal and answers ``cmd/replay`` as the contract says
  (original payload bytes on ``replay/{channel}``, ``seq A..B no longer held (pruned)`` for pruned seqs).
  ``drop``: seqs journaled but never published (lost on the way).
* :class:`DropProxy` sits between the floor and the broker; for a PUBLISH from the broker that
  ``swallow`` selects it answers the broker's PUBLISH with a PUBACK itself and never forwards it: the
  broker takes it as delivered, the floor never sees it (as when a message is lost for good).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import secrets
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiomqtt
import msgspec
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tablesense.daemon.messages import (
    FloorRound,
    Message,
    RoundResults,
    RoundState,
    SettlementMessage,
    SettlementRecord,
    TableInfo,
    WagerInfo,
    WagerRecord,
    encode_message,
)
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.games import get_game
from tablesense.daemon.rules.money import CommissionRule
from tablesense.daemon.rules.settlement import Bet, Hand, Wager

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@contextlib.asynccontextmanager
async def pg_url() -> AsyncIterator[str]:
    """A fresh PostgreSQL database for one test; dropped (connections terminated) afterwards."""
    import psycopg

    name = f"floor_test_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(PG_ADMIN, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        async with await psycopg.AsyncConnection.connect(PG_ADMIN, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def ts_at(n: int) -> str:
    """A message time: 2026-12-01 12:00:00 UTC plus ``n`` seconds."""
    h, rest = divmod(n, 3600)
    m, s = divmod(rest, 60)
    return f"2026-12-01T{12 + h:02d}:{m:02d}:{s:02d}.000Z"


@dataclass
class JournalRow:
    """One journaled message of the :class:`ContractTable`."""

    seq: int
    msg_id: str
    channel: str
    payload: bytes
    retain: bool


@dataclass
class ContractTable:
    """A simulated baccarat table speaking the contract on a real broker (module docstring)."""

    host: str
    port: int
    table: str
    prefix: str = "tablesense"
    seed: int = 1
    epoch: str = field(default_factory=lambda: secrets.token_hex(4))
    decks: int = 8
    drop: set[int] = field(default_factory=set)
    journal: list[JournalRow] = field(default_factory=list)
    pruned_below: int = 1
    replays: list[tuple[int, int]] = field(default_factory=list)
    clock: int = 0
    shoe: int = 1
    round: int = 0
    instance: str = field(default_factory=lambda: secrets.token_hex(8))
    live_clock: bool = False
    _client: aiomqtt.Client | None = None
    _task: asyncio.Task[None] | None = None
    _chain: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.rules = get_game("baccarat").rules(self.decks, {"perfect_pairs": "A"},
                                                CommissionRule(CommissionRule.parse_rate("5%")))

    def stamp(self) -> str:
        """The time of the next message: now (``live_clock``) or the table's simulated clock."""
        if self.live_clock:
            from datetime import UTC, datetime
            return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return ts_at(self.clock)

    # -- journal ------------------------------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        return self.journal[-1].seq if self.journal else 0

    def chain_head(self) -> tuple[int, str]:
        """(chain seq, head) of a keyed-hash chain over the journaled payloads (the contract's shape)."""
        return (self.last_seq, self._chain[-1]) if self._chain else (0, "0" * 64)

    def _append(self, channel: str, msg: Message, retain: bool = False) -> JournalRow:
        seq = self.last_seq + 1
        msg_id = f"{self.table}-{self.epoch}-{seq}-{secrets.token_hex(4)}"
        chain_seq, head = self.chain_head()
        if isinstance(msg, FloorRound):
            body = msgspec.json.decode(encode_message(msgspec.structs.replace(msg, seq=seq, msg_id=msg_id)))
            body |= {"chain_seq": chain_seq, "chain_head": head}
            payload = msgspec.json.encode(body)
        else:
            payload = encode_message(msgspec.structs.replace(msg, seq=seq, msg_id=msg_id))
        prev = self._chain[-1] if self._chain else "0" * 64
        self._chain.append(hashlib.sha256(prev.encode() + payload).hexdigest())
        row = JournalRow(seq, msg_id, channel, payload, retain)
        self.journal.append(row)
        return row

    def status_payload(self, state: str = "online") -> bytes:
        chain_seq, head = self.chain_head()
        return json.dumps({"schema": "tablesense.status", "version": 1, "table": self.table, "seq": 0,
                           "msg_id": "", "ts": self.stamp(), "state": state, "detail": "",
                           "software": "0.1.0", "instance": self.instance, "config_digest": "ab" * 32,
                           "epoch": self.epoch, "last_seq": self.last_seq, "chain_seq": chain_seq,
                           "chain_head": head}).encode()

    # -- MQTT ---------------------------------------------------------------------------------------
    def topic(self, channel: str) -> str:
        return f"{self.prefix}/{self.table}/{channel}"

    async def start(self) -> None:
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 3600
        will = aiomqtt.Will(self.topic("status"), self.status_payload("offline"), qos=1, retain=True)
        self._client = aiomqtt.Client(self.host, self.port, identifier=f"table-{self.table}-{self.instance}",
                                      protocol=aiomqtt.ProtocolVersion.V5, clean_start=True, will=will)
        await self._client.__aenter__()
        await self._client.subscribe(self.topic("cmd/+"), qos=1)
        self._task = asyncio.create_task(self._commands())
        await self.publish_status()

    async def stop(self, state: str | None = "offline") -> None:
        if self._client is None:
            return
        if state is not None:
            with contextlib.suppress(aiomqtt.MqttError):
                await self._client.publish(self.topic("status"), self.status_payload(state), qos=1,
                                           retain=True)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._client.__aexit__(None, None, None)
        self._client = None

    async def publish_status(self, state: str = "online") -> None:
        assert self._client is not None
        await self._client.publish(self.topic("status"), self.status_payload(state), qos=1, retain=True)

    async def _publish(self, row: JournalRow, replay: bool = False) -> None:
        assert self._client is not None
        channel = f"replay/{row.channel}" if replay else row.channel
        await self._client.publish(self.topic(channel), row.payload, qos=1, retain=row.retain and not replay)

    async def emit(self, channel: str, msg: Message, retain: bool = False) -> JournalRow:
        """Journal ``msg`` and publish it (unless its seq is in :attr:`drop`)."""
        row = self._append(channel, msg, retain)
        if row.seq not in self.drop:
            await self._publish(row)
        return row

    async def _commands(self) -> None:
        assert self._client is not None
        async for m in self._client.messages:
            if not str(m.topic).endswith("/cmd/replay"):
                continue
            body = json.loads(bytes(m.payload))  # type: ignore[arg-type]
            lo, hi = int(body["args"]["from_seq"]), int(body["args"]["to_seq"])
            self.replays.append((lo, hi))
            rows = [r for r in self.journal if lo <= r.seq <= hi and r.seq >= self.pruned_below]
            reason = f"replaying {len(rows)} messages seq {lo}..{hi}"
            if lo < self.pruned_below:
                reason += f"; seq {lo}..{min(hi, self.pruned_below - 1)} no longer held (pruned)"
            props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            if m.properties is not None and getattr(m.properties, "CorrelationData", None):
                props.CorrelationData = m.properties.CorrelationData
            reply = getattr(m.properties, "ResponseTopic", None) if m.properties is not None else None
            if reply:
                await self._client.publish(reply, json.dumps({"ok": True, "reason": reason,
                                                              "command": "replay"}).encode(),
                                           qos=1, properties=props)
            for r in rows:
                await self._publish(r, replay=True)

    # -- the game -----------------------------------------------------------------------------------
    async def open_table(self) -> None:
        """The retained table info (as at start and at every new shoe)."""
        info = TableInfo(table=self.table, ts=self.stamp(), shoe=self.shoe, game="baccarat",
                         decks=self.decks, currency="EUR", minor_unit=2, commission="5%",
                         wagers=(WagerInfo(bet="perfect_pairs", label="Perfect Pairs", paytable_name="A",
                                           min=500, max=20000),),
                         main_wagers=(WagerInfo(bet="player", label="Player", min=1000, max=500000),
                                      WagerInfo(bet="banker", label="Banker", min=1000, max=500000)))
        await self.emit("info", info, retain=True)

    def _cards(self) -> list[Card]:
        from tablesense.daemon.rules.baccarat import next_card_hand

        ranks = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
        deck = [Card.parse(f"{r}{s}") for r in ranks for s in "SHDC"]
        cards: list[Card] = []
        while next_card_hand(cards) is not None:
            cards.append(self.rng.choice(deck))
        return cards

    async def deal_round(self, wagers: list[tuple[str, str, str | None, int]] | None = None,
                         void: bool = False) -> list[JournalRow]:
        """One baccarat round: round states, one settlement per wager, results, the floor record.
        ``wagers``: ``(spot, bet, hand, stake)``; default Banker 10000 on spot 1 and Perfect Pairs 500 on
        the Player (spot 2). ``void``: the round is voided (every wager returned). Returns its rows."""
        self.round += 1
        self.clock += 30
        ts = self.stamp()
        wagers = wagers or [("1", "banker", None, 10000), ("2", "perfect_pairs", "player", 500)]
        rows = [await self.emit("round", RoundState(table=self.table, ts=ts, shoe=self.shoe, round=self.round,
                                                    game="baccarat", phase="dealing"), retain=True)]
        cards = self._cards()
        ws = [Wager(spot, Bet(bet), stake, Hand(hand) if hand else None) for spot, bet, hand, stake in wagers]
        settled = get_game("baccarat").settle(cards, ws, self.rules)
        records = []
        for s in settled:
            outcome, category, net, odds, comm = (
                ("void", "void", 0, None, 0) if void else
                (s.outcome.value, s.category, s.net, str(s.odds) if s.odds else None, s.commission))
            seat = s.wager.spot
            msg = SettlementMessage(table=self.table, ts=ts, shoe=self.shoe, round=self.round,
                                    spot=s.wager.spot,
                                    seat=seat, bet=s.wager.bet.value,
                                    hand=s.wager.hand.value if s.wager.hand else None, stake=s.wager.stake,
                                    outcome=outcome, category=category, odds=odds, net=net, commission=comm)
            rows.append(await self.emit("settlements", msg))
            records.append(SettlementRecord(spot=msg.spot, seat=seat, bet=msg.bet, hand=msg.hand,
                                            stake=msg.stake,
                                            outcome=outcome, category=category, odds=odds, net=net,
                                            commission=comm, changed_after_lock=False, ts=ts))
        rows.append(await self.emit("results", RoundResults(table=self.table, ts=ts, shoe=self.shoe,
                                                            round=self.round, game="baccarat", void=void)))
        from tablesense.daemon.messages import CardRecord

        floor = FloorRound(table=self.table, ts=ts, shoe=self.shoe, round=self.round, game="baccarat",
                           void=void,
                           cards=tuple(CardRecord(index=i + 1, card=str(c), position=None, face_up=True,
                                                  status="dealt", ts=ts) for i, c in enumerate(cards)),
                           wagers=tuple(WagerRecord(spot=spot, seat=spot, bet=bet, hand=hand, stake=stake)
                                        for spot, bet, hand, stake in wagers),
                           settlements=tuple(records), opened_ts=ts, locked_ts=ts, completed_ts=ts)
        rows.append(await self.emit("floor/rounds", floor))
        rows.append(await self.emit("round", RoundState(table=self.table, ts=ts, shoe=self.shoe,
                                                        round=self.round, game="baccarat", phase="complete"),
                                    retain=True))
        return rows


# ---------------------------------------------------------------------------------------------- proxy


def _varint(data: bytes, i: int) -> tuple[int, int] | None:
    mult, value = 1, 0
    for _ in range(4):
        if i >= len(data):
            return None
        b = data[i]
        value += (b & 0x7F) * mult
        i += 1
        if not b & 0x80:
            return value, i
        mult *= 128
    raise ValueError("malformed MQTT remaining length")


class DropProxy:
    """Loopback proxy floor <-> broker that swallows chosen PUBLISH packets (module docstring).

    ``swallow(topic, payload) -> bool`` decides; MQTT v5 only (properties are skipped by their length).
    ``swallowed`` lists ``(topic, payload)`` of what vanished.
    """

    def __init__(self, host: str, port: int, swallow: Callable[[str, bytes], bool]) -> None:
        self.target = (host, port)
        self.swallow = swallow
        self.host = "127.0.0.1"
        self.port = 0
        self.swallowed: list[tuple[str, bytes]] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(*self.target)
        self._writers += [writer, up_w]
        lock = asyncio.Lock()
        for coro in (self._plain(reader, up_w, lock), self._filter(up_r, writer, up_w, lock)):
            t = asyncio.create_task(coro)
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _plain(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     lock: asyncio.Lock) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                async with lock:
                    writer.write(data)
                    await writer.drain()
        writer.close()

    async def _filter(self, reader: asyncio.StreamReader, client: asyncio.StreamWriter,
                      broker: asyncio.StreamWriter, lock: asyncio.Lock) -> None:
        buf = b""
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                buf += data
                out = b""
                while len(buf) >= 2:
                    got = _varint(buf, 1)
                    if got is None:
                        break
                    length, start = got
                    if len(buf) < start + length:
                        break
                    packet, buf = buf[:start + length], buf[start + length:]
                    if packet[0] >> 4 == 3 and (packet[0] >> 1) & 3 == 1:  # PUBLISH QoS 1
                        body = packet[start:]
                        tlen = int.from_bytes(body[:2], "big")
                        topic = body[2:2 + tlen].decode()
                        pid = body[2 + tlen:4 + tlen]
                        plen, pstart = _varint(body, 4 + tlen) or (0, 4 + tlen)
                        payload = body[pstart + plen:]
                        if self.swallow(topic, payload):
                            self.swallowed.append((topic, payload))
                            async with lock:
                                broker.write(b"\x40\x02" + pid)  # PUBACK, success
                                await broker.drain()
                            continue
                    out += packet
                if out:
                    client.write(out)
                    await client.drain()
        client.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in self._writers:
            with contextlib.suppress(Exception):
                w.transport.abort()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def wait_for(pred: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> None:
    """Await ``pred()`` (sync or async) true; ``AssertionError`` naming ``what`` after ``timeout`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = pred()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(step)
