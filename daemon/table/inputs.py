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
from tablesense.drivers.events import DeviceEvent, DeviceState

__all__ = ["COMMAND_NAMES", "Channel", "Command", "CommandReply", "Emit", "TableStart", "TimedInput"]

COMMAND_NAMES: tuple[str, ...] = ("void_round", "enter_card", "new_shoe", "ack_alarm")
"""Operator commands the machine accepts (``{prefix}/{table}/cmd/{name}``)."""


@dataclass(frozen=True, slots=True)
class Command:
    """An operator command.

    Attributes:
        name: one of :data:`COMMAND_NAMES`.
        args: string arguments: ``enter_card`` takes ``card`` (e.g. ``"QH"``); ``ack_alarm`` takes
            ``alarm`` (the alarm number); ``void_round`` takes optional ``reason``; ``new_shoe`` none.
        operator: the authenticated identity of who sent it (kept in the round record).
    """

    name: str
    args: Mapping[str, str] = field(default_factory=dict)
    operator: str = ""


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
class TimedInput:
    """One input to the machine with the ISO-8601 UTC time (``ts``) it arrived, set by the caller."""

    ts: str
    event: DeviceEvent | DeviceState | Command | TableStart


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
