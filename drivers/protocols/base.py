"""The codec interface every device protocol implements, and the registry that finds codecs by name.

A codec turns the raw bytes a device sends into typed :mod:`drivers.events` events. Codecs are pure
and incremental (codecs know frames, checksums and resync, never transports or
asyncio): no I/O, no clock, ``feed`` accepts any split of the byte stream and never raises. Codecs are
registered under the entry point group ``tablesense.protocols`` so a vendor codec installed from its
own package plugs in without touching tablesense (docs/adding-a-codec.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import ClassVar, Protocol, runtime_checkable

from tablesense.drivers.events import DeviceEvent

__all__ = [
    "ENTRY_POINT_GROUP",
    "Codec",
    "CodecStats",
    "SequenceGap",
    "UnknownProtocol",
    "get_codec",
    "protocol_names",
]

ENTRY_POINT_GROUP = "tablesense.protocols"
"""Entry point group under which codec classes are registered (``name = "module:Class"``)."""

_BUILTIN: dict[str, str] = {"tsref": "tablesense.drivers.protocols.tsref:TsrefCodec"}
"""Codecs shipped with tablesense; found even when the package metadata is not installed."""


@dataclass(slots=True)
class CodecStats:
    """Counters a codec keeps since it was created (all plain counts, never reset by ``reset()``).

    - ``frames``: frames that passed framing and checksum (including duplicates and unknown types).
    - ``events``: events returned from ``feed``.
    - ``bad_checksum``: frames dropped because the checksum did not match.
    - ``garbage_bytes``: bytes outside any frame (line ends between frames are not garbage).
    - ``too_long``: frames dropped for exceeding the maximum frame length.
    - ``unknown_type``: well-formed frames of a message type the codec does not know (dropped).
    - ``malformed``: frames with a good checksum but bad content, and partial frames cut off by a new
      start character (dropped).
    - ``seq_gaps``: times the device sequence number skipped (the event is still delivered).
    - ``duplicates``: repeated frames (same sequence number and content) of acknowledged frames dropped.
    - ``resent``: repeated frames of delivered but not yet acknowledged frames, delivered again.
    """

    frames: int = 0
    events: int = 0
    bad_checksum: int = 0
    garbage_bytes: int = 0
    too_long: int = 0
    unknown_type: int = 0
    malformed: int = 0
    seq_gaps: int = 0
    duplicates: int = 0
    resent: int = 0

    @property
    def dropped(self) -> int:
        """Frames dropped for any reason other than being a duplicate."""
        return self.bad_checksum + self.too_long + self.unknown_type + self.malformed


@dataclass(frozen=True, slots=True)
class SequenceGap:
    """The device's sequence number jumped: ``expected`` was due, ``got`` arrived.

    The frame that revealed the gap is still decoded and delivered (its ``seq`` is ``got``); frames
    in between were lost (or the device restarted its count). The DeviceLink forwards gaps from
    :meth:`Codec.take_gaps` to the daemon, which raises an alarm (docs/protocol.md, "Sequence gaps").
    """

    device: str
    expected: int
    got: int


class UnknownProtocol(LookupError):
    """No codec is registered under the requested name (the message lists the known names)."""


@runtime_checkable
class Codec(Protocol):
    """A pure, incremental device protocol codec.

    ``Codec(device)`` makes a decoder for one device; ``device`` is the name from the table config and
    is put into every event (it is not on the wire). One codec instance per device link; it keeps the
    last sequence number across ``reset()`` so gaps over a reconnect are detected.
    """

    name: ClassVar[str]

    def __init__(self, device: str) -> None: ...

    def feed(self, data: bytes) -> list[DeviceEvent]:
        """Decode ``data`` (any split of the stream, any garbage); return complete events. Never raises."""
        ...

    @property
    def stats(self) -> CodecStats:
        """A snapshot of the counters."""
        ...

    def take_gaps(self) -> list[SequenceGap]:
        """Sequence gaps seen since the last call, oldest first (the list is then cleared)."""
        ...

    def reset(self) -> None:
        """Drop any partial frame (the transport calls this after a reconnect); keep the last seq."""
        ...

    def status_request(self) -> bytes:
        """The host-to-device frame asking the device to report its identity and current state."""
        ...

    def ack(self, seq: int) -> bytes:
        """The host-to-device frame acknowledging the device frame numbered ``seq``. The link calls it
        only once the frame is journaled; a codec that drops repeated frames must treat a repeat as a
        duplicate only once its frame was acknowledged this way (a frame whose journaling failed is
        resent by the device and must be delivered again)."""
        ...


def _registered() -> dict[str, str]:
    """Known codec names mapped to ``module:attr`` targets (installed entry points override builtins)."""
    found = dict(_BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.value
    return found


def protocol_names() -> list[str]:
    """Sorted names of every registered codec (e.g. ``["tsref"]``)."""
    return sorted(_registered())


def get_codec(name: str) -> type[Codec]:
    """The codec class registered as ``name`` in the ``tablesense.protocols`` entry point group.

    Raises:
        UnknownProtocol: no codec of that name (one line listing the known names), or the registered
            target cannot be imported or is not a codec class.
    """
    targets = _registered()
    target = targets.get(name)
    if target is None:
        known = ", ".join(sorted(targets)) or "none"
        raise UnknownProtocol(f"unknown protocol {name!r}; known protocols: {known}")
    module_name, _, attr = target.partition(":")
    try:
        obj: object = importlib.import_module(module_name.strip())
        for part in attr.strip().split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # a broken plug-in must give one clear line, not a traceback
        raise UnknownProtocol(
            f"protocol {name!r} is registered as {target!r} but cannot be loaded: "
            f"{type(exc).__name__}: {exc}") from None
    if not (isinstance(obj, type) and callable(getattr(obj, "feed", None))
            and callable(getattr(obj, "reset", None))):
        raise UnknownProtocol(f"protocol {name!r} is registered as {target!r}, which is not a codec class")
    codec: type[Codec] = obj
    return codec
