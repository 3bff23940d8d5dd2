"""MQTT publishing for one table: connection settings, the topic map, and the outbox relay.

The relay is the only publisher of journaled messages. It reads the journal's outbox in row order and
publishes each row at its QoS over one connection (a small window in flight, in order), and marks a row
delivered only after the broker acknowledged it (PUBACK). Data flows one way (bytes -> events -> round ->
settlements -> journal -> MQTT): the
machine's emits are journaled before anything is published, so a broker outage or a restart never loses
a message; after a reconnect the relay starts again from the first undelivered row, with the same
``msg_id`` (docs/journal.md).

aiomqtt 2.5.1 specifics handled here:

* a fresh client object per connection attempt, fixed client id, MQTT v5 with ``clean_start=False`` set
  explicitly and a Session Expiry Interval (without it an MQTT 5 session ends with the connection),
  falling back to MQTT 3.1.1 with
  ``clean_session=False`` when the broker refuses v5 (CONNACK 0x84 / 1) or never answers a v5 CONNECT
  (amqtt 0.12 does that: the attempts then alternate until one gets a CONNACK);
* a v5 PUBACK with a reason code >= 0x80 (e.g. 0x87 Not authorized from a Mosquitto ACL) is reported by
  :class:`PublishRejected`, not taken for success: aiomqtt 2.x drops the reason code, so
  :class:`_AckClient` records it from paho's ``on_publish`` (callback API v2), which carries it;
* in-flight publishes are not failed on disconnect by aiomqtt, so every publish has its own timeout;
* reconnect with exponential backoff and full jitter; the retained ``status`` topic carries
  ``online``/``offline`` and is also the MQTT will; retained state is republished from the
  journal on every reconnect, and the command subscription is renewed.

The relay never dies (docs/reliability.md, scenario 6): a journal that cannot record an acknowledgement
(:class:`~daemon.journal.errors.JournalError` from ``mark_delivered``, e.g. a full disk) is logged once at
critical (``journal_mark_failed``) and publishing goes on; the unmarked rows are published once more, with
the same ``msg_id``, after the next reconnect or restart, and subscribers drop the duplicates. Any other
unexpected exception is logged at critical (``relay_crashed``) and the relay starts over with backoff.

Commands arrive on ``{prefix}/{table}/cmd/{name}`` and are answered ``{"ok": bool, "reason": str}`` on the
MQTT v5 Response Topic with the request's Correlation Data (OASIS MQTT 5.0 §4.10). A 3.1.1 client may
instead put ``"response_topic"`` and ``"correlation_data"`` in the JSON request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
import socket
import ssl
import stat
import time
import tomllib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiomqtt
import paho.mqtt.client as paho
from aiomqtt.exceptions import MqttConnectError
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from tablesense.daemon import metrics
from tablesense.daemon.journal.errors import JournalError
from tablesense.daemon.logging import get_logger

__all__ = [
    "CHANNEL_TOPICS",
    "MAX_COMMAND_BYTES",
    "CommandRejected",
    "CommandRequest",
    "CredentialsError",
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

MAX_COMMAND_BYTES = 4096
"""Largest accepted command payload (inputs are bounded, docs/security.md "Bounds")."""

NODELAY = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)
"""Socket options for every MQTT connection: no Nagle delay (paho and aiomqtt leave it on, which adds up
to ~40 ms to small publishes waiting behind an unacknowledged segment)."""

_CONNACK_TIMEOUT = 3.0
"""Seconds to wait for CONNACK before the connection attempt counts as failed."""

_UNSUPPORTED_PROTOCOL = (0x84, 1)
"""CONNACK codes meaning "this broker does not speak MQTT v5" (v5 0x84; 3.1.1 code 1)."""


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


class CommandRejected(ValueError):
    """A command request that cannot be parsed; ``str(exc)`` is the reason sent back to the requester."""


@dataclass(frozen=True, slots=True)
class MqttSettings:
    """Everything needed to reach the broker for one table.

    ``protocol``: ``"5"`` or ``"3.1.1"``; with ``fallback`` a broker refusing v5 is retried with 3.1.1.
    ``session_expiry``: seconds the broker keeps our session (and queued QoS 1 messages) while we are
    away. ``backoff_min``/``backoff_max``: reconnect delay bounds in seconds (exponential, full jitter).
    ``publish_timeout``: seconds to wait for a PUBACK before the connection is considered dead.
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
    backoff_max: float = 30.0
    publish_timeout: float = 10.0
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

    def for_channel(self, channel: str, device: str | None = None) -> str:
        """Topic for an outbox row of ``channel`` (raises ``KeyError`` for an unknown channel)."""
        suffix = CHANNEL_TOPICS[channel.lower()]
        if suffix == "devices":
            return f"{self.base}/devices/{device or 'unknown'}"
        return f"{self.base}/{suffix}"

    def public_filters(self) -> list[str]:
        """Subscription filters for every topic signage may read (everything but ``floor/`` and ``cmd/``)."""
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
    if _text_problem(topic, controls=True) is not None:
        return "response topic is not valid text"
    return None


@dataclass(frozen=True, slots=True)
class CommandRequest:
    """A parsed command: ``name`` (from the topic), ``args`` (JSON object), ``operator`` identity."""

    name: str
    args: dict[str, Any]
    operator: str
    response_topic: str | None = None
    correlation_data: bytes | None = None


MAX_OPERATOR_CHARS = 128
"""Longest operator identity accepted (inputs are bounded, docs/security.md "Bounds")."""

MAX_COMMAND_ARGS = 8
"""Most entries accepted in a command's ``args`` object."""

MAX_ARG_CHARS = 256
"""Longest ``args`` key, and longest ``args`` value (a string, or the JSON text of any other value)."""

MAX_REPLY_TOPIC_CHARS = 256
"""Longest response topic the daemon answers on."""


def _text_problem(text: str, *, controls: bool) -> str | None:
    """Why ``text`` cannot be journaled or published as Unicode scalar text, else ``None``.

    A lone surrogate (``"\\ud800"`` in JSON decodes to one) cannot be encoded as UTF-8; with ``controls``
    C0/C1 control characters (and DEL) are refused as well (an operator identity is one printable line).
    """
    for ch in text:
        o = ord(ch)
        if 0xD800 <= o <= 0xDFFF:
            return f"lone surrogate U+{o:04X}"
        if controls and (o < 0x20 or 0x7F <= o < 0xA0):
            return f"control character U+{o:04X}"
    return None


def _check_text(what: str, text: str, limit: int, *, controls: bool = False) -> None:
    if len(text) > limit:
        raise CommandRejected(f"command {what} too long ({len(text)} > {limit} characters)")
    problem = _text_problem(text, controls=controls)
    if problem is not None:
        raise CommandRejected(f"command {what} is not valid text ({problem})")


def _check_json_text(what: str, value: Any, depth: int = 0) -> None:
    """Every string (key or value) inside a JSON value is Unicode scalar text."""
    if isinstance(value, str):
        problem = _text_problem(value, controls=False)
        if problem is not None:
            raise CommandRejected(f"command {what} is not valid text ({problem})")
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_json_text(what, k, depth + 1)
            _check_json_text(what, v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_json_text(what, v, depth + 1)


def parse_command(name: str, payload: bytes) -> CommandRequest:
    """Parse a command request body ``{"operator": str, "args": {...}}`` (``args`` optional).

    MQTT 3.1.1 requesters (no v5 properties) may add ``"response_topic"`` and ``"correlation_data"``.

    Pure. Raises :class:`CommandRejected` (the one-line reason to send back) for an oversize payload
    (more than :data:`MAX_COMMAND_BYTES`), non-UTF-8 or non-JSON bodies, a non-object body, a missing or
    empty ``operator`` (every command carries the operator's identity), an operator longer than
    :data:`MAX_OPERATOR_CHARS` or holding a control character, non-object ``args``, more than
    :data:`MAX_COMMAND_ARGS` args, an arg key or value (values as JSON text) longer than
    :data:`MAX_ARG_CHARS`, and any string anywhere (operator, args keys and values, response topic,
    correlation data) that is not Unicode scalar text (a lone surrogate such as ``"\\ud800"`` decodes
    from JSON but cannot be journaled or published as UTF-8).
    """
    if len(payload) > MAX_COMMAND_BYTES:
        raise CommandRejected(f"command payload too large ({len(payload)} > {MAX_COMMAND_BYTES} bytes)")
    if not name or len(name) > 64 or not all(c.isascii() and (c.isalnum() or c in "_-") for c in name):
        raise CommandRejected(f"invalid command name {name[:64]!r}")
    try:
        body = json.loads(payload.decode("utf-8")) if payload else {}
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CommandRejected(f"command payload is not JSON: {str(exc)[:120]}") from None
    if not isinstance(body, dict):
        raise CommandRejected("command payload must be a JSON object")
    operator = body.get("operator")
    if not isinstance(operator, str) or not operator.strip():
        raise CommandRejected("command needs an 'operator' (non-empty string)")
    operator = operator.strip()
    _check_text("operator", operator, MAX_OPERATOR_CHARS, controls=True)
    args = body.get("args", {})
    if not isinstance(args, dict):
        raise CommandRejected("command 'args' must be a JSON object")
    if len(args) > MAX_COMMAND_ARGS:
        raise CommandRejected(f"command has too many args ({len(args)} > {MAX_COMMAND_ARGS})")
    for key, value in args.items():
        _check_text("arg name", key, MAX_ARG_CHARS, controls=True)
        _check_json_text(f"arg {key!r}", value)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if len(text) > MAX_ARG_CHARS:
            raise CommandRejected(f"command arg {key!r} too long ({len(text)} > {MAX_ARG_CHARS} characters)")
    reply_to = body.get("response_topic")
    corr = body.get("correlation_data")
    if isinstance(reply_to, str):
        _check_text("response_topic", reply_to, MAX_REPLY_TOPIC_CHARS, controls=True)
    if isinstance(corr, str):
        _check_text("correlation_data", corr, MAX_COMMAND_BYTES)
    return CommandRequest(name=name, args=args, operator=operator,
                          response_topic=reply_to if isinstance(reply_to, str) and reply_to else None,
                          correlation_data=corr.encode() if isinstance(corr, str) else None)


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


class _AckClient(aiomqtt.Client):
    """aiomqtt 2.5.1 client that keeps the MQTT v5 PUBACK reason code of each publish.

    aiomqtt's ``_on_publish`` ignores ``reason_code`` (aiomqtt 2.5.1 client.py); paho's callback API v2 passes
    it, so this subclass records it by packet id and :meth:`publish_acked` raises
    :class:`PublishRejected` for codes >= 0x80. Relies on aiomqtt 2.x internals (``_client``,
    ``_pending_call``, ``_pending_publishes``, ``_wait_for``); pinned ``aiomqtt>=2.5.1,<3`` and covered by
    tests against a Mosquitto ACL.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ack_reasons: dict[int, ReasonCode] = {}
        self._started: dict[int, tuple[str, asyncio.Future[None]]] = {}
        self._client.connect_timeout = 3.0
        self.pending_calls_threshold = 1000  # the relay's window is deliberate, not a backlog

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


def _publish_properties(v5: bool) -> Properties | None:
    if not v5:
        return None
    props = _props(PacketTypes.PUBLISH)
    props.ContentType = "application/json"
    props.PayloadFormatIndicator = 1
    return props


class Relay:
    """Publishes the journal's outbox, answers commands, and keeps the table's availability topic.

    ``settings``: :class:`MqttSettings`. ``journal``: :class:`OutboxJournal`. ``status_payload(state)``:
    the retained status JSON for ``"online"``/``"offline"`` (also used as the will). ``on_command``: see
    :data:`CommandHandler` (``None`` -> commands are refused). Call :meth:`notify` after every journal
    append; run :meth:`run` as a task; :meth:`stop` publishes ``offline`` (when connected) and returns
    within ``stop_timeout`` seconds, also while a reconnect is backing off.

    Attributes read by the app and tests: ``connected`` (bool), ``delivered`` (rows marked delivered),
    ``rejected`` (negative acknowledgements seen), ``connects`` (successful connections), ``protocol``
    (``"5"`` or ``"3.1.1"`` in use), ``mark_failures`` (acknowledged rows the journal could not mark
    delivered: published again after the next reconnect or restart), ``crashes`` (unexpected exceptions
    the relay survived by starting over).
    """

    def __init__(self, settings: MqttSettings, journal: OutboxJournal,
                 status_payload: Callable[[str], bytes], on_command: CommandHandler | None = None,
                 tls: ssl.SSLContext | None = None, batch: int = 256, retry_rejected_after: float = 30.0,
                 window: int = 32) -> None:
        self.settings = settings
        self.topics = Topics(settings.prefix, settings.table)
        self._journal = journal
        self._status_payload = status_payload
        self._on_command = on_command
        self._tls = tls
        self._batch = batch
        self._window = max(1, window)
        self._props: Properties | None = None
        self._retry_rejected_after = retry_rejected_after
        self._wakeup = asyncio.Event()
        self._stopping = asyncio.Event()
        self._client: _AckClient | None = None
        self._command_tasks: set[asyncio.Task[None]] = set()
        self._status_tasks: set[asyncio.Task[None]] = set()
        self._marks_failing = False
        self.protocol = "3.1.1" if settings.protocol.startswith("3") else "5"
        self._v5_confirmed = False
        self.connected = False
        self.delivered = 0
        self.rejected = 0
        self.connects = 0
        self.mark_failures = 0
        self.crashes = 0

    # -- public API ---------------------------------------------------------------------------------
    def notify(self) -> None:
        """Wake the relay: new rows were appended to the outbox."""
        self._wakeup.set()

    def republish_status(self) -> None:
        """Publish the retained status again now (its payload from ``status_payload("online")`` as it is
        at this moment), e.g. when the app's journal fails or recovers, so that the floor does not learn it
        only at the next reconnect. Does nothing while disconnected (every connection publishes the
        status first) or stopping. Returns at once: the publish runs in a task of its own, and a failure
        is left to the relay's session (which reconnects and publishes the status again)."""
        client = self._client
        if client is None or not self.connected or self._stopping.is_set():
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
        traceback) and the relay starts over after a backoff that grows with consecutive crashes."""
        backoff = self.settings.backoff_min
        crash_streak = 0
        while not self._stopping.is_set():
            crashed = False
            v5 = self.protocol == "5"
            handshake_done = False
            try:
                client = self._make_client(v5)
                self._client = client
                client.timeout = min(self.settings.publish_timeout, _CONNACK_TIMEOUT)
                async with client:
                    handshake_done = True
                    client.timeout = self.settings.publish_timeout
                    self._v5_confirmed = self._v5_confirmed or v5
                    self.connected = True
                    self.connects += 1
                    backoff = self.settings.backoff_min
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
                        and self.settings.protocol == "5" and "timed out" in str(exc)):
                    self.protocol = "3.1.1" if v5 else "5"
                    log.warning("mqtt_handshake_timeout_switching_protocol", protocol=self.protocol)
            except Exception as exc:  # never die silently: the outbox would stay unpublished
                crashed = True
                self.crashes += 1
                crash_streak += 1
                log.critical("relay_crashed", error=f"{type(exc).__name__}: {exc}", crashes=self.crashes,
                             exc_info=True)
            finally:
                self.connected = False
                self._client = None
            if self._stopping.is_set():
                break
            if crashed:  # a repeating crash must not spin: back off over consecutive crashes
                backoff = max(backoff, min(self.settings.backoff_min * 2 ** crash_streak,
                                           self.settings.backoff_max))
            else:
                crash_streak = 0
            delay = random.uniform(backoff / 2, backoff)
            backoff = min(backoff * 2, self.settings.backoff_max)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=delay)

    async def stop(self, task: asyncio.Task[None] | None = None, stop_timeout: float = 3.0) -> None:
        """Stop publishing: finish the current publish briefly, publish ``offline``, disconnect.

        ``task``: the task running :meth:`run`, awaited (and cancelled after ``stop_timeout`` seconds).
        Never raises (but for the caller's own cancellation): a relay task that ended with an exception
        is logged at critical (``relay_task_failed``) so that the rest of the shutdown still runs.
        """
        self._stopping.set()
        self._wakeup.set()
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=stop_timeout)
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

    async def _session(self, client: _AckClient, v5: bool) -> None:
        self._props = _publish_properties(v5)
        await client.subscribe(self.topics.cmd_filter, qos=1)
        await self._publish(client, self.topics.status, self._status_payload("online"), 1, True)
        for row in await asyncio.to_thread(self._journal.retained_latest):
            await self._publish_row(client, row, mark=False)
        listener = asyncio.create_task(self._listen(client, v5), name="mqtt-commands")
        drain = asyncio.create_task(self._drain(client), name="mqtt-outbox")
        try:
            done, _ = await asyncio.wait({listener, drain}, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                t.result()  # re-raise MqttError from whichever ended first
        finally:
            for t in (listener, drain):
                t.cancel()
            for t in (listener, drain):
                with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
                    await t
        if self._stopping.is_set():
            with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                await self._publish(client, self.topics.status, self._status_payload("offline"), 1, True,
                                    timeout=1.0)
                log.info("mqtt_offline_published")

    async def _publish_row(self, client: _AckClient, row: OutboxRowLike, mark: bool = True) -> bool:
        topic = self.topics.for_channel(_channel_name(row.channel), row.device)
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

    async def _mark_rows(self, rows: Sequence[OutboxRowLike]) -> None:
        """Record the broker's acknowledgements of ``rows`` (in row order) in the journal, in ONE worker
        thread call (one thread hop for a burst of acknowledgements, not one per row; each row is still
        its own ``mark_delivered``). A :class:`JournalError` (e.g. a full disk) is logged at critical once
        per failing spell (``journal_mark_failed``; counted in ``mark_failures``) and otherwise ignored:
        the row stays undelivered in the journal, so it is published again, with the same ``msg_id``,
        after the next reconnect or restart (at-least-once; subscribers drop the duplicate). The first
        mark that succeeds again logs ``journal_mark_recovered``. Any other exception is raised after the
        rows marked before it are counted."""
        if not rows:
            return
        metrics.published(rows)  # acknowledged by the broker: card-to-publish latency
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

        results, unexpected = await asyncio.to_thread(mark_all)
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
            self.delivered += 1
        if unexpected is not None:
            raise unexpected

    async def _drain(self, client: _AckClient) -> None:
        """Publish undelivered rows in row order, at most ``window`` in flight, until stopping.

        One connection sends PUBLISH packets in order and the broker forwards them in order (OASIS MQTT
        5.0 §4.6), so a window keeps the order while not waiting a round trip per message; rows are
        marked delivered in row order as their acknowledgements arrive, the rows acknowledged together in
        one worker-thread call (:meth:`_settle_head`). Any ``MqttError`` ends the
        session (the next one starts again from the first undelivered row).
        """
        after = 0
        retry_at = math.inf
        inflight: deque[tuple[OutboxRowLike, str, asyncio.Future[None]]] = deque()
        try:
            while not self._stopping.is_set():
                if time.monotonic() >= retry_at:
                    after, retry_at = 0, math.inf
                self._wakeup.clear()
                rows = await asyncio.to_thread(self._journal.pending, self._batch, after)
                if not rows:
                    timeout = None if retry_at == math.inf else max(0.0, retry_at - time.monotonic())
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wakeup.wait(), timeout=timeout)
                    continue
                for row in rows:
                    if self._stopping.is_set():
                        break
                    topic = self.topics.for_channel(_channel_name(row.channel), row.device)
                    inflight.append((row, topic, client.start_publish(
                        topic, bytes(row.payload), max(row.qos, 0), bool(row.retain), self._props)))
                    after = row.row_id
                    while inflight and (len(inflight) >= self._window or inflight[0][2].done()):
                        if not await self._settle_head(inflight) and retry_at == math.inf:
                            retry_at = time.monotonic() + self._retry_rejected_after
                while inflight:
                    if not await self._settle_head(inflight) and retry_at == math.inf:
                        retry_at = time.monotonic() + self._retry_rejected_after
        finally:
            for _, _, fut in inflight:
                fut.cancel()

    async def _settle_head(self, inflight: deque[tuple[OutboxRowLike, str, asyncio.Future[None]]]) -> bool:
        """Await the oldest in-flight publish, then take it and every publish after it that is already
        acknowledged (in row order, up to the first still in flight) off ``inflight``; mark the
        acknowledged rows delivered together (:meth:`_mark_rows`), count and log negative
        acknowledgements. ``False`` when any was rejected. A timeout raises ``MqttError`` (the session
        ends)."""
        row, topic, fut = inflight[0]
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout=self.settings.publish_timeout)
        except TimeoutError:
            raise aiomqtt.MqttError(f"no acknowledgement for {topic} within "
                                    f"{self.settings.publish_timeout:g} s") from None
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
        await self._mark_rows(acked)
        return ok

    async def _listen(self, client: _AckClient, v5: bool) -> None:
        async for message in client.messages:
            name = self.topics.command_name(str(message.topic))
            if name is None:
                continue
            payload = message.payload if isinstance(message.payload, bytes | bytearray) else str(
                message.payload or "").encode()
            task = asyncio.create_task(self._answer(client, name, bytes(payload), message.properties))
            self._command_tasks.add(task)
            task.add_done_callback(self._command_tasks.discard)

    async def _answer(self, client: _AckClient, name: str, payload: bytes, props: Properties | None) -> None:
        response_topic = getattr(props, "ResponseTopic", None) if props is not None else None
        correlation = getattr(props, "CorrelationData", None) if props is not None else None
        try:
            request = parse_command(name, payload)
            if response_topic is None:
                response_topic, correlation = request.response_topic, request.correlation_data
            if self._on_command is None:
                ok, reason = False, "this daemon accepts no commands"
            else:
                ok, reason = await self._on_command(request)
        except CommandRejected as exc:
            ok, reason = False, str(exc)
        except Exception as exc:  # a command must never take the relay down
            log.exception("command_failed", command=name)
            ok, reason = False, f"internal error: {type(exc).__name__}"
        log.info("command_answered", command=name, ok=ok, reason=reason)
        if not isinstance(response_topic, str) or not response_topic:
            return
        refusal = reply_topic_allowed(self.topics, response_topic)
        if refusal is not None:  # refused silently: no reply where signage reads or the broker chokes
            log.warning("command_reply_refused", command=name, reason=refusal,
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
