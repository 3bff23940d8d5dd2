"""The floor's MQTT side: subscribe to every table, store each message, acknowledge only after commit.

One connection per floor process: MQTT v5, a fixed client id (in production the broker user's name,
``floor-1``, ``floor-2`` ...), ``clean_start=False`` with a Session Expiry Interval (the broker keeps the
subscriptions and queues QoS 1 messages while the floor is away), QoS 1 subscriptions.

Exactly once at the database: paho's manual acknowledgement (``manual_ack``, paho-mqtt 2.x
``Client.ack(mid, qos)``; aiomqtt 2.5 does not wrap it, so the paho client inside it is used, set before
the connection so that no message queued in the session is acknowledged automatically). Messages are
taken in batches (up to ``batch_max``, whatever has arrived), stored in ONE database transaction
(:class:`~tablesense.daemon.floor.ingest.Ingestor`), and only after the commit is each PUBACK sent, in
the order the messages arrived (MQTT 5.0 §4.6). A crash or a lost connection before the commit leaves
them unacknowledged: the broker sends them again on the next connection of this session, and a message
already stored changes nothing (its ``msg_id`` is the primary key). A database that is down stops the
consumer (nothing acknowledged) and the batch is retried with backoff until it commits. A value the
database cannot hold (:class:`~tablesense.daemon.floor.store.BadValue`) is never retried: the ingest
quarantines its message, and should one get past it, the batch is stored one message at a time and the
message that fails alone is quarantined.

Subscriptions (``{p}`` the topic prefix): the table messages through the MQTT v5 shared subscription
``$share/{group}/{p}/+/{channel}`` for every journaled channel (several floor processes in one group
share the load; each message goes to one of them), and, for each process itself, ``{p}/+/replay/#``,
``{p}/+/status`` (retained; a shared subscription gets no retained messages) and its own replies
``{p}/+/reply/{client id}``. Against an MQTT 3.1.1 broker (the demo's in-process fallback) the same
filters without ``$share``.

Why replays are not shared: Mosquitto 2.0's ``acl_file`` does not check subscriptions at all (its
default ACL check allows every SUBSCRIBE; read access is checked per message at delivery), so any
client that can log in, a display's ``signage-<id>`` user too, can join the group
``$share/{group}/...`` and be handed its share of the floor's messages: the ones it may read it takes
from the floor, the others the broker drops. The seq audit (:mod:`.tracker`) finds those holes and asks
for them by ``cmd/replay`` (a few ranged requests); the replays come on a subscription of every floor
process's own, which nobody else can take from it (docs/security.md, "Shared subscriptions"). Every
floor process stores them; the second copy changes nothing (same ``msg_id``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

import aiomqtt
from aiomqtt.exceptions import MqttConnectError
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tablesense.daemon.floor.alarms import now_iso
from tablesense.daemon.floor.ingest import Incoming, Ingestor, Outcome
from tablesense.daemon.floor.store import BadValue, Database, DatabaseError, DatabaseUnavailable
from tablesense.daemon.floor.tracker import ReplayRequest, Tracker
from tablesense.daemon.logging import get_logger
from tablesense.daemon.mqtt import NODELAY
from tablesense.drivers.backoff import Backoff
from tablesense.drivers.waits import wait_at_most

__all__ = ["JOURNALED_CHANNELS", "NOTIFY_CHANNEL", "FloorConsumer", "FloorSettings", "subscriptions"]

log = get_logger(component="floor")

JOURNALED_CHANNELS = ("round", "results", "settlements", "alarms", "devices/+", "floor/rounds", "scoreboard",
                      "info")
"""Channel filters under ``{prefix}/+/`` of the messages the tables journal (shared by the floor
processes; their replays, ``replay/#``, are every process's own)."""

NOTIFY_CHANNEL = "tablesense_floor"
"""PostgreSQL NOTIFY channel: after each committed batch, ``{"tables": {table: [[epoch, min seq, max seq],
...]}, "at": iso}``, as several notifications when one would be too long (the floor page and bench_floor
listen)."""


@dataclass(frozen=True, slots=True)
class FloorSettings:
    """How the floor reaches the broker.

    ``client_id``: the session's fixed id (production: the broker user, ``floor-1``); ``group``: the
    shared-subscription group (every floor process of the floor uses the same); ``shared``: use
    ``$share`` (MQTT v5; off for 3.1.1); ``session_expiry``: seconds the broker keeps the session.
    ``batch_max``: most messages in one transaction.
    """

    host: str
    port: int
    client_id: str = "floor-1"
    prefix: str = "tablesense"
    group: str = "floor"
    shared: bool = True
    protocol: str = "5"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = None
    keepalive: int = 15
    session_expiry: int = 7 * 24 * 3600
    batch_max: int = 256
    backoff_min: float = 0.2
    backoff_max: float = 10.0


def subscriptions(s: FloorSettings, v5: bool) -> list[str]:
    """The topic filters of one floor process (module docstring)."""
    p = s.prefix.rstrip("/")
    shared = f"$share/{s.group}/" if (v5 and s.shared) else ""
    own = [f"{p}/+/replay/#", f"{p}/+/status", f"{p}/+/reply/{s.client_id}"]
    return [f"{shared}{p}/+/{ch}" for ch in JOURNALED_CHANNELS] + own


def _props(packet_type: int) -> Properties:
    return Properties(packet_type)  # type: ignore[no-untyped-call]


class FloorConsumer:
    """Runs the subscription (module docstring) until :meth:`stop`.

    ``db``: the floor database (migrated); ``tracker``: its replies are routed to
    :meth:`Tracker.on_reply`. ``on_commit(outcomes)``: called after each committed batch (tests, the page).
    Attributes: ``connected``, ``stored``, ``duplicates``, ``quarantined``, ``batches``, ``acked``,
    ``db_failures`` (batches retried because the database failed), ``protocol``.
    """

    def __init__(self, settings: FloorSettings, db: Database, ingestor: Ingestor | None = None,
                 tracker: Tracker | None = None,
                 on_commit: Callable[[list[Outcome]], Awaitable[None] | None] | None = None) -> None:
        self.settings = settings
        self.db = db
        self.ingestor = ingestor or Ingestor(settings.prefix, settings.client_id)
        self.tracker = tracker
        self.on_commit = on_commit
        self.protocol = "3.1.1" if settings.protocol.startswith("3") else "5"
        self._stopping = asyncio.Event()
        self._client: aiomqtt.Client | None = None
        self._reply_prefix = f"{settings.prefix.rstrip('/')}/"
        self._reply_suffix = f"/reply/{settings.client_id}"
        self.connected = False
        self.stored = self.duplicates = self.quarantined = self.batches = self.acked = 0
        self.db_failures = 0
        self.connects = 0

    # -- replay requests -----------------------------------------------------------------------------

    async def send_replay(self, r: ReplayRequest) -> None:
        """Publish ``cmd/replay`` for ``r`` (contract payload; MQTT v5 response topic, correlation data and
        a 30 s message expiry). Raises ``aiomqtt.MqttError`` when not connected."""
        client = self._client
        if client is None or not self.connected:
            raise aiomqtt.MqttError("not connected")
        p = self.settings.prefix.rstrip("/")
        reply = f"{p}/{r.table}{self._reply_suffix}"
        body = {"operator": self.settings.client_id, "command_id": r.command_id,
                "issued_at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "args": {"from_seq": r.from_seq, "to_seq": r.to_seq}}
        props = None
        if self.protocol == "5":
            props = _props(PacketTypes.PUBLISH)
            props.ResponseTopic = reply
            props.CorrelationData = r.command_id.encode()
            props.MessageExpiryInterval = 30
            props.ContentType = "application/json"
        else:
            body |= {"response_topic": reply, "correlation_data": r.command_id}
        await client.publish(f"{p}/{r.table}/cmd/replay", json.dumps(body).encode(), qos=1, retain=False,
                             properties=props, timeout=10)

    # -- the session ---------------------------------------------------------------------------------

    def _make_client(self, v5: bool) -> aiomqtt.Client:
        s = self.settings
        kwargs: dict[str, Any] = {}
        if v5:
            props = _props(PacketTypes.CONNECT)
            props.SessionExpiryInterval = s.session_expiry
            kwargs.update(protocol=aiomqtt.ProtocolVersion.V5, clean_start=False, properties=props)
        else:
            kwargs.update(protocol=aiomqtt.ProtocolVersion.V311, clean_session=False)
        client = aiomqtt.Client(s.host, s.port, identifier=s.client_id, username=s.username,
                                password=s.password, tls_context=s.tls, keepalive=s.keepalive, timeout=10,
                                socket_options=NODELAY, max_queued_incoming_messages=0, **kwargs)
        # Before connecting: messages the broker queued for this session arrive right after CONNACK.
        client._client.manual_ack_set(True)
        client.pending_calls_threshold = 10_000
        return client

    async def run(self) -> None:
        """Connect, subscribe, store and acknowledge; reconnect with backoff; until :meth:`stop`."""
        backoff = Backoff(self.settings.backoff_min, self.settings.backoff_max)
        while not self._stopping.is_set():
            v5 = self.protocol == "5"
            try:
                client = self._make_client(v5)
                async with client:
                    self._client = client
                    self.connected = True
                    self.connects += 1
                    backoff.reset()
                    log.info("floor_mqtt_connected", host=self.settings.host, port=self.settings.port,
                             client_id=self.settings.client_id, protocol=self.protocol)
                    filters = subscriptions(self.settings, v5)
                    for flt in filters:
                        await client.subscribe(flt, qos=1)
                    if v5 and self.settings.shared:  # a session kept from before replays were its own
                        with contextlib.suppress(aiomqtt.MqttError):
                            await client.unsubscribe(
                                f"$share/{self.settings.group}/{self.settings.prefix.rstrip('/')}/+/replay/#")
                    log.info("floor_subscribed", filters=filters)
                    await self._session(client)
            except MqttConnectError as exc:
                code = getattr(exc.rc, "value", exc.rc)
                if v5 and code in (0x84, 1):
                    log.warning("floor_mqtt_v5_refused_falling_back", code=code)
                    self.protocol = "3.1.1"
                    continue
                log.warning("floor_mqtt_connect_refused", error=str(exc))
            except aiomqtt.MqttError as exc:
                if not self._stopping.is_set():
                    log.warning("floor_mqtt_disconnected", error=str(exc))
            except Exception as exc:  # a defect of ours must not end the floor's consumption for good
                log.critical("floor_consumer_failed", error=f"{type(exc).__name__}: {exc}", exc_info=True)
            finally:
                self.connected = False
                self._client = None
            if self._stopping.is_set():
                break
            delay = backoff.next_delay()
            with contextlib.suppress(TimeoutError):
                await wait_at_most(self._stopping.wait(), delay)

    async def stop(self) -> None:
        """Stop after the batch in progress (its commit and acknowledgements)."""
        self._stopping.set()

    async def _session(self, client: aiomqtt.Client) -> None:
        queue: asyncio.Queue[aiomqtt.Message] = asyncio.Queue()

        async def pump() -> None:
            async for m in client.messages:
                queue.put_nowait(m)

        pump_task = asyncio.create_task(pump(), name="floor-mqtt-pump")
        stop_task = asyncio.create_task(self._stopping.wait())
        try:
            while True:
                get = asyncio.create_task(queue.get())
                done, _ = await asyncio.wait({get, pump_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
                if get not in done:
                    get.cancel()
                    if pump_task in done:
                        pump_task.result()  # re-raise the MqttError that ended the connection
                        raise aiomqtt.MqttError("the broker closed the message stream")
                    return  # stopping
                batch = [get.result()]
                while len(batch) < self.settings.batch_max and not queue.empty():
                    batch.append(queue.get_nowait())
                await self._handle(client, batch)
        finally:
            for t in (pump_task, stop_task):
                t.cancel()
            for t in (pump_task, stop_task):
                with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
                    await t

    def _is_reply(self, topic: str) -> bool:
        return topic.startswith(self._reply_prefix) and topic.endswith(self._reply_suffix)

    async def _handle(self, client: aiomqtt.Client, batch: list[aiomqtt.Message]) -> None:
        received = now_iso()
        items: list[Incoming] = []
        replies: list[aiomqtt.Message] = []
        for m in batch:
            topic = str(m.topic)
            payload = bytes(m.payload) if isinstance(m.payload, bytes | bytearray) else str(
                m.payload or "").encode()
            if self._is_reply(topic):
                replies.append(m)
            else:
                items.append(Incoming(topic, payload, bool(m.retain), received))
        outcomes = await self._commit(items) if items else []
        for m in replies:
            corr = getattr(m.properties, "CorrelationData", None) if m.properties is not None else None
            payload = bytes(m.payload) if isinstance(m.payload, bytes | bytearray) else b""
            command_id = bytes(corr).decode(errors="replace") if corr else _json_field(payload, "command_id")
            tracker = self.tracker
            if tracker is not None and command_id:
                table = str(m.topic)[len(self._reply_prefix):].partition("/")[0]
                try:
                    await self._retry_db(partial(tracker.on_reply, command_id, payload, table))
                except BadValue as exc:  # an answer the database cannot hold: it only informs the audit
                    log.warning("floor_replay_reply_ignored", table=table, error=str(exc))
        for m in batch:  # only now, after the commit, in the order they arrived
            if m.qos > 0:
                client._client.ack(m.mid, m.qos)
                self.acked += 1
        if outcomes and self.on_commit is not None:
            result = self.on_commit(outcomes)
            if result is not None:
                await result

    async def _retry_db(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``fn`` (one batch's transaction) until it commits, waiting the shared full-jitter backoff
        (:class:`drivers.backoff.Backoff`) between attempts; raises :class:`aiomqtt.MqttError` when asked to
        stop with the batch not stored (nothing of it was acknowledged, so the broker keeps it)."""
        backoff = Backoff(self.settings.backoff_min, self.settings.backoff_max)
        while True:
            try:
                return await fn()
            except DatabaseUnavailable as exc:
                event, error = "floor_database_unavailable", str(exc)
            except BadValue:  # the same statement fails again whenever it is retried
                raise
            except DatabaseError as exc:  # e.g. a deadlock between two floor processes: retry the batch
                event, error = "floor_batch_failed", str(exc)
            self.db_failures += 1
            delay = backoff.next_delay()
            log.error(event, error=error, retry_in=round(delay, 2))
            if self._stopping.is_set():
                raise aiomqtt.MqttError("stopping with a batch not stored")
            with contextlib.suppress(TimeoutError):
                await wait_at_most(self._stopping.wait(), delay)

    async def _commit(self, items: list[Incoming]) -> list[Outcome]:
        async def once(part: list[Incoming]) -> list[Outcome]:
            async with self.db.transaction() as tx:
                outcomes = await self.ingestor.apply(tx, part)
                if tx.dialect == "postgresql":
                    for payload in _notify_payloads(outcomes):
                        await tx.execute("SELECT pg_notify(?, ?)", (NOTIFY_CHANNEL, payload))
                return outcomes

        async def quarantine(item: Incoming, reason: str) -> list[Outcome]:
            async with self.db.transaction() as tx:
                return [await self.ingestor.quarantine(tx, item, reason)]

        outcomes: list[Outcome]
        try:
            outcomes = await self._retry_db(partial(once, items))
        except BadValue as exc:
            # A value the database cannot hold got past the ingest's own guards (a defect of ours): the
            # batch is stored one message at a time, and the one that fails alone is quarantined, so that
            # it cannot hold up the others for ever (retrying the same statement fails the same way).
            log.error("floor_batch_bad_value", error=str(exc), messages=len(items))
            outcomes = []
            for item in items:
                try:
                    outcomes += await self._retry_db(partial(once, [item]))
                except BadValue as one:
                    outcomes += await self._retry_db(partial(quarantine, item,
                                                             f"the database cannot store it: {one}"))
        self.batches += 1
        for o in outcomes:
            if o.kind == "stored":
                self.stored += 1
            elif o.kind == "duplicate":
                self.duplicates += 1
            elif o.kind == "quarantined":
                self.quarantined += 1
                log.warning("floor_message_quarantined", table=o.table, msg_id=o.msg_id, reason=o.reason)
        return outcomes


NOTIFY_MAX = 7900
"""Bytes of one NOTIFY payload (PostgreSQL refuses 8000 and more: the batch's transaction fails)."""


def _notify_payloads(outcomes: list[Outcome]) -> list[str]:
    """The NOTIFY payloads of a committed batch (:data:`NOTIFY_CHANNEL`): the tables it touched, split
    into as many payloads as keep each under :data:`NOTIFY_MAX` bytes (a batch of 256 messages from 256
    tables with ids of 40 characters made one payload too long, and PostgreSQL failed the batch, retried
    for ever)."""
    ranges: dict[str, dict[str, list[int]]] = {}
    for o in outcomes:
        if o.kind == "stored" and o.table and o.seq:
            r = ranges.setdefault(o.table, {}).setdefault(o.epoch or "", [o.seq, o.seq])
            r[0], r[1] = min(r[0], o.seq), max(r[1], o.seq)
        elif o.table:
            ranges.setdefault(o.table, {})
    at = now_iso()
    out: list[str] = []
    part: dict[str, list[list[Any]]] = {}
    size = 0
    for table, v in ranges.items():
        entry = [[e, a, b] for e, (a, b) in v.items()]
        n = len(json.dumps({table: entry}, separators=(",", ":")))
        if part and size + n > NOTIFY_MAX - 100:
            out.append(json.dumps({"tables": part, "at": at}, separators=(",", ":")))
            part, size = {}, 0
        part[table] = entry if n < NOTIFY_MAX - 100 else []
        size += n if n < NOTIFY_MAX - 100 else len(table) + 8
    out.append(json.dumps({"tables": part, "at": at}, separators=(",", ":")))
    return out


def _json_field(payload: bytes, name: str) -> str:
    if len(payload) > 4096:  # no reply of a table's (docs/mqtt.md: one line)
        return ""
    try:
        body = json.loads(payload)
    except (ValueError, RecursionError):  # 2,000 brackets fit in 4 KiB
        return ""
    value = body.get(name) if isinstance(body, dict) else None
    return value if isinstance(value, str) else ""
