"""Encoding of journaled inputs: ``(kind, payload)`` with ``kind`` the event's class name and
``payload`` the msgspec JSON of the event (pure: no I/O, no clock).

Every type in :mod:`drivers.events`, plus ``DeviceState`` and the state machine's ``Command`` and
``TableStart``, round-trips
exactly: ``decode_event(*encode_event(e)) == e``. A card is stored as ``{"rank": 12, "suit": "H"}``.
A kind this build does not know (a journal written by a newer tablesense) raises
:class:`~daemon.journal.errors.JournalDamaged` on decode rather than being skipped, because replaying
part of a round would settle on a guess.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tablesense.daemon.journal.errors import JournalDamaged
from tablesense.daemon.table.inputs import (
    Command,
    InstanceConflict,
    JournalOutage,
    RejectedInput,
    TableStart,
    Tick,
)
from tablesense.drivers.events import (
    CardDrawn,
    CardUnreadable,
    DealerButton,
    DeviceError,
    DeviceIdentity,
    DeviceState,
    Heartbeat,
    ShoeStatus,
    SpotChanged,
)

__all__ = ["decode_event", "encode_event", "event_device", "input_types", "register_input_type"]

_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (CardDrawn, CardUnreadable, ShoeStatus, DeviceIdentity, Heartbeat, DeviceError, SpotChanged,
                DealerButton, DeviceState, Command, TableStart, RejectedInput, Tick, JournalOutage,
                InstanceConflict)
}
_ENCODER = msgspec.json.Encoder()
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}


def register_input_type(cls: type[Any]) -> None:
    """Make ``cls`` (a dataclass or msgspec Struct) journalable under the kind ``cls.__name__``."""
    _TYPES[cls.__name__] = cls
    _DECODERS.pop(cls.__name__, None)


def input_types() -> dict[str, type[Any]]:
    """The known input kinds and their classes (a copy)."""
    return dict(_TYPES)


def encode_event(event: object) -> tuple[str, bytes]:
    """``(kind, JSON bytes)`` of a device event, ``DeviceState`` or ``Command``.

    Raises ``TypeError`` for a type that is not journalable (a programming error, caught before any
    row is written).
    """
    kind = type(event).__name__
    if _TYPES.get(kind) is not type(event):
        raise TypeError(f"cannot journal an input of type {type(event).__qualname__}")
    return kind, _ENCODER.encode(event)


def decode_event(kind: str, payload: bytes) -> Any:
    """The event ``encode_event`` encoded; :class:`JournalDamaged` for an unknown kind or bad payload."""
    dec = _DECODERS.get(kind)
    if dec is None:
        cls = _TYPES.get(kind)
        if cls is None:
            raise JournalDamaged(f"journal holds an input of unknown kind {kind!r}")
        dec = _DECODERS[kind] = msgspec.json.Decoder(cls)
    try:
        return dec.decode(payload)
    except msgspec.DecodeError as exc:
        raise JournalDamaged(f"journaled {kind} input cannot be decoded: {exc}") from None


def event_device(event: object) -> tuple[str | None, int | None]:
    """The ``(device, device seq)`` of an input; ``None`` where the input has none (``DeviceState`` has
    no device seq, a ``Command`` has no device)."""
    device = getattr(event, "device", None)
    seq = getattr(event, "seq", None)
    return (device if isinstance(device, str) else None,
            seq if isinstance(seq, int) and not isinstance(seq, bool) else None)
