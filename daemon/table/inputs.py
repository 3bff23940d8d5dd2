"""What goes into and comes out of the round state machine.

In: :class:`TimedInput` (a device event from :mod:`drivers.events`, a driver's :class:`DeviceState`,
or an operator :class:`Command`) stamped by the caller with the ISO-8601 UTC time it arrived.
Out: :class:`Emit` (a message for one channel, with its MQTT retain flag and QoS) and, for commands, a
:class:`CommandReply`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from tablesense.daemon.messages import Message
from tablesense.drivers.events import DeviceEvent, DeviceState, LinkState

__all__ = ["COMMAND_NAMES", "RESEND_WINDOW", "ROUND_BOUND_COMMANDS", "SHOE_BOUND_COMMANDS", "Channel",
           "Command", "CommandReply", "DeviceSeed", "Emit", "InstanceConflict", "JournalOutage",
           "RejectedInput", "TableStart", "Tick", "TimedInput"]

COMMAND_NAMES: tuple[str, ...] = ("void_round", "enter_card", "new_shoe", "ack_alarm", "rescan")
"""Operator commands the machine accepts (``{prefix}/{table}/cmd/{name}``)."""

ROUND_BOUND_COMMANDS: frozenset[str] = frozenset({"void_round", "enter_card", "rescan"})
"""Commands that change a round: a command with a ``command_id`` names its round (``shoe``, ``round``
args) and is refused for any other round (docs/state-machine.md, "Commands")."""

SHOE_BOUND_COMMANDS: frozenset[str] = frozenset({"new_shoe"})
"""Commands that name the shoe they act on (``shoe`` arg) and are refused for any other."""

RESEND_WINDOW = 64
"""Device frames remembered per device (the protocol's unacknowledged-frame limit): a frame with the
number and the content of one of them, in the same device session, is a resend
(:meth:`daemon.table.machine.TableMachine.is_resend`)."""


@dataclass(frozen=True, slots=True)
class Command:
    """An operator command.

    Attributes:
        name: one of :data:`COMMAND_NAMES`.
        args: string arguments: ``void_round`` takes ``shoe``, ``round`` and optional ``reason``;
            ``enter_card`` ``shoe``, ``round`` and ``card`` (e.g. ``"QH"``); ``rescan`` ``shoe``,
            ``round`` and ``action`` (``keep`` or ``set_aside``); ``new_shoe`` ``shoe``; ``ack_alarm``
            ``alarm_id`` (old name ``alarm``). Numbers are decimal text.
        operator: the authenticated identity of who sent it (kept in the round record).
        command_id: the sender's id for this command (1-64 characters): a repeated id is answered with
            the first answer and applied once. ``""`` only in journals written before command ids
            existed: such commands are replayed as they were applied (no round binding).
        issued_at: the ISO 8601 UTC time the sender issued it (``""``: the MQTT message expiry stood in).
        refusal: set by the daemon before the machine sees the command (expired, retained): the machine
            records the command and answers this refusal without applying it.
    """

    name: str
    args: Mapping[str, str] = field(default_factory=dict)
    operator: str = ""
    command_id: str = ""
    issued_at: str = ""
    refusal: str = ""


@dataclass(frozen=True, slots=True)
class InstanceConflict:
    """The daemon found a second live tablesense instance for its table (the other stepped back to
    standby): the machine raises ``DUPLICATE_INSTANCE``. Journaled like every input.

    Attributes:
        other: the other instance's id (16 hex digits).
        client_id: the MQTT client id both use (or ours, when theirs differs).
        detail: one line for the alarm text.
    """

    other: str
    client_id: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class TableStart:
    """The daemon started (or restarted) for this table: the machine publishes the retained table info
    (:class:`daemon.messages.TableInfo`) from its config. Journaled like every input, so a replay
    reproduces the same emits; changes no round state.

    Attributes:
        reason: free text for the record, e.g. ``"start"``.
    """

    reason: str = "start"


@dataclass(frozen=True, slots=True)
class RejectedInput:
    """An input whose application raised (a defect in tablesense), journaled in its place.

    The machine applies none of the original input: it raises a critical, holding ``INPUT_REJECTED``
    alarm naming the input, and counts the device frame as received (``device``/``seq``), so the
    device's resend of it is recognised and no sequence gap is reported. The journal keeps the
    original input in full (``kind`` and ``payload``, the journal codec's form), so nothing is lost.

    Attributes:
        kind: the original input's kind (``CardDrawn``, ``Command`` ...).
        payload: the original input as the journal encodes it (JSON text).
        error: one line: the exception raised.
        device, seq: the original device frame's device name and sequence number (``None`` for a
            command or a link state).
    """

    kind: str
    payload: str
    error: str
    device: str | None = None
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: the app journals one when the machine's deal watchdog is due
    (:meth:`~daemon.table.machine.TableMachine.stall_due`), so the pure machine learns the time from a
    replayable input (its ``ts``) and raises ``DEAL_STALLED`` itself."""

    reason: str = "deal_watchdog"


@dataclass(frozen=True, slots=True)
class JournalOutage:
    """The journal could not be written for a while and can be again: recorded once writable, so the
    journal itself holds the outage the floor was told about from memory (``INTERNAL_ERROR``).

    Attributes:
        since: ISO-8601 UTC time of the first failed append.
        failures: appends that failed (their inputs were not applied; devices resend their frames).
        error: the first failure, one line.
    """

    since: str
    failures: int
    error: str


@dataclass(frozen=True, slots=True)
class DeviceSeed:
    """What a machine rebuilt from a later replay start knows of one device before the replayed inputs
    (:meth:`~daemon.table.machine.TableMachine.seed_devices`; the journal keeps it:
    :meth:`~daemon.journal.store.Journal.devices_before_replay`). Not an input: no time, not journaled.

    Attributes:
        device: the device name.
        seq: its last sequence number (``None``: never heard).
        session: the session of its latest identity frame before ``frames`` (``None``: none seen).
        link: its latest link state (``None``: none journaled).
        lost: disconnected since its last frame.
        reads_cards: it sent a card or a burn frame.
        frames: its last device frames (events, or ``RejectedInput`` with its ``device`` and ``seq``), in
            order: at least :data:`RESEND_WINDOW` of them, or all since the journal began keeping them;
            empty when the replay holds that many of its frames.
    """

    device: str
    seq: int | None = None
    session: str | None = None
    link: LinkState | None = None
    lost: bool = False
    reads_cards: bool = False
    frames: tuple[DeviceEvent | RejectedInput, ...] = ()


@dataclass(frozen=True, slots=True)
class TimedInput:
    """One input to the machine with the ISO-8601 UTC time (``ts``) it arrived, set by the caller."""

    ts: str
    event: (DeviceEvent | DeviceState | Command | TableStart | RejectedInput | Tick | JournalOutage
            | InstanceConflict)


class Channel(StrEnum):
    """Where an emitted message goes; the MQTT layer maps each to a topic under ``{prefix}/{table}/``."""

    STATUS = "status"
    ROUND = "round"
    RESULTS = "results"
    SETTLEMENTS = "settlements"
    ALARMS = "alarms"
    DEVICE = "devices"
    """``devices/{name}`` with :attr:`Emit.device` as the name."""
    FLOOR_ROUNDS = "floor/rounds"
    SCOREBOARD = "scoreboard"
    """Retained baccarat roads and shoe statistics (:class:`daemon.messages.ScoreboardMessage`)."""
    INFO = "info"
    """Retained table info: wagers, paytables, limits, seats (:class:`daemon.messages.TableInfo`)."""


PUBLIC_CHANNELS: frozenset[Channel] = frozenset(
    {Channel.STATUS, Channel.ROUND, Channel.RESULTS, Channel.SETTLEMENTS, Channel.ALARMS, Channel.DEVICE,
     Channel.SCOREBOARD, Channel.INFO})
"""Channels signage may read: they never carry a face-down card."""


@dataclass(frozen=True, slots=True)
class Emit:
    """A message to publish on ``channel`` (``device`` names the device for :attr:`Channel.DEVICE`)."""

    channel: Channel
    message: Message
    device: str | None = None
    retain: bool = False
    qos: int = 1


@dataclass(frozen=True, slots=True)
class CommandReply:
    """The answer to a command: ``ok``, or not with a one-line ``reason``."""

    ok: bool
    reason: str = ""
