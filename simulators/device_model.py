"""What every simulated device shares: its sequence counter, identity, history and host-frame answers.

Pure (no I/O, no clock): methods return the bytes the device would send; the pty/TCP/USB wrappers
write them out. Frames are encoded with the same codec module the daemon decodes with
(:func:`drivers.protocols.tsref.encode`), so simulator and driver cannot drift apart
(a simulator with its own encoder drifts from the real device).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from tablesense.drivers.events import DeviceError, DeviceEvent, DeviceIdentity, Heartbeat
from tablesense.drivers.protocols.tsref import SEQ_MODULUS, Ack, HostDecoder, StatusRequest, encode, frame

__all__ = ["VirtualDevice"]


class VirtualDevice:
    """Base of the virtual shoe and pads: numbers frames, keeps the history, answers the host.

    Args:
        device: name put into the ``history`` events (the name the daemon's config would use; it is
            not on the wire).
        vendor, model, firmware, serial: what the identity frame (``$ID``) announces.
        start_seq: sequence number of the first frame, 0..99999 (numbers wrap after 99999).
        session: the device session its identity frame announces (docs/protocol.md §4): a random
            8-hex-digit nonce drawn at each power-up unless given (tests pass a fixed one).

    Attributes:
        history: every event this device sent, in order, as the daemon should decode it (retransmitted
            frames are not repeated here).
        acked: sequence numbers the host acknowledged (``$AK``), in arrival order.
        boots: power-ups so far (1 at construction; :meth:`restart` adds one).
    """

    def __init__(self, *, device: str, vendor: str, model: str, firmware: str, serial: str,
                 start_seq: int = 0, session: str | None = None) -> None:
        if not 0 <= start_seq < SEQ_MODULUS:
            raise ValueError(f"start_seq must be 0..{SEQ_MODULUS - 1}, got {start_seq}")
        self.device = device
        self.vendor, self.model, self.firmware, self.serial = vendor, model, firmware, serial
        self.session = session if session is not None else secrets.token_hex(4)
        self.boots = 1
        self.history: list[DeviceEvent] = []
        self.acked: list[int] = []
        self.last_frame = b""
        self._seq = start_seq
        self._host = HostDecoder()

    @property
    def next_seq(self) -> int:
        """The sequence number the next frame will carry."""
        return self._seq

    def emit(self, make: Callable[[int], DeviceEvent]) -> bytes:
        """Number, encode and record one event built by ``make(seq)``; return its frame."""
        event = make(self._seq)
        data = encode(event)
        self._seq = (self._seq + 1) % SEQ_MODULUS
        self.history.append(event)
        self.last_frame = data
        return data

    def identity(self) -> bytes:
        """The identity frame ``$ID,<seq>,vendor,model,firmware,serial,session``."""
        return self.emit(lambda s: DeviceIdentity(self.device, s, self.vendor, self.model, self.firmware,
                                                  self.serial, self.session))

    def restart(self, session: str | None = None) -> bytes:
        """A power cycle: a new session (random unless given), numbering from 0 again, the host frames
        half-read forgotten; returns the power-up identity frame (the first frame of every session,
        docs/protocol.md §4). What the device had not had acknowledged is lost with its memory (the
        runner forgets it). Physical state (cards in a shoe, chips on pads) is unchanged."""
        self.session = session if session is not None else secrets.token_hex(4)
        self.boots += 1
        self._seq = 0
        self._host = HostDecoder()
        return self.identity()

    def heartbeat(self) -> bytes:
        """A heartbeat frame ``$HB,<seq>``."""
        return self.emit(lambda s: Heartbeat(self.device, s))

    def error(self, code: str, text: str) -> bytes:
        """A device error frame ``$ER,<seq>,code,text`` (code: 1-16 of A-Z a-z 0-9 _ . -)."""
        return self.emit(lambda s: DeviceError(self.device, s, code, text))

    def unknown_frame(self, mtype: str = "ZZ", *fields: str) -> bytes:
        """Fault: a frame of a message type the host does not know (a vendor extension), numbered like
        any other frame (so it uses up a sequence number) but not recorded in :attr:`history`."""
        data = frame(",".join([mtype, f"{self._seq:05d}", *fields]))
        self._seq = (self._seq + 1) % SEQ_MODULUS
        self.last_frame = data
        return data

    def retransmit(self) -> bytes:
        """The last frame again, byte for byte (same seq): what a device does when no ack came."""
        return self.last_frame

    def state_frames(self) -> bytes:
        """Frames describing the current state, sent after the identity in answer to a status request."""
        return b""

    def status(self) -> bytes:
        """The answer to a status request: the identity frame, then :meth:`state_frames`."""
        return self.identity() + self.state_frames()

    def answer(self, data: bytes) -> bytes:
        """Feed bytes the host sent; return the device's reply (status for ``$SQ``; nothing for ``$AK``)."""
        out = b""
        for msg in self._host.feed(data):
            if isinstance(msg, StatusRequest):
                out += self.status()
            elif isinstance(msg, Ack):
                self.acked.append(msg.seq)
        return out
