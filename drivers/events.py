"""Typed device events: what codecs produce from device bytes and the round state machine consumes.

Every device event carries the ``device`` name it came from (the name in the table config) and the
device's own sequence number ``seq`` so that gaps are detectable (the journal and the state machine check
each device's numbers). Events are
frozen and slotted; they hold no timestamps (the journal stamps them on arrival).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tablesense.daemon.rules.cards import Card

__all__ = [
    "Button",
    "CardDrawn",
    "CardUnreadable",
    "DealerButton",
    "DeviceError",
    "DeviceEvent",
    "DeviceIdentity",
    "DeviceState",
    "Heartbeat",
    "LinkState",
    "ShoeStatus",
    "ShoeStatusKind",
    "SpotChanged",
    "SpotState",
]


@dataclass(frozen=True, slots=True)
class CardDrawn:
    """A card left the shoe and was read: ``card`` in draw order."""

    device: str
    seq: int
    card: Card


@dataclass(frozen=True, slots=True)
class CardUnreadable:
    """A card left the shoe but its rank or suit could not be read."""

    device: str
    seq: int


class ShoeStatusKind(StrEnum):
    """Shoe lifecycle and housing events."""

    NEW_SHOE = "new_shoe"
    """A freshly shuffled shoe was loaded."""
    BURN = "burn"
    """A card was burned (``card`` set when the shoe could read it). Burned cards never join a round."""
    CUT_CARD = "cut_card"
    """The cut card came out: finish this round, play one more, then the shoe ends (rules.md §1.3)."""
    EMPTY = "empty"
    """No cards left in the shoe."""
    LID_OPEN = "lid_open"
    LID_CLOSED = "lid_closed"


@dataclass(frozen=True, slots=True)
class ShoeStatus:
    """A shoe lifecycle event (new shoe, burn, cut card, empty, lid open/closed)."""

    device: str
    seq: int
    kind: ShoeStatusKind
    card: Card | None = None


@dataclass(frozen=True, slots=True)
class DeviceIdentity:
    """The device announced itself (at power-up, as the first frame of a session, and in answer to a
    status request).

    ``session`` tells one power-up of the device from the next (tsref 2: a boot counter or a random
    nonce, 1-16 of ``A-Z a-z 0-9 _ . -``; docs/protocol.md §4): a different session means the device
    restarted and numbers its frames afresh, so its frames are never resends of the old session's.
    ``""`` when the device does not send one (tsref 1).
    """

    device: str
    seq: int
    vendor: str
    model: str
    firmware: str
    serial: str
    session: str = ""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """The device is alive (no other information)."""

    device: str
    seq: int


@dataclass(frozen=True, slots=True)
class DeviceError:
    """The device reported an error code (vendor-defined ``code``, human ``text``)."""

    device: str
    seq: int
    code: str
    text: str


class SpotState(StrEnum):
    """State of one betting spot on a bet-sensor pad."""

    EMPTY = "empty"
    PLACED = "placed"
    LOCKED = "locked"


@dataclass(frozen=True, slots=True)
class SpotChanged:
    """A betting spot changed. ``amount`` is minor units from RFID pads, ``None`` for presence-only pads."""

    device: str
    seq: int
    spot: str
    state: SpotState
    amount: int | None


class Button(StrEnum):
    """Dealer buttons on the bet-pad controller."""

    NO_MORE_BETS = "no_more_bets"
    ROUND_END = "round_end"
    """Reveal / round end."""
    VOID_ROUND = "void_round"


@dataclass(frozen=True, slots=True)
class DealerButton:
    """The dealer pressed a button."""

    device: str
    seq: int
    button: Button


class LinkState(StrEnum):
    """A driver's view of its device link."""

    CONNECTING = "connecting"
    ONLINE = "online"
    STALE = "stale"
    """Connected but nothing heard for longer than the heartbeat allowance."""
    DISCONNECTED = "disconnected"


@dataclass(frozen=True, slots=True)
class DeviceState:
    """A driver's link state changed (not from the device itself, so it has no device ``seq``)."""

    device: str
    state: LinkState
    detail: str = ""


DeviceEvent = (CardDrawn | CardUnreadable | ShoeStatus | DeviceIdentity | Heartbeat | DeviceError
               | SpotChanged | DealerButton)
"""Events decoded from device bytes (each with the device's ``seq``)."""
