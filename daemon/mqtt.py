"""MQTT publishing for one table: connection settings, the topic map, the outbox relay, commands.

The relay is the only publisher of journaled messages. It publishes the journal's outbox in row order,
each row at its QoS over one connection (a small window in flight, in order; a burst in one socket
write, its first message at once), and marks a row delivered only after the broker acknowledged it
(PUBACK); the journal writes those marks in batches, and the relay writes the waiting ones itself once
acknowledgements stop for :data:`SEAL_MARKS_AFTER` seconds (a quiet table). Rows just committed are
handed over by the app (:meth:`Relay.notify` with the rows) and published from memory; the outbox is
read from the journal at a session's start, for a retry, or when more rows wait than it keeps in memory.
Data flows one way (bytes -> events -> round -> settlements -> journal -> MQTT): the machine's emits are
journaled before anything is published, so a broker outage or a restart never loses a message; after a
reconnect the relay starts again from the first undelivered row, with the same ``msg_id``. A PUBACK
means the broker had the message, not that every subscriber got it (a broker killed before it saved its
queues loses them): consumers find gaps by ``seq`` and the retained status's ``last_seq`` and ask for
them again with the ``replay`` command, which republishes journaled rows unchanged on
``{prefix}/{table}/replay/...`` (docs/mqtt.md, "Replay by seq").

aiomqtt 2.5.1 specifics handled here:

* a fresh client object per connection attempt, fixed client id, MQTT v5 with ``clean_start=False`` set
  explicitly and a Session Expiry Interval, falling back to MQTT 3.1.1 with ``clean_session=False``
  when the broker refuses v5 (CONNACK 0x84 / 1) or never answers a v5 CONNECT (amqtt 0.12 does that:
  the attempts then alternate until one gets a CONNACK);
* a v5 PUBACK with a reason code >= 0x80 (e.g. 0x87 Not authorized from a Mosquitto ACL) is reported by
  :class:`PublishRejected`, not taken for success: aiomqtt 2.x drops the reason code, so
  :class:`_AckClient` records it from paho's ``on_publish`` (callback API v2), which carries it; the
  rows after a refused one are published without waiting, and it is tried again later (so it arrives
  after them), unless it is a retained message whose topic has a newer one acknowledged: then it is
  skipped (docs/mqtt.md, "A refused publish");
* in-flight publishes are not failed on disconnect, so every publish has its own timeout;
* a silently dead link (no FIN, no RST) is noticed from the receive side: no byte from the broker for
  half the keepalive sends a PINGREQ, none for :data:`DEAD_LINK_FACTOR` x keepalive closes the socket and
  reconnects (paho alone notices only after up to two keepalive intervals);
* reconnect with :class:`~drivers.backoff.Backoff` (exponential, full jitter, at most
  ``backoff_max`` = 5 s by default, so a returning network is used within seconds);
* the retained ``status`` topic carries ``online``/``offline``/``standby`` with the process's instance
  id and is also the MQTT will; retained state is republished from the journal on every reconnect
  (never a message older than the broker acknowledged: docs/mqtt.md, "Retained topics after a
  reconnect"), and the command subscription is renewed.

Duplicate instance (two live daemons for one table, docs/mqtt.md): the relay subscribes to its own
table's ``status``. The instance started last keeps the table; the other steps back to ``standby``
(publishes nothing but its status, answers no command, never reconnects until restarted but to
publish that ``standby`` if a first try was cut short: :data:`STANDBY_ANNOUNCE_TRIES`): an instance
that was online before and finds, on reconnecting, the retained status ``online`` from another
instance (any other instance id, also one of the same journal epoch: a spare whose disk was cloned from
the table's holds a copy of its journal) published after its own ``online`` was taken over; one that
receives a live ``online`` from another instance while it is online is older. A session taken over (MQTT v5
DISCONNECT 0x8E, sent by Mosquitto >= 2.0.15) is logged as an error naming the client id and the
reconnect backs off (at least 1 s); the instance that stays online raises ``DUPLICATE_INSTANCE``
(``on_duplicate``) when it sees the other one's ``standby``.

A row larger than the broker takes is never published (docs/mqtt.md, "Message size"): Mosquitto drops
the connection of a client that sends one (``max_packet_size``; with ``message_size_limit`` an MQTT v5
client is disconnected too), so publishing it would only reconnect for ever. The limit is ``[mqtt]
max_message_bytes`` (payload bytes; default 262144, the shipped broker's ``message_size_limit``), and the
Maximum Packet Size of the broker's v5 CONNACK when it sends one. Such a row is logged at error
(``mqtt_row_too_large``), counted (``too_large``; ``tablesense_publish_too_large_total``), and skipped:
marked delivered in the journal, which keeps it (``recall``, the floor report); ``replay`` skips it too.

The relay never dies (docs/reliability.md, scenario 6): a journal that cannot record an acknowledgement
(:class:`~daemon.journal.errors.JournalError` from ``mark_delivered``, e.g. a full disk) is logged once at
critical (``journal_mark_failed``) and publishing goes on; the unmarked rows are published once more, with
the same ``msg_id``, after the next reconnect or restart, and subscribers drop the duplicates. A retained
message to republish that fails its seal (:class:`~daemon.journal.errors.JournalDamaged`) is left out and
raises one critical ``JOURNAL_DAMAGED`` alarm; the rest is published (docs/mqtt.md, "Retained topics
after a reconnect"). Any other unexpected exception is logged at critical (``relay_crashed``) and the
relay starts over with backoff.

Commands arrive on ``{prefix}/{table}/cmd/{name}`` (bodies: :mod:`daemon.mqtt_commands`) and are answered
``{"ok": bool, "reason": str, "command": name}`` on the MQTT v5 Response Topic with the request's
Correlation Data (OASIS MQTT 5.0 §4.10). A 3.1.1 client may instead put ``"response_topic"`` and
``"correlation_data"`` in the JSON request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import secrets
import socket
import ssl
import stat
import time
import tomllib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

import aiomqtt
import msgspec
import paho.mqtt.client as paho
from aiomqtt.exceptions import MqttConnectError
from paho.mqtt.enums import MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from tablesense.daemon import metrics
from tablesense.daemon.journal.errors import JournalDamaged, JournalError
from tablesense.daemon.journal.store import MARK_DELAY
from tablesense.daemon.logging import get_logger
from tablesense.daemon.messages import AlarmMessage, encode_message
from tablesense.daemon.mqtt_commands import (
    MAX_COMMAND_BYTES,
    MAX_REPLY_TOPIC_CHARS,
    CommandRejected,
    CommandRequest,
    parse_command,
    text_problem,
)
from tablesense.daemon.table.alarms import ALARMS, AlarmCode
from tablesense.drivers.backoff import Backoff
from tablesense.drivers.waits import wait_at_most

__all__ = [
    "CHANNEL_TOPICS",
    "DEAD_LINK_FACTOR",
    "MAX_COMMAND_BYTES",
    "SESSION_TAKEN_OVER",
    "CommandRejected",
    "CommandRequest",
    "CredentialsError",
    "DuplicateInstance",
    "LinkDead",
    "MqttSettings",
    "OutboxJournal",
    "OutboxRowLike",
    "PublishRejected",
    "Relay",
    "Topics",
    "load_credentials",
    "parse_command",
    "reply_topic_allowed",
    "tls_context",
]

log = get_logger(component="mqtt")

CHANNEL_TOPICS: dict[str, str] = {
    "status": "status",
    "round": "round",
    "results": "results",
    "settlements": "settlements",
    "alarms": "alarms",
    "device": "devices",
    "devices": "devices",
    "floor_rounds": "floor/rounds",
    "floor/rounds": "floor/rounds",
    "scoreboard": "scoreboard",
    "info": "info",
}
"""Outbox channel name (the machine's ``Channel`` value, lower case) -> topic suffix under the table."""

NODELAY = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)
"""Socket options for every MQTT connection: no Nagle delay (paho and aiomqtt leave it on, which adds up
to ~40 ms to small publishes waiting behind an unacknowledged segment)."""

_CONNACK_TIMEOUT = 3.0
"""Seconds to wait for CONNACK before the connection attempt counts as failed."""

_UNSUPPORTED_PROTOCOL = (0x84, 1)
"""CONNACK codes meaning "this broker does not speak MQTT v5" (v5 0x84; 3.1.1 code 1)."""

SESSION_TAKEN_OVER = 0x8E
"""MQTT v5 DISCONNECT reason: another connection with the same client id took the session over (OASIS
MQTT 5.0 §3.1.4, §3.14.2.1)."""

PROBE_FACTOR = 0.5
"""No byte from the broker for this many keepalive intervals: send a PINGREQ (the answer is a byte)."""

DEAD_LINK_FACTOR = 1.25
"""No byte from the broker for this many keepalive intervals although a PINGREQ went out half-way: the
link is dead (checked every :data:`_LINK_TICK` s, so noticed within 1.5 x keepalive for keepalive >= 1 s;
the broker gives a client 1.5 x keepalive, OASIS MQTT 5.0 §3.1.2.10)."""

_LINK_TICK = 0.25
"""Seconds between two looks at the receive side."""

SESSION_TASKS_STOP = 2.0
"""Seconds a session's tasks get to end once it ends (cancelled); one still running then is logged at
critical (``relay_task_stuck``) and left behind, so the relay reconnects whatever it waits for."""

STANDBY_ANNOUNCE_TRIES = 3
"""Connections an instance that stepped back makes, at most, only to publish its ``standby`` status when
the step back was cut short before the broker acknowledged it (each takes the session from the newer
instance for a moment when they share a client id; :meth:`Relay.run`)."""

TAKEOVER_BACKOFF = (1.0, 30.0)
"""Reconnect delay after the session was taken over (0x8E): at least the first value, full jitter up to
a ceiling doubling from 2 x the first to the second (seconds). The other instance decides meanwhile."""

SEAL_MARKS_AFTER = MARK_DELAY + 0.25
"""Seconds after the last acknowledgement recorded in memory at which the relay writes the waiting ones
(:meth:`Journal.flush_marks`) itself: a quiet table has no next append or acknowledgement to write them
with, and ``tablesense verify`` would count its last round's messages as awaiting delivery (a crash would
publish them once more)."""

MAX_MESSAGE_BYTES = 262144
"""Default largest payload the relay publishes (``[mqtt] max_message_bytes``): the ``message_size_limit`` of
the shipped broker config (deploy/mosquitto/tablesense-tls.conf)."""

_PACKET_OVERHEAD = 48
"""Bytes a PUBLISH packet adds to its payload and topic at most here: fixed header (5), topic length (2),
packet id (2), properties (4 + content type 19 + payload format indicator 2); rounded up."""

MAX_REPLAY_QUEUE_BYTES = 16 * 1024 * 1024
"""Most payload bytes waiting to be replayed at once (further replay requests are refused until the
queue drains)."""

_STATES_ONLINE = frozenset({"online", "refusing"})
"""Status states of an instance that publishes (or answers) for its table."""


class LinkDead(aiomqtt.MqttError):
    """Nothing came from the broker for :data:`DEAD_LINK_FACTOR` x keepalive: the connection is closed."""


@dataclass(frozen=True, slots=True)
class DuplicateInstance:
    """Another live tablesense instance for the same table (see the module docstring).

    ``other``: its instance id (16 hex); ``other_epoch``: its journal epoch; ``client_id``: our client id;
    ``taken_over``: our session was taken over (v5 0x8E) before we saw it.
    """

    other: str
    other_epoch: str
    client_id: str
    taken_over: bool

    def text(self) -> str:
        """One line for the alarm and the log."""
        if not self.other:
            return (f"another client with client id {self.client_id} took this table's MQTT session over "
                    "(MQTT 5 reason 0x8E) and has let go: a second tablesense for this table, or someone "
                    "using its broker identity")
        return (f"another tablesense instance {self.other} (journal epoch {self.other_epoch or '?'}) for "
                f"this table with client id {self.client_id} stepped back to standby: stop it")


class _StatusPeek(msgspec.Struct):
    """What the relay reads of a ``status`` message (its own table's)."""

    state: str = ""
    instance: str = ""
    epoch: str = ""
    ts: str = ""


_PEEK = msgspec.json.Decoder(_StatusPeek)


class CredentialsError(Exception):
    """The MQTT credentials file is missing, malformed or readable by other users (one-line message)."""


class PublishRejected(aiomqtt.MqttError):
    """The broker answered a publish with a negative acknowledgement (MQTT v5 reason code >= 0x80).

    ``reason`` is paho's :class:`ReasonCode` (e.g. 0x87 Not authorized). The row stays undelivered.
    """

    def __init__(self, topic: str, reason: ReasonCode) -> None:
        super().__init__(f"broker refused publish to {topic}: [0x{reason.value:02x}] {reason}")
        self.topic = topic
        self.reason = reason


@dataclass(frozen=True, slots=True)
class MqttSettings:
    """Everything needed to reach the broker for one table.

    ``protocol``: ``"5"`` or ``"3.1.1"``; with ``fallback`` a broker refusing v5 is retried with 3.1.1.
    ``session_expiry``: seconds the broker keeps our session (and queued QoS 1 messages) while we are
    away. ``backoff_min``/``backoff_max``: reconnect delay bounds in seconds (exponential, full jitter,
    :class:`~drivers.backoff.Backoff`); ``backoff_max`` is the longest a returning broker waits for us.
    ``keepalive``: seconds; the link counts as dead after :data:`DEAD_LINK_FACTOR` x keepalive without a
    byte from the broker.
    ``publish_timeout``: seconds to wait for a PUBACK before the connection is considered dead.
    ``max_message_bytes``: the largest payload published (bytes); a larger row is skipped (module doc).
    TLS: ``ca_file`` enables TLS with server verification; ``cert_file``/``key_file`` add a client
    certificate. ``credentials_file``: TOML with ``username`` and ``password``, not world-readable.
    """

    host: str
    port: int
    table: str
    client_id: str
    prefix: str = "tablesense"
    protocol: str = "5"
    fallback: bool = True
    keepalive: int = 15
    session_expiry: int = 7 * 24 * 3600
    backoff_min: float = 0.2
    backoff_max: float = 5.0
    publish_timeout: float = 10.0
    max_message_bytes: int = MAX_MESSAGE_BYTES
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    credentials_file: str | None = None
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)


def load_credentials(path: str | os.PathLike[str]) -> tuple[str, str]:
    """Read ``(username, password)`` from a credentials file.

    Format: TOML with ``username = "..."`` and ``password = "..."``, or two plain lines (username, then
    password). The file must not be readable or writable by "other" users (docs/security.md:
    credentials are read from a file that must not be world-readable). Raises :class:`CredentialsError`
    with one line naming
    the file and what is wrong (missing, accessible by others with its mode, no username/password).
    """
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise CredentialsError(f"credentials file {p}: {exc.strerror or exc}") from None
    if st.st_mode & (stat.S_IROTH | stat.S_IWOTH):
        raise CredentialsError(
            f"credentials file {p} is accessible by other users (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"run: chmod o-rwx {p}")
    if st.st_size > 64 * 1024:
        raise CredentialsError(f"credentials file {p} is larger than 64 KiB")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CredentialsError(f"credentials file {p}: {exc}") from None
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        data = {"username": lines[0], "password": lines[1]} if len(lines) == 2 else {}
    user, password = data.get("username"), data.get("password")
    if not isinstance(user, str) or not user:
        raise CredentialsError(f"credentials file {p}: 'username' missing or not a string")
    if not isinstance(password, str):
        raise CredentialsError(f"credentials file {p}: 'password' missing or not a string")
    return user, password


def tls_context(ca_file: str | None, cert_file: str | None = None,
                key_file: str | None = None) -> ssl.SSLContext:
    """A client TLS context that verifies the broker against ``ca_file`` (hostname checked).

    ``ca_file`` ``None``: the system's trust store (``tablesense signage/monitor --tls`` without
    ``--ca-file``). With ``cert_file`` (and ``key_file`` unless the key is in the same PEM) a client
    certificate is presented. Raises :class:`CredentialsError` naming the file that cannot be loaded.
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH) if ca_file is None else _ca_context(ca_file)
    if cert_file:
        try:
            ctx.load_cert_chain(cert_file, key_file or None)
        except (OSError, ssl.SSLError) as exc:
            raise CredentialsError(f"TLS client certificate {cert_file}: {exc}") from None
    return ctx


def _ca_context(ca_file: str) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise CredentialsError(f"TLS CA file {ca_file}: {exc}") from None
    return ctx


class Topics:
    """The topic map of one table under ``{prefix}/{table}/`` (README.md "MQTT topics").

    ``status`` (retained availability, also the will), ``round`` (retained), ``results``,
    ``settlements``, ``alarms``, ``devices/{name}`` (retained), ``scoreboard`` (retained, baccarat roads),
    ``info`` (retained table info), ``floor/rounds``, and commands on ``cmd/{name}``.
    """

    def __init__(self, prefix: str, table: str) -> None:
        self.base = f"{prefix.rstrip('/')}/{table}"
        self.status = f"{self.base}/status"
        self.cmd_filter = f"{self.base}/cmd/+"
        self._cmd_prefix = f"{self.base}/cmd/"
        self.reply_prefix = f"{self.base}/reply/"
        self.replay_prefix = f"{self.base}/replay/"

    def for_channel(self, channel: str, device: str | None = None) -> str:
        """Topic for an outbox row of ``channel`` (raises ``KeyError`` for an unknown channel)."""
        suffix = CHANNEL_TOPICS[channel.lower()]
        if suffix == "devices":
            return f"{self.base}/devices/{device or 'unknown'}"
        return f"{self.base}/{suffix}"

    def replay_for(self, channel: str, device: str | None = None) -> str:
        """Where a replayed outbox row of ``channel`` goes: ``{base}/replay/`` + the live topic's path under
        the table (``replay/settlements``, ``replay/floor/rounds``, ``replay/devices/shoe``)."""
        return self.replay_prefix + self.for_channel(channel, device)[len(self.base) + 1:]

    def public_filters(self) -> list[str]:
        """Subscription filters for the table's live topics outside ``floor/``, ``replay/``, ``cmd/`` and
        ``reply/``: ``status``, ``round``, ``results``, ``settlements``, ``alarms``, ``scoreboard``,
        ``info``, ``devices/+``. Not what signage may read: the broker's ACL (deploy/mosquitto/acl) keeps
        ``alarms`` from signage (they name seats, spots and advantage-play figures) and lets it read
        ``health``; nothing in tablesense subscribes signage with this list."""
        names = ("status", "round", "results", "settlements", "alarms", "scoreboard", "info")
        return [f"{self.base}/{s}" for s in names] + [f"{self.base}/devices/+"]

    def command_name(self, topic: str) -> str | None:
        """The command name of a ``cmd/{name}`` topic, else ``None``."""
        if topic.startswith(self._cmd_prefix):
            name = topic[len(self._cmd_prefix):]
            return name if name and "/" not in name else None
        return None


def reply_topic_allowed(topics: Topics, topic: str) -> str | None:
    """Why the daemon will not answer a command on ``topic``, else ``None`` (allowed).

    Replies go only under ``{prefix}/{table}/reply/`` (docs/security.md, deploy/mosquitto/acl): never on
    the table's other topics (``results``, ``round``, ... are read by signage and have a schema), never
    with a wildcard (``+``/``#`` are not valid in a publish topic), never to an empty level or past
    :data:`MAX_REPLY_TOPIC_CHARS`, and never with a NUL or a lone surrogate (not valid UTF-8).
    """
    if not topic.startswith(topics.reply_prefix) or len(topic) == len(topics.reply_prefix):
        return f"response topic outside {topics.reply_prefix}"
    if len(topic) > MAX_REPLY_TOPIC_CHARS:
        return "response topic too long"
    if "+" in topic or "#" in topic:
        return "response topic holds a wildcard"
    if text_problem(topic, controls=True) is not None:
        return "response topic is not valid text"
    return None


class OutboxRowLike(Protocol):
    """What the relay needs of a journal outbox row (``daemon.journal.OutboxRow``)."""

    @property
    def row_id(self) -> int: ...
    @property
    def msg_id(self) -> str: ...
    @property
    def channel(self) -> Any: ...
    @property
    def device(self) -> str | None: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def retain(self) -> bool: ...
    @property
    def qos(self) -> int: ...


class OutboxJournal(Protocol):
    """What the relay needs of the journal (``daemon.journal.Journal``)."""

    def pending(self, limit: int, after_row: int) -> Sequence[OutboxRowLike]: ...
    def mark_delivered(self, row_id: int) -> None: ...
    def retained_latest(self) -> Sequence[OutboxRowLike]: ...


CommandHandler = Callable[[CommandRequest], Awaitable[tuple[bool, str]]]
"""Called for each command; returns ``(ok, reason)`` once the command is journaled and applied."""


def _props(packet_type: int) -> Properties:
    return Properties(packet_type)  # type: ignore[no-untyped-call]


def _channel_name(channel: Any) -> str:
    value = getattr(channel, "value", channel)
    return str(value).lower()


MAX_HANDED_ROWS = 4096
"""Most committed rows the relay keeps in memory to publish (:meth:`Relay.notify`); past it, it reads the
outbox back from the journal."""

MAX_DEFERRED_MARKS = 1024
"""Most broker acknowledgements the relay keeps in memory while the journal is busy (an append or
maintenance holds its lock) before it records them in a worker thread instead (:meth:`Relay._mark_rows`)."""

DEFERRED_MARKS_RETRY = 0.005
"""Seconds after which a relay with nothing else to do tries again to record deferred acknowledgements."""


_PUBLISH = 0x30
_DISCONNECT = 0xE0
_COALESCE_MAX = 256 * 1024


def _coalesce(out: deque[Any]) -> None:
    """Join the packets waiting in paho's output queue ``out`` (``_OutPacket`` dicts) into one, so a burst
    of publishes goes out in one ``send()`` instead of one per packet (each send on a TCP_NODELAY
    loopback socket costs tens of microseconds of kernel time; a settlement burst is 10-25 packets).

    Only packets whose completion paho does not act on are joined: not a QoS 0 PUBLISH (its
    ``on_publish`` fires when written) and not a DISCONNECT (the socket closes after it); the joined
    packet is labelled as a QoS 1 PUBLISH, for which paho's ``_packet_write`` (paho-mqtt 2.1) does
    nothing once it is written. The bytes and their order are unchanged; at most
    :data:`_COALESCE_MAX` bytes are joined at a time."""
    if len(out) < 2:
        return
    taken: list[Any] = []
    size = 0
    while out:
        p = out[0]
        cmd = p["command"] & 0xF0
        if cmd == _DISCONNECT or (cmd == _PUBLISH and p["qos"] == 0):
            break
        if taken and size + p["to_process"] > _COALESCE_MAX:
            break
        taken.append(out.popleft())
        size += p["to_process"]
    if len(taken) == 1:
        out.appendleft(taken[0])  # nothing to join: left as it was
    elif taken:
        data = b"".join(bytes(p["packet"][p["pos"]:]) for p in taken)
        out.appendleft({"command": _PUBLISH | 0x02, "mid": 0, "qos": 1, "pos": 0, "to_process": len(data),
                        "packet": data, "info": None})


_PUBACK_NO_PROPERTIES = Properties(PacketTypes.PUBACK)  # type: ignore[no-untyped-call]
_PUBACK_REASONS = {0x00: ReasonCode(PacketTypes.PUBACK, identifier=0x00),
                   0x10: ReasonCode(PacketTypes.PUBACK, identifier=0x10)}
"""The PUBACK reason codes of a delivered publish (Success; No matching subscribers), one object each."""


def _success_puback(client: paho.Client, cmd: str) -> MQTTErrorCode | None:
    """paho's PUBACK handling for the common cases, without its per-packet objects: a PUBACK whose
    reason code is Success (0x00) or No matching subscribers (0x10) and which has no properties: the
    packet identifier alone (Remaining Length 2: Success, OASIS MQTT 5.0 §3.4.2.1, and the only PUBACK
    of 3.1.1), with the reason code, or with it and an empty property length. paho 2.x decodes each
    into a fresh ``ReasonCode`` and ``Properties`` (the reason code twice) before calling
    ``on_publish``, about a tenth of the relay's event-loop time in a settlement burst; this passes the
    same values (shared, never modified: the relay and aiomqtt only read them) to the same
    ``_do_on_publish`` under the same lock (paho's debug line "Received PUBACK" is not logged for
    them). Returns ``None`` for any other packet, which paho's own ``_handle_pubackcomp`` then handles
    (a failure code, properties, PUBCOMP, a malformed packet)."""
    packet = client._in_packet["packet"]
    size = len(packet)
    if cmd != "PUBACK" or not 2 <= size <= 4:
        return None
    if size == 2:
        reason = _PUBACK_REASONS[0x00]
    else:
        if size == 4 and packet[3] != 0:
            return None
        found = _PUBACK_REASONS.get(packet[2])
        if found is None or client._protocol != paho.MQTTv5:
            return None
        reason = found
    mid = int.from_bytes(packet[:2], "big")
    with client._out_message_mutex:
        if mid in client._out_messages:
            return client._do_on_publish(mid, reason, _PUBACK_NO_PROPERTIES)
    return MQTTErrorCode.MQTT_ERR_SUCCESS


_READ_AHEAD = 65536
"""Bytes :class:`_ReadAhead` asks the socket for at once."""


class _ReadAhead:
    """paho's socket reads through one buffer: paho 2.x reads a packet's fixed header a byte at a time
    (``_packet_read``: the type byte, each Remaining Length byte, then the rest), one ``recv`` system call
    each, so a burst of n 4-byte PUBACKs costs about 3n calls. This takes what the socket holds (up to
    :data:`_READ_AHEAD` bytes) in one call through paho's own ``_sock_recv`` (which turns an SSL
    want-read into ``BlockingIOError``) and hands paho the bytes it asks for from memory; the buffer is
    dropped when paho's socket changes (a new connection). Installed as the client's ``_sock_recv`` by
    :class:`_AckClient`, whose ``loop_read`` reads on while :meth:`pending` (bytes already taken from
    the socket raise no readiness event)."""

    __slots__ = ("_client", "_data", "_pos", "_recv", "_sock")

    def __init__(self, client: paho.Client) -> None:
        self._client = client
        self._recv = client._sock_recv
        self._sock: object = None
        self._data = b""
        self._pos = 0

    def pending(self) -> bool:
        """Bytes of the current connection read from the socket and not yet handed to paho."""
        return self._pos < len(self._data) and self._client._sock is self._sock

    def recv(self, bufsize: int) -> bytes:
        """At most ``bufsize`` bytes, as ``socket.recv``: ``b""`` at the end of the stream, and what the
        socket raises (``BlockingIOError`` when nothing is there) once the buffer is empty."""
        sock = self._client._sock
        if sock is not self._sock:
            self._sock, self._data, self._pos = sock, b"", 0
        if self._pos >= len(self._data):
            data = self._recv(max(bufsize, _READ_AHEAD))
            if len(data) <= bufsize:
                return data
            self._data, self._pos = data, 0
        start = self._pos
        self._pos = end = min(start + bufsize, len(self._data))
        out = self._data[start:end]
        if end >= len(self._data):
            self._data, self._pos = b"", 0
        return out


_T = TypeVar("_T")


class _ClosedBeforeConnack(aiomqtt.MqttError):
    """The connection closed before the broker's CONNACK (a 3.1.1-only broker may close on a v5 CONNECT
    instead of answering 0x84/0x01: :meth:`Relay.run` then tries the other protocol, as after a timeout)."""


class _AckClient(aiomqtt.Client):
    """aiomqtt 2.5.1 client that keeps the MQTT v5 PUBACK reason code of each publish.

    aiomqtt's ``_on_publish`` ignores ``reason_code`` (aiomqtt 2.5.1 client.py); paho's callback API v2 passes
    it, so this subclass records it by packet id and :meth:`publish_acked` raises
    :class:`PublishRejected` for codes >= 0x80. It also keeps the time bytes last arrived (``rx_at``), the
    broker's DISCONNECT reason (``disconnect_reason``, e.g. 0x8E Session taken over), and can send a
    PINGREQ (:meth:`ping`) or drop a dead connection at once (:meth:`force_close`). Relies on aiomqtt 2.x
    internals (``_client``, ``_pending_call``, ``_pending_publishes``, ``_wait_for``) and paho 2.x ones
    (``loop_read``, ``_send_pingreq``, ``_sock_close``, ``_do_on_disconnect``); pinned ``aiomqtt>=2.5.1,<3``
    and covered by tests against a real Mosquitto (ACL, a silently cut link, a taken-over session).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ack_reasons: dict[int, ReasonCode] = {}
        self._started: dict[int, tuple[str, asyncio.Future[None]]] = {}
        self._client.connect_timeout = 3.0
        self.pending_calls_threshold = 1000  # the relay's window is deliberate, not a backlog
        self.rx_at = time.monotonic()
        """``time.monotonic()`` when the socket last had bytes to read (the receive side's clock)."""
        self.disconnect_reason: int | None = None
        """The reason code of the broker's DISCONNECT (v5), or paho's code for a lost connection."""
        self.max_packet_size: int | None = None
        """The Maximum Packet Size of the broker's v5 CONNACK (bytes), ``None`` when it sent none."""
        paho_read = self._client.loop_read
        ahead = _ReadAhead(self._client)
        self._client._sock_recv = ahead.recv  # type: ignore[method-assign]

        def loop_read(max_packets: int = 1) -> MQTTErrorCode:
            # aiomqtt calls this only when the socket is readable: bytes (or EOF) arrived
            self.rx_at = time.monotonic()
            rc = paho_read(max_packets)
            while rc == MQTTErrorCode.MQTT_ERR_SUCCESS and ahead.pending():
                rc = paho_read(max_packets)  # paho stopped at its packet count with bytes read ahead
            return rc

        self._client.loop_read = loop_read  # type: ignore[method-assign]
        paho = self._client
        paho_write = paho._packet_write

        def packet_write() -> MQTTErrorCode:
            _coalesce(paho._out_packet)
            return paho_write()

        self._client._packet_write = packet_write  # type: ignore[method-assign]
        paho_pubackcomp = paho._handle_pubackcomp

        def handle_pubackcomp(cmd: Any) -> MQTTErrorCode:
            rc = _success_puback(paho, cmd)  # MQTT_ERR_SUCCESS is 0: compared with None, not truth
            return paho_pubackcomp(cmd) if rc is None else rc

        self._client._handle_pubackcomp = handle_pubackcomp  # type: ignore[method-assign]

    def _on_socket_register_write(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        """paho has bytes to write: watch the socket for writability. aiomqtt 2.5.1 always defers the
        ``add_writer`` with ``call_soon_threadsafe`` (paho's connect may ask from an executor thread);
        asked on the event loop's own thread (every publish), this adds it at once. Deferred, an add asked
        by a publish whose bytes a ``loop_write`` (:meth:`write_now`) then wrote lands after paho has
        already unregistered: the writer stays registered with nothing to write, the loop finds the
        socket writable at every turn and calls paho's ``loop_write`` for nothing, 100% of a core, until
        the next publish (the relay's burst whose later rows are all skipped as too large for the
        broker). Each deferral also writes the loop's self-pipe."""
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:  # not on a thread running an event loop
            here = False
        if not here:
            super()._on_socket_register_write(client, userdata, sock)
            return

        def callback() -> None:
            try:  # as aiomqtt's: a failed write (broken pipe) ends the connection
                client.loop_write()
            except Exception as exc:
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        self._loop.add_writer(sock.fileno(), callback)

    def _on_connect(self, client: paho.Client, userdata: Any, flags: paho.ConnectFlags,
                    reason_code: ReasonCode, properties: Properties | None = None) -> None:
        size = getattr(properties, "MaximumPacketSize", None) if properties is not None else None
        if isinstance(size, int) and size > 0:
            self.max_packet_size = size
        super()._on_connect(client, userdata, flags, reason_code, properties)

    def _on_disconnect(self, client: paho.Client, userdata: Any, flags: paho.DisconnectFlags,
                       reason_code: ReasonCode, properties: Properties | None = None) -> None:
        if self.disconnect_reason is None:
            value = getattr(reason_code, "value", reason_code)
            self.disconnect_reason = int(value) if isinstance(value, int) else None
        if not self._connected.done():
            # closed before CONNACK (a broker going down, a network coming back and dropping the half-open
            # attempt): fail the handshake now; aiomqtt 2.5.1 leaves it to the CONNACK timeout
            self._connected.set_exception(_ClosedBeforeConnack("connection closed before CONNACK"))
        super()._on_disconnect(client, userdata, flags, reason_code, properties)

    async def _wait_for(self, fut: Awaitable[_T], timeout: float | None) -> _T:
        """aiomqtt's own (used for CONNACK, SUBACK, PUBACK), but on :func:`wait_at_most`: a cancellation
        that arrives as the acknowledgement does is never swallowed (``asyncio.wait_for`` on Python 3.11,
        CPython gh-86296). ``MqttError`` on timeout, as aiomqtt raises."""
        if timeout is None:
            timeout = self.timeout
        try:
            return await wait_at_most(fut, None if timeout == math.inf else timeout)
        except TimeoutError:
            raise aiomqtt.MqttError("Operation timed out") from None

    def ping(self) -> None:
        """Send a PINGREQ now (paho's own keepalive sends one only after a whole keepalive interval)."""
        with contextlib.suppress(Exception):  # a dead socket: the receive-side check closes it
            self._client._send_pingreq()

    def force_close(self) -> None:
        """Close the socket at once, as paho does when its keepalive expires (no DISCONNECT packet: on a
        dead link it could wait behind a full send buffer), and end the session (message iteration and
        ``__aexit__`` return instead of waiting for a graceful disconnect)."""
        with contextlib.suppress(Exception):
            self._client._sock_close()
        with contextlib.suppress(Exception):
            self._client._do_on_disconnect(packet_from_broker=False, v1_rc=MQTTErrorCode.MQTT_ERR_KEEPALIVE)

    def _on_publish(self, client: paho.Client, userdata: Any, mid: int, reason_code: ReasonCode,
                    properties: Properties) -> None:
        started = self._started.pop(mid, None)
        if started is not None:
            topic, fut = started
            if not fut.done():
                if reason_code.is_failure:
                    fut.set_exception(PublishRejected(topic, reason_code))
                else:
                    fut.set_result(None)
            return
        if len(self._ack_reasons) > 4096:
            self._ack_reasons.clear()
        self._ack_reasons[mid] = reason_code
        super()._on_publish(client, userdata, mid, reason_code, properties)

    def write_now(self) -> None:
        """Write what paho has queued now, instead of at the loop's next look at the socket (paho's own
        ``loop_write``; a full socket buffer leaves the rest for the writer callback)."""
        with contextlib.suppress(Exception):  # a broken socket: the session's own checks end it
            self._client.loop_write()

    def start_publish(self, topic: str, payload: bytes, qos: int, retain: bool,
                      properties: Properties | None) -> asyncio.Future[None]:
        """Hand a message to paho now (no await: a burst goes out in one write) and return a future
        completed by its acknowledgement, failed with :class:`PublishRejected` on a negative one.
        Raises ``aiomqtt.MqttCodeError`` when paho cannot take it (e.g. not connected). The future is
        not failed by a disconnect (aiomqtt leaves it pending): await it with a timeout."""
        info = self._client.publish(topic, payload, qos, retain, properties)
        if info.rc != paho.MQTT_ERR_SUCCESS:
            raise aiomqtt.MqttCodeError(info.rc, "Could not publish message")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if info.is_published():  # QoS 0, or acknowledged already
            reason = self._ack_reasons.pop(info.mid, None)
            if reason is not None and reason.is_failure:
                fut.set_exception(PublishRejected(topic, reason))
            else:
                fut.set_result(None)
        else:
            self._started[info.mid] = (topic, fut)
        return fut

    async def publish_acked(self, topic: str, payload: bytes, qos: int, retain: bool,
                            properties: Properties | None, timeout: float) -> None:
        """Publish and wait for the acknowledgement; raise on a negative one.

        Raises ``aiomqtt.MqttCodeError`` when paho cannot queue the message (e.g. not connected),
        ``aiomqtt.MqttError`` on timeout, :class:`PublishRejected` on a PUBACK reason code >= 0x80.
        """
        info = self._client.publish(topic, payload, qos, retain, properties)
        if info.rc != paho.MQTT_ERR_SUCCESS:
            raise aiomqtt.MqttCodeError(info.rc, "Could not publish message")
        if not info.is_published():
            confirmation = asyncio.Event()
            with self._pending_call(info.mid, confirmation, self._pending_publishes):
                await self._wait_for(confirmation.wait(), timeout=timeout)
        reason = self._ack_reasons.pop(info.mid, None)
        if reason is not None and reason.is_failure:
            raise PublishRejected(topic, reason)


class _PackedOnce(Properties):
    """Publish properties that never change, packed once: paho packs a message's properties anew for
    every PUBLISH (``Properties.pack``, a few dozen microseconds), the same bytes every time here."""

    def pack(self) -> bytes:
        packed: bytes | None = self.__dict__.get("_packed_once")
        if packed is None:
            packed = super().pack()  # type: ignore[no-untyped-call]
            object.__setattr__(self, "_packed_once", packed)  # past Properties.__setattr__'s name check
        return packed


def _publish_properties(v5: bool) -> Properties | None:
    """The properties of every message the relay publishes (MQTT v5: JSON, UTF-8), ``None`` for 3.1.1.
    Not to be changed after the first publish (:class:`_PackedOnce`)."""
    if not v5:
        return None
    props = _PackedOnce(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    props.ContentType = "application/json"
    props.PayloadFormatIndicator = 1
    return props


class _SteppedBack(Exception):
    """A live ``online`` from a newer instance arrived: end the session and step back to standby."""

    def __init__(self, info: DuplicateInstance) -> None:
        super().__init__(info.text())
        self.info = info


class Relay:
    """Publishes the journal's outbox, answers commands, replays by seq, and keeps the table's
    availability topic.

    ``settings``: :class:`MqttSettings`. ``journal``: :class:`OutboxJournal`. ``status_payload(state)``:
    the retained status JSON for ``"online"``/``"offline"``/``"standby"`` (``"offline"`` is also the
    will); it should carry ``instance`` and ``epoch`` as given here. ``on_command``: see
    :data:`CommandHandler` (``None`` -> commands are refused). ``instance``: this process's instance id
    (default: 16 random hex digits), the only thing that tells two instances apart (a cloned journal
    shares its epoch); ``epoch``: its journal's epoch, named in the messages. ``on_duplicate``: called
    (from the event loop) once per other instance found stepping back, for the ``DUPLICATE_INSTANCE``
    alarm. Call :meth:`notify` after every journal append; run :meth:`run` as a task; :meth:`stop` publishes
    ``offline`` (when connected) and returns within ``stop_timeout`` seconds, also while a reconnect is
    backing off.

    Attributes read by the app and tests: ``connected`` (bool), ``delivered`` (rows marked delivered),
    ``rejected`` (negative acknowledgements seen), ``connects`` (successful connections), ``protocol``
    (``"5"`` or ``"3.1.1"`` in use), ``mark_failures`` (acknowledged rows the journal could not mark
    delivered: published again after the next reconnect or restart), ``crashes`` (unexpected exceptions
    the relay survived by starting over), ``standby`` (why this instance stepped back, one line for the
    status ``detail``, else ``None``),
    ``takeovers`` (sessions taken over, v5 0x8E), ``dead_links`` (connections closed as dead from the
    receive side), ``replayed`` (rows republished by ``replay``), ``too_large`` (rows not published, or
    not replayed, because they are larger than the broker takes: :meth:`too_large_for_broker`).
    """

    def __init__(self, settings: MqttSettings, journal: OutboxJournal,
                 status_payload: Callable[[str], bytes], on_command: CommandHandler | None = None,
                 tls: ssl.SSLContext | None = None, batch: int = 256, retry_rejected_after: float = 30.0,
                 window: int = 32, *, instance: str | None = None, epoch: str = "",
                 on_duplicate: Callable[[DuplicateInstance], None] | None = None) -> None:
        self.settings = settings
        self.topics = Topics(settings.prefix, settings.table)
        self._journal = journal
        self._status_payload = status_payload
        self._on_command = on_command
        self._on_duplicate = on_duplicate
        self.instance = instance or secrets.token_hex(8)
        self.epoch = epoch
        self._tls = tls
        self._batch = batch
        self._window = max(1, window)
        self._props: Properties | None = None
        self._retry_rejected_after = retry_rejected_after
        self._wakeup = asyncio.Event()
        self._handed: deque[OutboxRowLike] = deque()
        """Rows committed since the outbox was last read, handed over by :meth:`notify`."""
        self._reread = True
        """The outbox must be read from the journal (a new session, rows not handed over, a retry)."""
        self._stopping = asyncio.Event()
        self._client: _AckClient | None = None
        self._command_tasks: set[asyncio.Task[None]] = set()
        self._status_tasks: set[asyncio.Task[None]] = set()
        self._marks_failing = False
        self.protocol = "3.1.1" if settings.protocol.startswith("3") else "5"
        self._v5_confirmed = False
        self._backoff = Backoff(settings.backoff_min, settings.backoff_max)
        self._crash_backoff = Backoff(settings.backoff_min, settings.backoff_max)
        self._takeover_backoff = Backoff(2 * TAKEOVER_BACKOFF[0], TAKEOVER_BACKOFF[1],
                                         floor=TAKEOVER_BACKOFF[0])
        self._online_ts: str | None = None
        """``ts`` of the last ``online`` status this process published (``None``: never online yet)."""
        self._first_online_ts: str | None = None
        """``ts`` of the first ``online`` status this process published: a retained ``standby`` older than
        it is a stale one (e.g. from before this process started), not a duplicate stepping back for us."""
        self._taken_over = False
        self._duplicates: set[str] = set()
        self._replay_queue: deque[OutboxRowLike] = deque()
        self._replay_bytes = 0
        self._replay_wakeup = asyncio.Event()
        self.connected = False
        self.delivered = 0
        self.rejected = 0
        self.connects = 0
        self.mark_failures = 0
        self.crashes = 0
        self.standby: str | None = None
        self.standby_announced = False
        """The broker acknowledged this instance's ``standby`` status (after stepping back)."""
        self._standby_tries = 0
        self.takeovers = 0
        self.dead_links = 0
        self.replayed = 0
        self.too_large = 0
        self._mark_timer: asyncio.Task[None] | None = None
        self._last_mark = 0.0
        """``time.monotonic()`` of the last acknowledgement recorded (the mark timer waits from it)."""
        self._skipped: set[int] = set()
        """Row ids skipped (too large, or a retained message superseded: :meth:`_superseded`) and not yet
        marked (:meth:`_mark_rows` counts them apart)."""
        self._retained_acked: dict[str, int] = {}
        """Topic -> highest row id of a retained message on it that the broker acknowledged (in this
        process, or the journal's latest delivered one republished at a connection)."""
        self._deferred_marks: list[OutboxRowLike] = []
        """Rows the broker acknowledged, not yet recorded because the journal was busy (row order)."""
        self._recording: dict[asyncio.Future[tuple[list[JournalError | None], BaseException | None]],
                              Sequence[OutboxRowLike]] = {}
        """Acknowledged rows a worker thread is recording now, by recording (:meth:`_mark_rows`)."""
        self._damage_alarmed: set[int] = set()
        """``seq`` of the retained messages that failed their seal and whose ``JOURNAL_DAMAGED`` alarm the
        broker acknowledged (0: one the journal did not name; :meth:`_republish_retained`)."""

    # -- public API ---------------------------------------------------------------------------------
    def notify(self, rows: Sequence[OutboxRowLike] | None = None) -> None:
        """Wake the relay: new rows were appended to the outbox. ``rows``: the rows just committed, in row
        order (what :meth:`Journal.append` returned): the relay publishes them from memory instead of
        reading them back from the journal. Without ``rows`` it reads the outbox from its last row."""
        if rows is None:
            self._reread = True
        elif len(self._handed) + len(rows) > MAX_HANDED_ROWS:  # e.g. a long broker outage
            self._handed.clear()
            self._reread = True  # read back from the journal instead, a batch at a time
        else:
            self._handed.extend(rows)
        self._wakeup.set()

    def republish_status(self) -> None:
        """Publish the retained status again now (its payload from ``status_payload("online")`` as it is
        at this moment), e.g. when the app's journal fails or recovers, so that the floor does not learn it
        only at the next reconnect. Does nothing while disconnected (every connection publishes the
        status first), stopping or in standby. Returns at once: the publish runs in a task of its own, and
        a failure is left to the relay's session (which reconnects and publishes the status again)."""
        client = self._client
        if client is None or not self.connected or self._stopping.is_set() or self.standby is not None:
            return
        payload = self._status_payload("online")
        task = asyncio.create_task(self._publish_status(client, payload), name="mqtt-status")
        self._status_tasks.add(task)
        task.add_done_callback(self._status_tasks.discard)

    def publish_alarm(self, payload: bytes) -> None:
        """Publish one alarm message (``payload``: encoded ``AlarmMessage``) on ``alarms`` now, from memory,
        not through the journal (used when journaling itself failed). Best effort: does nothing while
        disconnected or stopping (the retained status carries the failure too). Returns at once."""
        client = self._client
        if client is None or not self.connected or self._stopping.is_set():
            log.warning("mqtt_alarm_not_published", reason="not connected")
            return
        task = asyncio.create_task(self._publish_alarm(client, payload), name="mqtt-alarm")
        self._status_tasks.add(task)
        task.add_done_callback(self._status_tasks.discard)

    def replay(self, rows: Sequence[OutboxRowLike]) -> bool:
        """Queue journaled ``rows`` (in seq order) to be republished unchanged, QoS 1, never retained, on
        ``{prefix}/{table}/replay/{channel path}`` (:meth:`Topics.replay_for`) over the current
        connection, after any replay already queued. ``False`` (nothing queued) while disconnected or in
        standby, or when the queue would hold more than :data:`MAX_REPLAY_QUEUE_BYTES` of payload. Rows
        not yet published when the connection ends are dropped (logged): the consumer asks again."""
        size = sum(len(r.payload) for r in rows)
        if not self.connected or self.standby is not None or self._stopping.is_set():
            return False
        if self._replay_bytes + size > MAX_REPLAY_QUEUE_BYTES:
            return False
        self._replay_queue.extend(rows)
        self._replay_bytes += size
        self._replay_wakeup.set()
        return True

    def too_large_for_broker(self, row: OutboxRowLike, topic: str | None = None) -> str | None:
        """Why ``row`` cannot be published to this broker, else ``None``: its payload is larger than
        ``max_message_bytes``, or (when the broker's v5 CONNACK gave a Maximum Packet Size) its PUBLISH
        packet would be larger than that (estimated with :data:`_PACKET_OVERHEAD`; ``topic``: where it
        goes, default its live topic)."""
        size = len(row.payload)
        limit = self.settings.max_message_bytes
        if size > limit:
            return f"{size} bytes, more than [mqtt] max_message_bytes {limit}"
        client = self._client
        packet_max = client.max_packet_size if client is not None else None
        if packet_max is not None:
            if topic is None:
                topic = self.topics.for_channel(_channel_name(row.channel), row.device)
            packet = size + len(topic.encode()) + _PACKET_OVERHEAD
            if packet > packet_max:
                return f"a {packet}-byte packet, more than the broker's maximum packet size {packet_max}"
        return None

    def _skip_too_large(self, row: OutboxRowLike, topic: str, what: str) -> bool:
        """Log and count ``row`` when it is too large for the broker (:meth:`too_large_for_broker`);
        ``True`` when it is (the caller skips it). ``what``: ``"publish"`` or ``"replay"``."""
        why = self.too_large_for_broker(row, topic)
        if why is None:
            return False
        self.too_large += 1
        seq = getattr(row, "seq", None)
        log.error("mqtt_row_too_large", topic=topic, msg_id=row.msg_id, row=row.row_id, seq=seq,
                  size=len(row.payload), limit=self.settings.max_message_bytes, reason=why, action=what,
                  message=f"{row.msg_id} on {topic} not {'replayed' if what == 'replay' else 'published'}: "
                          f"{why}; the journal keeps it (tablesense recall, floor report)")
        return True

    def _superseded(self, row: OutboxRowLike, topic: str) -> bool:
        """``True`` (logged at warning, ``mqtt_retained_superseded``) when ``row`` is a retained message
        older than one on the same topic the broker acknowledged already (:attr:`_retained_acked`): a
        row the broker refused (negative PUBACK) and tried again once later rows went through. Published,
        it would take the topic back to the older message; it is skipped like a row too large and the
        journal keeps it (``replay``, ``recall``; docs/mqtt.md, "A refused publish")."""
        if not row.retain:
            return False
        newer = self._retained_acked.get(topic, 0)
        if newer <= row.row_id:
            return False
        log.warning("mqtt_retained_superseded", topic=topic, msg_id=row.msg_id, row=row.row_id, newer=newer,
                    message=f"{row.msg_id} on {topic} not published: the broker has a newer retained message "
                            f"(row {newer}); the journal keeps it")
        return True

    @property
    def replay_backlog(self) -> int:
        """Rows queued for replay and not yet handed to the broker."""
        return len(self._replay_queue)
    def publish_now(self, topic: str, payload: bytes, *, retain: bool) -> None:
        """Publish ``payload`` on ``topic`` (QoS 1) now, from memory, not through the journal: a snapshot
        that needs no place in the table's sequence (the periodic ``health`` message,
        :mod:`daemon.metrics`). Best effort: nothing while disconnected or stopping. Returns at once."""
        client = self._client
        if client is None or not self.connected or self._stopping.is_set():
            return
        task = asyncio.create_task(self._publish_now(client, topic, payload, retain), name="mqtt-now")
        self._status_tasks.add(task)
        task.add_done_callback(self._status_tasks.discard)

    async def _publish_now(self, client: _AckClient, topic: str, payload: bytes, retain: bool) -> None:
        try:
            await self._publish(client, topic, payload, 1, retain)
        except (aiomqtt.MqttError, TimeoutError) as exc:
            log.warning("mqtt_publish_now_failed", topic=topic, error=str(exc))

    async def _publish_alarm(self, client: _AckClient, payload: bytes) -> None:
        try:
            await self._publish(client, self.topics.for_channel("alarms"), payload, 1, False)
        except (aiomqtt.MqttError, TimeoutError) as exc:
            log.warning("mqtt_alarm_publish_failed", error=str(exc))

    async def _publish_status(self, client: _AckClient, payload: bytes) -> None:
        try:
            await self._publish(client, self.topics.status, payload, 1, True)
        except (aiomqtt.MqttError, TimeoutError) as exc:
            log.warning("mqtt_status_republish_failed", error=str(exc))
            return
        log.info("mqtt_status_republished")

    async def run(self) -> None:
        """Connect, publish, reconnect with backoff, until :meth:`stop`. Never raises (but for
        cancellation): an unexpected exception is logged at critical (``relay_crashed``, with the
        traceback) and the relay starts over after a backoff that grows with consecutive crashes. In
        standby (a newer instance has the table) it stays disconnected until stopped, once its
        ``standby`` status is acknowledged: a step back cut short before that (the newer instance, same
        client id, took the session back at once) connects again after the takeover backoff just to
        publish it, at most :data:`STANDBY_ANNOUNCE_TRIES` times, so the table's ``DUPLICATE_INSTANCE``
        alarm is raised whatever the timing."""
        while not self._stopping.is_set():
            if self.standby is not None:
                if self.standby_announced or self._standby_tries >= STANDBY_ANNOUNCE_TRIES:
                    await self._stopping.wait()
                    break
                self._standby_tries += 1
                with contextlib.suppress(TimeoutError):
                    await wait_at_most(self._stopping.wait(), self._takeover_backoff.next_delay())
                if self._stopping.is_set():
                    break
                log.warning("mqtt_standby_announce", client_id=self.settings.client_id,
                            instance=self.instance, attempt=self._standby_tries,
                            message="the standby status was not acknowledged: connecting only to publish it")
            crashed = False
            v5 = self.protocol == "5"
            handshake_done = False
            client: _AckClient | None = None
            started = time.monotonic()
            try:
                client = self._make_client(v5)
                self._client = client
                client.timeout = min(self.settings.publish_timeout, _CONNACK_TIMEOUT)
                async with client:
                    handshake_done = True
                    started = time.monotonic()
                    client.timeout = self.settings.publish_timeout
                    self._v5_confirmed = self._v5_confirmed or v5
                    self.connected = True
                    self.connects += 1
                    log.info("mqtt_connected", host=self.settings.host, port=self.settings.port,
                             protocol=self.protocol, client_id=self.settings.client_id)
                    await self._session(client, v5)
            except MqttConnectError as exc:
                code = getattr(exc.rc, "value", exc.rc)
                if v5 and self.settings.fallback and code in _UNSUPPORTED_PROTOCOL:
                    log.warning("mqtt_v5_refused_falling_back", code=code)
                    self.protocol = "3.1.1"
                    continue
                log.warning("mqtt_connect_refused", error=str(exc))
            except aiomqtt.MqttError as exc:
                if not self._stopping.is_set():
                    event = "mqtt_disconnected" if handshake_done else "mqtt_connect_failed"
                    log.warning(event, error=str(exc))
                # A broker that only speaks 3.1.1 may never answer a v5 CONNECT (amqtt 0.12 waits for more
                # bytes): after a handshake timeout, alternate the protocol until one gets a CONNACK.
                if (not handshake_done and self.settings.fallback and not self._v5_confirmed
                        and self.settings.protocol == "5"
                        and ("timed out" in str(exc) or isinstance(exc, _ClosedBeforeConnack))):
                    self.protocol = "3.1.1" if v5 else "5"
                    log.warning("mqtt_handshake_timeout_switching_protocol", protocol=self.protocol)
            except Exception as exc:  # never die silently: the outbox would stay unpublished
                crashed = True
                self.crashes += 1
                log.critical("relay_crashed", error=f"{type(exc).__name__}: {exc}", crashes=self.crashes,
                             exc_info=True)
            finally:
                self.connected = False
                self._client = None
                self._drop_replays()
            if self._stopping.is_set():
                break
            if self.standby is not None:
                continue
            await self._pause(client, handshake_done, crashed, time.monotonic() - started)

    async def _pause(self, client: _AckClient | None, handshake_done: bool, crashed: bool,
                     lasted: float) -> None:
        """Wait before the next attempt: the takeover backoff after a v5 0x8E, else the reconnect backoff
        (started afresh after a session that lasted at least ``backoff_max``), longer after crashes."""
        reason = client.disconnect_reason if client is not None and handshake_done else None
        if reason == SESSION_TAKEN_OVER:
            self.takeovers += 1
            self._taken_over = True
            delay = self._takeover_backoff.next_delay()
            log.error("mqtt_session_taken_over", client_id=self.settings.client_id, instance=self.instance,
                      retry_in=round(delay, 2),
                      message=f"another client connected with client id {self.settings.client_id} and took "
                              "this session over: a second tablesense for this table, or a client using "
                              "its identity; backing off")
        else:
            if handshake_done and lasted >= self.settings.backoff_max:
                self._backoff.reset()
            delay = self._backoff.next_delay()
            if crashed:  # a repeating crash must not spin: back off over consecutive crashes
                delay = max(delay, self._crash_backoff.next_delay())
            else:
                self._crash_backoff.reset()
        with contextlib.suppress(TimeoutError):
            await wait_at_most(self._stopping.wait(), delay)

    async def stop(self, task: asyncio.Task[None] | None = None, stop_timeout: float = 3.0) -> None:
        """Stop publishing: finish the current publish briefly, publish ``offline``, disconnect.

        ``task``: the task running :meth:`run`, awaited (and cancelled after ``stop_timeout`` seconds).
        Never raises (but for the caller's own cancellation): a relay task that ended with an exception
        is logged at critical (``relay_task_failed``) so that the rest of the shutdown still runs.
        """
        self._stopping.set()
        self._wakeup.set()
        if self._mark_timer is not None:  # the journal's close writes the waiting marks
            self._mark_timer.cancel()
        if task is None:
            return
        try:
            await wait_at_most(asyncio.shield(task), stop_timeout)
        except TimeoutError:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if not task.cancelled():  # our caller was cancelled, not (only) the relay task
                    raise
            except Exception as exc:
                self._task_failed(exc)
        except asyncio.CancelledError:
            if not task.done() or not task.cancelled():  # our caller was cancelled
                raise
        except aiomqtt.MqttError:
            pass
        except Exception as exc:
            self._task_failed(exc)
        if self._deferred_marks:  # acknowledged while the journal was busy: recorded before it closes
            try:
                await self._mark_rows((), defer=False)
            except Exception as exc:
                self._task_failed(exc)

    @staticmethod
    def _task_failed(exc: BaseException) -> None:
        log.critical("relay_task_failed", error=f"{type(exc).__name__}: {exc}",
                     exc_info=exc)

    # -- internals ----------------------------------------------------------------------------------
    def _make_client(self, v5: bool) -> _AckClient:
        s = self.settings
        will_props = None
        connect_props = None
        if v5:
            will_props = _props(PacketTypes.WILLMESSAGE)
            will_props.ContentType = "application/json"
            connect_props = _props(PacketTypes.CONNECT)
            connect_props.SessionExpiryInterval = s.session_expiry
        will = aiomqtt.Will(self.topics.status, self._status_payload("offline"), qos=1, retain=True,
                            properties=will_props)
        kwargs: dict[str, Any] = {}
        if v5:
            kwargs.update(protocol=aiomqtt.ProtocolVersion.V5, clean_start=False, properties=connect_props)
        else:
            kwargs.update(protocol=aiomqtt.ProtocolVersion.V311, clean_session=False)
        return _AckClient(
            s.host, s.port, identifier=s.client_id, username=s.username, password=s.password,
            will=will, keepalive=s.keepalive, timeout=s.publish_timeout, tls_context=self._tls,
            max_inflight_messages=self._window, socket_options=NODELAY, **kwargs)

    async def _publish(self, client: _AckClient, topic: str, payload: bytes, qos: int, retain: bool,
                       timeout: float | None = None) -> None:
        await client.publish_acked(topic, payload, qos, retain, _publish_properties(self.protocol == "5"),
                                   timeout=self.settings.publish_timeout if timeout is None else timeout)

    async def _subscribe(self, client: _AckClient, topic: str, v5: bool, *,
                         as_published: bool = False) -> None:
        """QoS 1. ``as_published`` (v5 Retain As Published, OASIS MQTT 5.0 §3.8.3.1), for commands: one
        published with the retain flag arrives with it and is refused even on its first, live delivery.
        Not for ``status``: there the retain flag must tell the stored message (sent at subscription) from
        one published now."""
        if v5 and as_published:
            await client.subscribe(topic, qos=0, options=SubscribeOptions(qos=1, retainAsPublished=True))
        else:
            await client.subscribe(topic, qos=1)

    async def _session(self, client: _AckClient, v5: bool) -> None:
        """One connection: read the table's retained status (duplicate instance?), go online (or step
        back), republish retained state, then publish the outbox, answer commands, replay, and watch the
        receive side until the connection ends."""
        self._props = _publish_properties(v5)
        if self.standby is not None:  # stepped back, standby not acknowledged yet: only that, then leave
            await self._announce_standby(client)
            return
        await self._subscribe(client, self.topics.status, v5)
        await self._subscribe(client, self.topics.cmd_filter, v5, as_published=True)
        # Mosquitto sends a subscription's retained messages right after its SUBACK, so whatever the
        # status subscription brought is queued before the second SUBACK returned: read it now.
        early: list[aiomqtt.Message] = []
        messages = client.messages
        while len(messages) > 0:
            early.append(await anext(messages))
        retained = [m for m in early if str(m.topic) == self.topics.status and m.retain]
        step_back = self._taken_over_by(retained[-1] if retained else None)
        if step_back is not None:
            await self._step_back(client, step_back, early)
            return
        await self._publish(client, self.topics.status, self._status_payload("online"), 1, True)
        self._went_online()
        for m in early:
            self._dispatch(client, m, v5)
        await self._republish_retained(client)
        tasks = [asyncio.create_task(self._listen(client, v5), name="mqtt-commands"),
                 asyncio.create_task(self._drain(client), name="mqtt-outbox"),
                 asyncio.create_task(self._replayer(client), name="mqtt-replay"),
                 asyncio.create_task(self._watch_link(client), name="mqtt-link")]
        stepped: DuplicateInstance | None = None
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                try:
                    t.result()  # re-raise MqttError from whichever ended first
                except _SteppedBack as exc:
                    stepped = exc.info
        finally:
            for t in tasks:
                t.cancel()
            _, stuck = await asyncio.wait(tasks, timeout=SESSION_TASKS_STOP)
            for t in tasks:
                if t in stuck:  # never let one task keep the relay from reconnecting: left behind
                    log.critical("relay_task_stuck", task=t.get_name(), seconds=SESSION_TASKS_STOP,
                                 message=f"relay task {t.get_name()} did not end when its session ended; "
                                         "left behind, the relay reconnects")
                    continue
                error = None if t.cancelled() else t.exception()
                if error is not None and not isinstance(error, aiomqtt.MqttError | _SteppedBack):
                    raise error
        if stepped is not None:
            await self._step_back(client, stepped, [])
            return
        if self._stopping.is_set():
            with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                await self._publish(client, self.topics.status, self._status_payload("offline"), 1, True,
                                    timeout=1.0)
                log.info("mqtt_offline_published")

    # -- duplicate instance -------------------------------------------------------------------------
    def _peek(self, message: aiomqtt.Message) -> _StatusPeek | None:
        payload = message.payload
        if not isinstance(payload, bytes | bytearray) or not payload:
            return None
        try:
            return _PEEK.decode(payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None

    def _foreign(self, st: _StatusPeek) -> bool:
        """Another process's status: another instance id. The journal epoch is not compared: a spare
        controller whose disk was cloned from the table's (an image, a VM snapshot, a restored backup)
        has a copy of the very same journal, so two live instances can share an epoch. A stale status
        of an earlier process of this journal is told by its time instead (:meth:`_taken_over_by`,
        :meth:`_on_status`)."""
        return bool(st.instance) and st.instance != self.instance

    def _taken_over_by(self, message: aiomqtt.Message | None) -> DuplicateInstance | None:
        """At connect: the retained status names another instance ``online`` that came after our own
        ``online`` (or after a v5 takeover): it took this table over while we were away, so we step
        back. A fresh process (never online yet) takes the table whatever the retained status says: an
        ``online`` there may be its own crashed predecessor's; a live duplicate then steps back itself."""
        st = self._peek(message) if message is not None else None
        if st is None or not self._foreign(st) or st.state not in _STATES_ONLINE:
            return None
        if self._online_ts is None:
            return None
        if self._taken_over or st.ts > self._online_ts:
            return DuplicateInstance(st.instance, st.epoch, self.settings.client_id, self._taken_over)
        return None

    def _went_online(self) -> None:
        payload = self._status_payload("online")
        try:
            self._online_ts = _PEEK.decode(payload).ts or _now_ts()
        except (msgspec.DecodeError, msgspec.ValidationError):
            self._online_ts = _now_ts()
        if self._first_online_ts is None:
            self._first_online_ts = self._online_ts
        if self._taken_over:  # the session is back and nobody newer holds the table: say what happened
            self._taken_over = False
            self._raise_duplicate(DuplicateInstance("", "", self.settings.client_id, True))
        self._takeover_backoff.reset()

    def _on_status(self, message: aiomqtt.Message) -> None:
        """A message on our own ``status`` topic while online: a live ``online`` from another instance is
        a newer duplicate (we step back); another instance's ``standby`` is a duplicate that stepped back
        for us (``DUPLICATE_INSTANCE``, and our status goes back on the retained topic), when it is live
        or (retained) newer than this process's first ``online``: a retained ``standby`` from before is
        an earlier process's, stepped back for someone else, maybe this journal's own predecessor."""
        st = self._peek(message)
        if st is None or not self._foreign(st):
            return
        if st.state in _STATES_ONLINE and not message.retain:
            raise _SteppedBack(DuplicateInstance(st.instance, st.epoch, self.settings.client_id, False))
        fresh = not message.retain or (self._first_online_ts is not None and st.ts > self._first_online_ts)
        if st.state == "standby" and fresh and st.instance not in self._duplicates:
            self._duplicates.add(st.instance)
            self._raise_duplicate(DuplicateInstance(st.instance, st.epoch, self.settings.client_id, False))
            self.republish_status()  # its standby replaced our status on the retained topic

    def _raise_duplicate(self, info: DuplicateInstance) -> None:
        """Log the duplicate at error and hand it to ``on_duplicate`` (the ``DUPLICATE_INSTANCE`` alarm)."""
        log.error("mqtt_duplicate_instance", client_id=self.settings.client_id, instance=self.instance,
                  other=info.other or None, other_epoch=info.other_epoch or None, taken_over=info.taken_over,
                  message=info.text())
        if self._on_duplicate is not None:
            try:
                self._on_duplicate(info)
            except Exception:  # the alarm is the app's business; the relay goes on
                log.exception("duplicate_instance_callback_failed")

    async def _step_back(self, client: _AckClient, info: DuplicateInstance,
                         early: Sequence[aiomqtt.Message]) -> None:
        """Become standby: publish our ``standby`` status (retained), refuse what commands already came,
        and end the session with a clean DISCONNECT (so the will is not published)."""
        self.standby = (f"instance {info.other} (journal epoch {info.other_epoch}) publishes for this table "
                        f"with client id {self.settings.client_id}: this instance {self.instance} stepped "
                        "back and publishes nothing until restarted")
        log.error("mqtt_duplicate_instance_standby", client_id=self.settings.client_id,
                  instance=self.instance, other=info.other, other_epoch=info.other_epoch,
                  taken_over=info.taken_over,
                  message=f"tablesense instance {self.instance} steps back to standby: another instance "
                          f"{info.other} (journal epoch {info.other_epoch}) publishes for table "
                          f"{self.settings.table} with client id {self.settings.client_id}; this one "
                          "publishes nothing until restarted")
        await self._announce_standby(client)  # first: the newer instance may take the session back at once
        for m in early:
            name = self.topics.command_name(str(m.topic))
            if name is not None:
                await self._answer(client, m, name, refusal=f"standby: tablesense instance {self.instance} "
                                   f"stepped back for instance {info.other}; send the command again")

    async def _announce_standby(self, client: _AckClient) -> None:
        """Publish our ``standby`` status (retained, QoS 1, at most 2 s); :attr:`standby_announced` once
        acknowledged. Never raises ``MqttError``: :meth:`run` tries again on a new connection."""
        try:
            await self._publish(client, self.topics.status, self._status_payload("standby"), 1, True,
                                timeout=2.0)
        except (aiomqtt.MqttError, TimeoutError) as exc:
            log.warning("mqtt_standby_not_announced", client_id=self.settings.client_id,
                        instance=self.instance, error=str(exc))
        else:
            self.standby_announced = True

    # -- the receive side ---------------------------------------------------------------------------
    async def _watch_link(self, client: _AckClient) -> None:
        """Close the connection once nothing arrived for :data:`DEAD_LINK_FACTOR` x keepalive (a PINGREQ
        goes out after :data:`PROBE_FACTOR` x keepalive of silence, so a live broker always answers in
        time); raises :class:`LinkDead`."""
        keepalive = float(self.settings.keepalive)
        probe_after, dead_after = PROBE_FACTOR * keepalive, DEAD_LINK_FACTOR * keepalive
        probed_for = -1.0
        while True:
            await asyncio.sleep(min(_LINK_TICK, keepalive / 8))
            rx_at = client.rx_at
            idle = time.monotonic() - rx_at
            if idle >= dead_after:
                self.dead_links += 1
                log.warning("mqtt_link_dead", idle_s=round(idle, 2), keepalive=self.settings.keepalive,
                            message=f"nothing from the broker for {idle:.1f} s (keepalive "
                                    f"{self.settings.keepalive} s): closing the connection")
                client.force_close()
                raise LinkDead(f"no packet from the broker for {idle:.1f} s "
                               f"(keepalive {self.settings.keepalive} s)")
            if idle >= probe_after and probed_for != rx_at:
                probed_for = rx_at
                client.ping()

    # -- replay ---------------------------------------------------------------------------------------
    def _drop_replays(self) -> None:
        if self._replay_queue:
            log.warning("mqtt_replay_dropped", rows=len(self._replay_queue),
                        message="connection ended during a replay; the consumer asks again")
        self._replay_queue.clear()
        self._replay_bytes = 0

    async def _replayer(self, client: _AckClient) -> None:
        """Publish queued replay rows in order, at most ``window`` in flight (:meth:`replay`)."""
        inflight: deque[tuple[str, asyncio.Future[None]]] = deque()
        try:
            while True:
                await self._replay_wakeup.wait()
                self._replay_wakeup.clear()
                while self._replay_queue:
                    row = self._replay_queue.popleft()
                    self._replay_bytes -= len(row.payload)
                    topic = self.topics.replay_for(_channel_name(row.channel), row.device)
                    if self._skip_too_large(row, topic, "replay"):
                        continue
                    inflight.append((topic, client.start_publish(topic, bytes(row.payload), 1, False,
                                                                 self._props)))
                    while inflight and (len(inflight) >= self._window or inflight[0][1].done()):
                        await self._replay_settle(*inflight.popleft())
                while inflight:
                    await self._replay_settle(*inflight.popleft())
        finally:
            for _, fut in inflight:
                fut.cancel()

    def _ack_timed_out(self, topic: str) -> NoReturn:
        """No PUBACK within ``publish_timeout``: the connection is taken for dead and closed at once (a
        graceful DISCONNECT could wait behind a full send buffer), and the session ends."""
        if self._client is not None:
            self._client.force_close()
        raise aiomqtt.MqttError(f"no acknowledgement for {topic} within {self.settings.publish_timeout:g} s")

    async def _replay_settle(self, topic: str, fut: asyncio.Future[None]) -> None:
        try:
            await wait_at_most(asyncio.shield(fut), self.settings.publish_timeout)
        except TimeoutError:
            self._ack_timed_out(topic)
        except PublishRejected as exc:
            self.rejected += 1
            log.error("mqtt_publish_rejected", topic=topic, reason=str(exc.reason), code=exc.reason.value)
            return
        self.replayed += 1

    async def _publish_row(self, client: _AckClient, row: OutboxRowLike, mark: bool = True) -> bool:
        topic = self.topics.for_channel(_channel_name(row.channel), row.device)
        if self._skip_too_large(row, topic, "publish"):
            return False
        try:
            await self._publish(client, topic, bytes(row.payload), max(row.qos, 0), bool(row.retain))
        except PublishRejected as exc:
            self.rejected += 1
            log.error("mqtt_publish_rejected", topic=topic, msg_id=row.msg_id, row=row.row_id,
                      reason=str(exc.reason), code=exc.reason.value)
            return False
        if mark:
            await self._mark_delivered(row)
        return True

    async def _mark_delivered(self, row: OutboxRowLike) -> None:
        """Record the broker's acknowledgement of ``row`` in the journal (see :meth:`_mark_rows`)."""
        await self._mark_rows([row])

    async def _mark_rows(self, rows: Sequence[OutboxRowLike], *, defer: bool = True) -> None:
        """Record the broker's acknowledgements of ``rows`` (in row order) in the journal: in memory on
        the event loop when the journal's lock is free (:meth:`Journal.try_mark_delivered`), else kept
        (``defer``, up to :data:`MAX_DEFERRED_MARKS` rows) and recorded with the next acknowledgements
        or when the relay is idle, so that a busy journal never makes the relay wait for a worker
        thread; otherwise in ONE worker thread call (one thread hop for a burst of acknowledgements, each
        row still its own ``mark_delivered``). Deferred rows are not published again in this session; a
        crash before they are recorded republishes them once, like any unsealed mark. A
        :class:`JournalError` (e.g. a full disk) is logged at critical once per failing spell
        (``journal_mark_failed``; counted in ``mark_failures``) and otherwise ignored: the row stays
        undelivered in the journal, so it is published again, with the same ``msg_id``, after the next
        reconnect or restart (at-least-once; subscribers drop the duplicate). The first mark that
        succeeds again logs ``journal_mark_recovered``. Any other exception is raised after the rows
        marked before it are counted."""
        if rows:
            skipped = self._skipped
            if skipped:
                metrics.published([r for r in rows if r.row_id not in skipped])
            else:
                metrics.published(rows)  # acknowledged by the broker: card-to-publish latency
        if self._deferred_marks:
            rows = [*self._deferred_marks, *rows]
            self._deferred_marks = []
        if not rows:
            return
        skipped = self._skipped
        journal = self._journal

        def mark_all() -> tuple[list[JournalError | None], BaseException | None]:
            results: list[JournalError | None] = []
            for r in rows:
                try:
                    journal.mark_delivered(r.row_id)
                except JournalError as exc:
                    results.append(exc)
                except Exception as exc:
                    return results, exc
                else:
                    results.append(None)
            return results, None

        try_mark = getattr(journal, "try_mark_delivered", None)
        results: list[JournalError | None]
        unexpected: BaseException | None
        marked = try_mark([r.row_id for r in rows]) if try_mark is not None else False
        if marked:
            # recorded in memory without a thread hop (the journal's lock was free); sealing them, every
            # MARK_BATCH rows or MARK_DELAY seconds, is SQLite work: a worker thread does it
            results, unexpected = [None for _ in rows], None
            if journal.marks_due():  # type: ignore[attr-defined]
                try:
                    await asyncio.to_thread(journal.flush_marks)  # type: ignore[attr-defined]
                except JournalError as exc:
                    results[-1] = exc  # logged and counted once below; the marks stay waiting
        elif marked is None and defer and len(rows) <= MAX_DEFERRED_MARKS and not self._stopping.is_set():
            self._deferred_marks = list(rows)  # the journal is busy: recorded with the next ones
            self._arm_mark_timer()
            return
        else:
            # shielded and kept in _recording until the thread is done, also when the caller is cancelled:
            # until then the journal may not know these acknowledgements (_held_retained)
            recording = asyncio.ensure_future(asyncio.to_thread(mark_all))
            self._recording[recording] = rows
            recording.add_done_callback(lambda done: self._recording.pop(done, None))
            results, unexpected = await asyncio.shield(recording)
        for r, error in zip(rows, results, strict=False):
            if error is not None:
                self.mark_failures += 1
                if not self._marks_failing:
                    self._marks_failing = True
                    log.critical("journal_mark_failed", error=str(error), row=r.row_id, msg_id=r.msg_id,
                                 message="acknowledgements cannot be recorded; publishing goes on, unmarked "
                                         "rows are published again after the next reconnect or restart")
                continue
            if self._marks_failing:
                self._marks_failing = False
                log.warning("journal_mark_recovered", unmarked_rows=self.mark_failures)
            if r.row_id in skipped:
                skipped.discard(r.row_id)  # too large: marked, never published
                continue
            self.delivered += 1
        self._arm_mark_timer()
        if unexpected is not None:
            raise unexpected

    async def _republish_retained(self, client: _AckClient) -> None:
        """Publish again the latest delivered message of every retained topic
        (:meth:`Journal.retained_latest`; a broker restarted without persistence lost them), never an
        older one than the broker acknowledged: a topic for which the relay holds the acknowledgement of
        a newer message that the journal may not know yet (:meth:`_held_retained`) is left as the broker
        has it (docs/mqtt.md, "Retained topics after a reconnect").

        A message that fails its seal (:class:`JournalDamaged`, e.g. a byte altered in an old block) is
        never sent unverified: it is left out, the other topics are republished, and the outbox is
        published as always (docs/mqtt.md, "A damaged retained message"). Each such message is logged at
        critical (``journal_damaged_retained``) and raises one critical ``JOURNAL_DAMAGED`` alarm naming
        its topic, ``seq`` and block, published on ``alarms`` from memory (``seq`` 0, ``alarm_id``
        ``journal``, like the app's journal alarms) once per process: at a later connection again only
        when the broker did not acknowledge it. Another :class:`JournalError` (the file cannot be read
        now) is logged at error and nothing is republished on this connection. Raises ``MqttError`` when
        the connection fails (the session ends)."""
        held = self._held_retained()
        rows, damaged = await asyncio.to_thread(self._retained_rows)
        for topic, row_id in [*held.items(), *((self.topics.for_channel(_channel_name(r.channel), r.device),
                                                 r.row_id) for r in rows)]:
            self._retained_acked[topic] = max(self._retained_acked.get(topic, 0), row_id)
        for topic, seq, why in damaged:
            if seq not in self._damage_alarmed:
                await self._raise_journal_damaged(client, topic, seq, why)
        for row in rows:
            topic = self.topics.for_channel(_channel_name(row.channel), row.device)
            if held.get(topic, 0) > row.row_id:
                log.info("mqtt_retained_not_republished", topic=topic, row=row.row_id, newer=held[topic],
                         message="the broker acknowledged a newer message on this topic")
                continue
            await self._publish_row(client, row, mark=False)

    def _retained_rows(self) -> tuple[list[OutboxRowLike], list[tuple[str, int, str]]]:
        """In a worker thread: ``(rows, damaged)``: the rows :meth:`_republish_retained` publishes, in
        ``seq`` order, and ``(topic, seq, reason)`` for each latest delivered retained message that fails
        its seal (``topic`` ``""`` and ``seq`` 0 when the journal does not tell which).

        :meth:`Journal.retained_latest` reads all of them at once and raises :class:`JournalDamaged` for
        the first that fails. Then each topic's latest delivered ``seq`` is taken from the journal's
        sealed state (:meth:`Journal.retained_topics`, the record ``retained_latest`` reads, complete once
        the waiting acknowledgements are recorded with ``flush_marks``) and each message is read on its own
        (:meth:`Journal.messages_by_seq`, verified against its block's seal), so one damaged block costs
        only the topics whose latest message it holds."""
        journal = self._journal
        try:
            return list(journal.retained_latest()), []
        except JournalDamaged as exc:
            failure = str(exc)
        except JournalError as exc:
            log.error("mqtt_retained_unreadable", error=str(exc),
                      message="retained topics not republished on this connection; the outbox is published")
            return [], []
        read = getattr(journal, "messages_by_seq", None)
        flush = getattr(journal, "flush_marks", None)
        if read is None or flush is None:
            return [], [("", 0, failure)]
        try:
            flush()  # every acknowledgement in the sealed state: an older row is never taken for the latest
        except JournalError:
            return [], [("", 0, failure)]
        topics = getattr(journal, "retained_topics", None)
        if topics is None:
            return [], [("", 0, failure)]
        record = topics()
        rows: list[OutboxRowLike] = []
        damaged: list[tuple[str, int, str]] = []
        for channel, device, seq in sorted(record, key=lambda t: int(t[2])):
            try:
                topic = self.topics.for_channel(str(channel), device)
            except KeyError:
                topic = f"{self.topics.base}/{channel}"
            try:
                rows.extend(read(int(seq), int(seq), 1))
            except JournalDamaged as exc:
                damaged.append((topic, int(seq), str(exc)))
            except JournalError as exc:
                log.error("mqtt_retained_unreadable", topic=topic, seq=seq, error=str(exc))
        return rows, damaged

    async def _raise_journal_damaged(self, client: _AckClient, topic: str, seq: int, why: str) -> None:
        """Log at critical and publish the ``JOURNAL_DAMAGED`` alarm for the retained message ``seq`` on
        ``topic`` that failed its seal (``why``: the journal's one line naming the block and the row);
        recorded as raised once the broker acknowledged it (or refused it: a negative acknowledgement is
        logged, never retried). Raises ``MqttError`` when the connection fails."""
        what = f"retained message seq {seq} on {topic}" if seq else "a retained message"
        text = (f"journal damaged: {what} fails its seal and is not republished; settling and delivery go on "
                f"(run tablesense verify): {why}")
        log.critical("journal_damaged_retained", topic=topic or None, seq=seq or None, error=why,
                     message=text)
        table = self.settings.table
        alarm = AlarmMessage(
            table=table, ts=_now_ts(), msg_id=f"{table}-{secrets.token_hex(4)}-journal-damaged",
            alarm_id="journal", code=AlarmCode.JOURNAL_DAMAGED.value,
            severity=ALARMS[AlarmCode.JOURNAL_DAMAGED].severity.value, text=text[:400], held=False)
        alarms = self.topics.for_channel("alarms")
        try:
            await self._publish(client, alarms, encode_message(alarm), 1, False)
        except PublishRejected as exc:
            self.rejected += 1
            log.error("mqtt_publish_rejected", topic=alarms, msg_id=alarm.msg_id, reason=str(exc.reason),
                      code=exc.reason.value)
        self._damage_alarmed.add(seq)

    def _held_retained(self) -> dict[str, int]:
        """Topic -> highest row id of the retained rows the broker acknowledged whose acknowledgement the
        relay holds but may not have written to the journal yet: deferred while the journal was busy
        (:attr:`_deferred_marks`) or being recorded by a worker thread (:attr:`_recording`). The
        journal's :meth:`~Journal.retained_latest` names an older row for such a topic."""
        held: dict[str, int] = {}
        for rows in (self._deferred_marks, *self._recording.values()):
            for r in rows:
                if r.retain:
                    topic = self.topics.for_channel(_channel_name(r.channel), r.device)
                    held[topic] = max(held.get(topic, 0), r.row_id)
        return held

    def _arm_mark_timer(self) -> None:
        """Write the acknowledgements waiting in memory :data:`SEAL_MARKS_AFTER` seconds after the last
        one (:meth:`_seal_marks_later`), unless the journal has no ``flush_marks`` (an in-memory outbox)."""
        self._last_mark = time.monotonic()
        if getattr(self._journal, "flush_marks", None) is None or self._stopping.is_set():
            return
        if self._mark_timer is None or self._mark_timer.done():
            self._mark_timer = asyncio.create_task(self._seal_marks_later(), name="mqtt-marks")

    async def _seal_marks_later(self) -> None:
        """Once no acknowledgement was recorded for :data:`SEAL_MARKS_AFTER` seconds, write the waiting
        ones (:meth:`Journal.flush_marks`, in a worker thread; nothing to do when an append or a batch
        wrote them already). A :class:`JournalError` is logged and counted like a failed mark
        (:meth:`_mark_rows`); the marks stay waiting for the next write."""
        flush = getattr(self._journal, "flush_marks", None)
        if flush is None:
            return
        while (wait := self._last_mark + SEAL_MARKS_AFTER - time.monotonic()) > 0:
            await asyncio.sleep(wait)  # still acknowledging: wait for the quiet (batches write themselves)
        try:
            if self._deferred_marks:
                await self._mark_rows((), defer=False)
            await asyncio.to_thread(flush)
        except JournalError as exc:
            self.mark_failures += 1
            if not self._marks_failing:
                self._marks_failing = True
                log.critical("journal_mark_failed", error=str(exc),
                             message="acknowledgements cannot be recorded; publishing goes on, unmarked "
                                     "rows are published again after the next reconnect or restart")
        except Exception:  # never let the timer take anything down; the next write records them
            log.exception("journal_mark_flush_failed")

    async def _drain(self, client: _AckClient) -> None:
        """Publish undelivered rows in row order, at most ``window`` in flight, until stopping.

        One connection sends PUBLISH packets in order and the broker forwards them in order (OASIS MQTT
        5.0 §4.6), so a window keeps the order while not waiting a round trip per message; rows are
        marked delivered in row order as their acknowledgements arrive, the rows acknowledged together
        recorded at once (:meth:`_settle_head`, :meth:`_mark_rows`). Any ``MqttError`` ends the
        session (the next one starts again from the first undelivered row).
        """
        after = 0
        retry_at = math.inf
        inflight: deque[tuple[OutboxRowLike, str, asyncio.Future[None]]] = deque()
        if self._deferred_marks:  # acknowledged in the last session: recorded before reading the outbox
            await self._mark_rows((), defer=False)
        self._reread = True  # a new session starts from the first undelivered row
        waited: asyncio.Future[None] | None = None  # the in-flight head waited for, and since when
        waited_since = 0.0
        try:
            while not self._stopping.is_set():
                if time.monotonic() >= retry_at:
                    if self._deferred_marks:  # recorded first: the outbox is read again from its start
                        await self._mark_rows((), defer=False)
                    after, retry_at = 0, math.inf
                    self._reread = True
                self._wakeup.clear()
                rows: Sequence[OutboxRowLike]
                if self._reread:
                    # every row committed before this read is in it (up to the batch), every row
                    # committed after it is handed over by notify(): rows at or before ``after`` are
                    # skipped, so none is published twice and none is missed
                    self._reread = False
                    rows = await asyncio.to_thread(self._journal.pending, self._batch, after)
                    if len(rows) >= self._batch:
                        self._reread = True  # more to read
                else:
                    rows = [r for r in self._handed if r.row_id > after]
                    self._handed.clear()
                if not rows:
                    if self._reread or self._handed:
                        continue
                    if inflight and inflight[0][2].done():
                        if not await self._settle_head(inflight) and retry_at == math.inf:
                            retry_at = time.monotonic() + self._retry_rejected_after
                        continue
                    # nothing new: wait for new rows, the head's acknowledgement (publishing new rows
                    # meanwhile, never waiting for a whole burst's acknowledgements first), the retry of
                    # rejected rows or of acknowledgements deferred while the journal was busy
                    now = time.monotonic()
                    deadlines = [retry_at]
                    if inflight:
                        head = inflight[0][2]
                        if head is not waited:
                            waited, waited_since = head, now
                            head.add_done_callback(self._wake)
                        deadlines.append(waited_since + self.settings.publish_timeout)
                    if self._deferred_marks:
                        deadlines.append(now + DEFERRED_MARKS_RETRY)
                    deadline = min(deadlines)
                    if deadline > now:
                        with contextlib.suppress(TimeoutError):
                            await wait_at_most(self._wakeup.wait(),
                                               None if deadline == math.inf else deadline - now)
                    now = time.monotonic()
                    if inflight and not inflight[0][2].done() and now >= waited_since + \
                            self.settings.publish_timeout:
                        await self._settle_head(inflight, timeout=0.0)  # raises: the session ends
                    if self._deferred_marks and not self._wakeup.is_set():
                        await self._mark_rows(())
                    continue
                for i, row in enumerate(rows):
                    if self._stopping.is_set():
                        break
                    topic = self.topics.for_channel(_channel_name(row.channel), row.device)
                    after = row.row_id
                    if self._skip_too_large(row, topic, "publish") or self._superseded(row, topic):
                        # never sent (the broker would drop the connection: a reconnect loop; or it
                        # would take a retained topic back); marked delivered in row order with the
                        # rows around it, so it is not tried again
                        self._skipped.add(row.row_id)
                        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                        done.set_result(None)
                        inflight.append((row, topic, done))
                    else:
                        inflight.append((row, topic, client.start_publish(
                            topic, bytes(row.payload), max(row.qos, 0), bool(row.retain), self._props)))
                    if i == 0 and len(rows) > 1:
                        client.write_now()  # the first goes out now, the rest together once queued
                    while inflight and (len(inflight) >= self._window or inflight[0][2].done()):
                        if not await self._settle_head(inflight) and retry_at == math.inf:
                            retry_at = time.monotonic() + self._retry_rejected_after
            while inflight:  # stopping: the acknowledgements of what is in flight (stop() bounds the wait)
                await self._settle_head(inflight)
        finally:
            for _, _, fut in inflight:
                fut.cancel()

    def _wake(self, _fut: asyncio.Future[None]) -> None:
        """Done callback of the in-flight head the relay waits for: wake :meth:`_drain`."""
        self._wakeup.set()

    async def _settle_head(self, inflight: deque[tuple[OutboxRowLike, str, asyncio.Future[None]]], *,
                           timeout: float | None = None) -> bool:
        """Await the oldest in-flight publish (at most ``timeout`` seconds, default the settings'
        ``publish_timeout``), then take it and every publish after it that is already
        acknowledged (in row order, up to the first still in flight) off ``inflight``; mark the
        acknowledged rows delivered together (:meth:`_mark_rows`), count and log negative
        acknowledgements. ``False`` when any was rejected. A timeout raises ``MqttError`` (the session
        ends)."""
        row, topic, fut = inflight[0]
        if not fut.done():  # mostly done already: no timer to arm and cancel
            try:
                await wait_at_most(asyncio.shield(fut), self.settings.publish_timeout
                                   if timeout is None else timeout)
            except TimeoutError:
                self._ack_timed_out(topic)
            except PublishRejected:
                pass  # counted below
        acked: list[OutboxRowLike] = []
        ok = True
        while inflight and inflight[0][2].done():
            row, topic, fut = inflight.popleft()
            exc = fut.exception() if not fut.cancelled() else None
            if isinstance(exc, PublishRejected):
                ok = False
                self.rejected += 1
                log.error("mqtt_publish_rejected", topic=topic, msg_id=row.msg_id, row=row.row_id,
                          reason=str(exc.reason), code=exc.reason.value)
            elif exc is not None or fut.cancelled():
                inflight.appendleft((row, topic, fut))
                await self._mark_rows(acked)
                fut.result()  # re-raise what paho failed it with
            else:
                acked.append(row)
                if row.retain and self._retained_acked.get(topic, 0) < row.row_id:
                    self._retained_acked[topic] = row.row_id
        await self._mark_rows(acked)
        return ok

    async def _listen(self, client: _AckClient, v5: bool) -> None:
        async for message in client.messages:
            self._dispatch(client, message, v5)

    def _dispatch(self, client: _AckClient, message: aiomqtt.Message, v5: bool) -> None:
        """Route one received message: our status (duplicate instance), or a command (answered in a task
        of its own). May raise :class:`_SteppedBack`."""
        topic = str(message.topic)
        if topic == self.topics.status:
            self._on_status(message)
            return
        name = self.topics.command_name(topic)
        if name is None:
            return
        if not message.payload:
            return  # an empty message clears a retained command (our own doing): nothing to answer
        task = asyncio.create_task(self._answer(client, message, name))
        self._command_tasks.add(task)
        task.add_done_callback(self._command_tasks.discard)

    async def _answer(self, client: _AckClient, message: aiomqtt.Message, name: str,
                      refusal: str | None = None) -> None:
        props = message.properties
        payload = message.payload if isinstance(message.payload, bytes | bytearray) else str(
            message.payload or "").encode()
        response_topic = getattr(props, "ResponseTopic", None) if props is not None else None
        correlation = getattr(props, "CorrelationData", None) if props is not None else None
        expiry = getattr(props, "MessageExpiryInterval", None) if props is not None else None
        retained = bool(message.retain)
        try:
            request = parse_command(name, bytes(payload), retained=retained,
                                    message_expiry=expiry if isinstance(expiry, int) else None)
            if response_topic is None:
                response_topic, correlation = request.response_topic, request.correlation_data
            if refusal is not None:
                ok, reason = False, refusal
            elif self._on_command is None:
                ok, reason = False, "this daemon accepts no commands"
            else:
                ok, reason = await self._on_command(request)
        except CommandRejected as exc:
            ok, reason = False, str(exc)
        except Exception as exc:  # a command must never take the relay down
            log.exception("command_failed", command=name)
            ok, reason = False, f"internal error: {type(exc).__name__}"
        log.info("command_answered", command=name, ok=ok, reason=reason)
        if retained:
            await self._clear_retained(client, str(message.topic))
        if not isinstance(response_topic, str) or not response_topic:
            return
        refused = reply_topic_allowed(self.topics, response_topic)
        if refused is not None:  # refused silently: no reply where signage reads or the broker chokes
            log.warning("command_reply_refused", command=name, reason=refused,
                        topic=response_topic[:MAX_REPLY_TOPIC_CHARS].encode("utf-8", "backslashreplace")
                        .decode("ascii", "backslashreplace"))
            return
        props_out: Properties | None = None
        if self.protocol == "5":
            props_out = _props(PacketTypes.PUBLISH)
            props_out.ContentType = "application/json"
            if correlation is not None:
                props_out.CorrelationData = bytes(correlation)
        body = json.dumps({"ok": ok, "reason": reason, "command": name}).encode()
        try:
            await client.publish_acked(response_topic, body, 1, False, props_out,
                                       timeout=self.settings.publish_timeout)
        except aiomqtt.MqttError:
            pass  # the session notices a dead connection itself
        except Exception as exc:  # never a "Task exception was never retrieved" from a reply
            log.warning("command_reply_failed", command=name, error=f"{type(exc).__name__}: {str(exc)[:160]}")

    async def _clear_retained(self, client: _AckClient, topic: str) -> None:
        """Delete a retained command from the broker (an empty retained message, MQTT 5.0 §3.3.1.3), so
        that it is not delivered again at every reconnect; the refusal is journaled already."""
        try:
            await client.publish_acked(topic, b"", 1, True, None, timeout=self.settings.publish_timeout)
        except Exception as exc:  # the ACL may not allow it: the next delivery is refused again
            log.warning("retained_command_not_cleared", topic=topic, error=f"{type(exc).__name__}: {exc}")
        else:
            log.warning("retained_command_cleared", topic=topic)


def _now_ts() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
