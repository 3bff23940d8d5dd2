"""The tablesense reference protocol ("tsref"): line-oriented ASCII frames for shoes and bet pads.

No shoe vendor publishes its wire protocol (docs/protocol.md), so tablesense defines this
one, modelled on the Cammegh SlingShot roulette wheel protocol (ASCII, start character, separators,
CR LF) and NMEA (``$`` start, ``*`` checksum). docs/protocol.md is the technician's reference; in short::

    $<TYPE>,<SEQ>[,<field>...]*<CRC>\\r\\n          device -> host
    $SQ*<CRC>\\r\\n    $AK,<SEQ>*<CRC>\\r\\n          host -> device

``TYPE`` is two capital letters, ``SEQ`` a per-device decimal sequence number 0..99999 (sent as five
digits, wrapping from 99999 to 00000), ``CRC`` the CRC-8 (polynomial 0x07, initial value 0) of the bytes
between ``$`` and ``*`` as two hex digits. A frame is at most 128 bytes including ``$`` and CR LF.

This module holds the host-side decoder :class:`TsrefCodec`, the device-side encoder :func:`encode`,
the host-frame decoder :class:`HostDecoder` / :func:`decode_host` used by simulators, and the frame
helpers (:func:`crc8`, :func:`frame`) used by fault injection. Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

import structlog

from tablesense.daemon.rules.cards import Card, Rank, Suit
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    CardUnreadable,
    DealerButton,
    DeviceError,
    DeviceEvent,
    DeviceIdentity,
    Heartbeat,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)
from tablesense.drivers.protocols.base import CodecStats, SequenceGap

__all__ = [
    "DEVICE_TYPES",
    "HOST_TYPES",
    "MAX_FRAME",
    "SEQ_MODULUS",
    "Ack",
    "HostDecoder",
    "HostMessage",
    "StatusRequest",
    "TsrefCodec",
    "crc8",
    "decode_host",
    "encode",
    "encode_ack",
    "encode_status_request",
    "format_card",
    "frame",
    "parse_card",
]

START = 0x24  # "$"
MAX_FRAME = 128
"""Longest frame in bytes, counting ``$`` and CR LF."""
SEQ_MODULUS = 100_000
"""Sequence numbers run 0..99999 and wrap to 0."""
DUPLICATE_WINDOW = 64
"""How many recently accepted frames are remembered to recognise a repeated (retransmitted) frame."""

DEVICE_TYPES: dict[str, str] = {
    "ID": "identity: vendor, model, firmware, serial",
    "CD": "card drawn: card",
    "CU": "card unreadable",
    "NS": "new shoe (shuffled shoe loaded)",
    "BN": "burn card: [card]",
    "CC": "cut card reached",
    "EM": "shoe empty",
    "LO": "lid/door open",
    "LC": "lid/door closed",
    "HB": "heartbeat",
    "ER": "device error: code, text",
    "SP": "betting spot: spot, state, amount",
    "BT": "dealer button: button",
}
"""Device-to-host message types and their fields."""

HOST_TYPES: dict[str, str] = {"SQ": "status request", "AK": "acknowledge: seq"}
"""Host-to-device message types and their fields."""

_log = structlog.get_logger()

_HEX = b"0123456789ABCDEF"


def _make_crc_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        table.append(crc)
    return tuple(table)


_CRC_TABLE = _make_crc_table()


def crc8(data: bytes) -> int:
    """CRC-8 (polynomial 0x07, init 0x00, no reflection, no final XOR; "CRC-8/SMBUS") of ``data``.

    The check value of ``b"123456789"`` is ``0xF4``. Returns 0..255.
    """
    crc = 0
    for b in data:
        crc = _CRC_TABLE[crc ^ b]
    return crc


def frame(body: str | bytes) -> bytes:
    """Wrap a frame body (the text between ``$`` and ``*``) into a complete frame with CRC and CR LF.

    Raises:
        ValueError: the body contains ``$``, ``*``, a control or non-ASCII character, or the frame
            would exceed :data:`MAX_FRAME` bytes.
    """
    raw = body.encode("ascii") if isinstance(body, str) else bytes(body)
    if any(b < 0x20 or b > 0x7E or b in (0x24, 0x2A) for b in raw):
        raise ValueError(f"frame body {raw!r} contains a reserved or non-printable byte")
    crc = crc8(raw)
    out = b"$" + raw + b"*" + bytes((_HEX[crc >> 4], _HEX[crc & 0xF])) + b"\r\n"
    if len(out) > MAX_FRAME:
        raise ValueError(f"frame of {len(out)} bytes exceeds the {MAX_FRAME}-byte maximum: {raw[:40]!r}...")
    return out


# ---------------------------------------------------------------------------------------------------
# Field encodings


_CARD_RE = re.compile(r"(A|[2-9]|10|T|J|Q|K)([SHDC])")
_TOKEN_RE = re.compile(r"[A-Za-z0-9_.\-]{1,16}")
_SEQ_RE = re.compile(r"[0-9]{1,5}")
_AMOUNT_RE = re.compile(r"[0-9]{1,12}")
_TEXT_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                       b" _.-+/:;()[]#@!?&=~'\"<>^|{}")
_RANK_BY_TOKEN = {"A": Rank.ACE, "T": Rank.TEN, "10": Rank.TEN, "J": Rank.JACK, "Q": Rank.QUEEN,
                  "K": Rank.KING} | {str(i): Rank(i) for i in range(2, 10)}
_STATE_WORD = {SpotState.EMPTY: "EMPTY", SpotState.PLACED: "PLACED", SpotState.LOCKED: "LOCKED"}
_WORD_STATE = {v: k for k, v in _STATE_WORD.items()}
_BUTTON_WORD = {Button.NO_MORE_BETS: "NO_MORE_BETS", Button.ROUND_END: "ROUND_END",
                Button.VOID_ROUND: "VOID_ROUND"}
_WORD_BUTTON = {v: k for k, v in _BUTTON_WORD.items()}
_STATUS_TYPE = {ShoeStatusKind.NEW_SHOE: "NS", ShoeStatusKind.BURN: "BN", ShoeStatusKind.CUT_CARD: "CC",
                ShoeStatusKind.EMPTY: "EM", ShoeStatusKind.LID_OPEN: "LO", ShoeStatusKind.LID_CLOSED: "LC"}
_TYPE_STATUS = {v: k for k, v in _STATUS_TYPE.items()}


def format_card(card: Card) -> str:
    """Wire form of a card: rank ``A 2..9 10 J Q K`` then suit ``S H D C`` (e.g. ``QH``, ``10D``)."""
    return f"{card.rank.label}{card.suit.value}"


def parse_card(text: str) -> Card | None:
    """Strictly read a wire card (``QH``, ``10D`` or ``TD``; capitals only); ``None`` if it is not one."""
    m = _CARD_RE.fullmatch(text)
    if m is None:
        return None
    return Card(_RANK_BY_TOKEN[m.group(1)], Suit(m.group(2)))


def _escape(text: str) -> str:
    """Percent-escape a free-text field: any byte outside a safe printable set becomes ``%XX``."""
    return "".join(chr(b) if b in _TEXT_SAFE else f"%{b:02X}" for b in text.encode("utf-8"))


def _unescape(text: str) -> str | None:
    """Undo :func:`_escape`; ``None`` when an escape is broken."""
    if "%" not in text:
        return text
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%":
            hh = text[i + 1:i + 3]
            if len(hh) != 2 or any(ch not in "0123456789ABCDEFabcdef" for ch in hh):
                return None
            out.append(int(hh, 16))
            i += 3
        else:
            out += c.encode("ascii")
            i += 1
    return out.decode("utf-8", errors="replace")


def _token(value: str, what: str) -> str:
    if not _TOKEN_RE.fullmatch(value):
        raise ValueError(f"{what} {value!r} must be 1-16 of A-Z a-z 0-9 _ . -")
    return value


def _seq(seq: int) -> str:
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < SEQ_MODULUS:
        raise ValueError(f"sequence number {seq!r} outside 0..{SEQ_MODULUS - 1}")
    return f"{seq:05d}"


# ---------------------------------------------------------------------------------------------------
# Device side: encode events


def encode(event: DeviceEvent) -> bytes:
    """Encode one device event as one tsref frame, as a device would send it (used by simulators).

    The event's ``device`` name is not on the wire; its ``seq`` is. Examples: ``CardDrawn(seq=12,
    card=QH)`` -> ``b"$CD,00012,QH*xx\\r\\n"``; ``SpotChanged(spot="P1", state=PLACED, amount=None)``
    -> ``b"$SP,00003,P1,PLACED,?*xx\\r\\n"``.

    Raises:
        ValueError: a field cannot be sent (seq outside 0..99999, a spot or error code that is not a
            1-16 character token, a negative amount, or a frame longer than 128 bytes).
        TypeError: ``event`` is not a device event.
    """
    s = _seq(event.seq)
    match event:
        case CardDrawn(card=card):
            body = f"CD,{s},{format_card(card)}"
        case CardUnreadable():
            body = f"CU,{s}"
        case ShoeStatus(kind=kind, card=card):
            body = f"{_STATUS_TYPE[kind]},{s}"
            if card is not None:
                if kind is not ShoeStatusKind.BURN:
                    raise ValueError(f"only a burn status carries a card, not {kind.value}")
                body += f",{format_card(card)}"
        case DeviceIdentity(vendor=vendor, model=model, firmware=firmware, serial=serial, session=session):
            body = f"ID,{s}," + ",".join(_escape(x) for x in (vendor, model, firmware, serial))
            if session:
                body += f",{_token(session, 'session')}"
        case Heartbeat():
            body = f"HB,{s}"
        case DeviceError(code=code, text=text):
            body = f"ER,{s},{_token(code, 'error code')},{_escape(text)}"
        case SpotChanged(spot=spot, state=state, amount=amount):
            if amount is None:
                amt = "?"
            elif isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount < 10**12:
                raise ValueError(f"spot amount {amount!r} must be 0..999999999999 minor units or None")
            else:
                amt = str(amount)
            body = f"SP,{s},{_token(spot, 'spot')},{_STATE_WORD[state]},{amt}"
        case DealerButton(button=button):
            body = f"BT,{s},{_BUTTON_WORD[button]}"
        case _:
            raise TypeError(f"not a device event: {event!r}")
    return frame(body)


# ---------------------------------------------------------------------------------------------------
# Host side: host-to-device frames


@dataclass(frozen=True, slots=True)
class StatusRequest:
    """Host asks the device to send its identity and current state (``$SQ``)."""


@dataclass(frozen=True, slots=True)
class Ack:
    """Host acknowledges the device frame numbered ``seq`` (``$AK,<seq>``)."""

    seq: int


HostMessage = StatusRequest | Ack
"""A decoded host-to-device message."""


def encode_status_request() -> bytes:
    """The status request frame ``$SQ*xx\\r\\n``."""
    return frame("SQ")


def encode_ack(seq: int) -> bytes:
    """The acknowledge frame ``$AK,<seq>*xx\\r\\n``. Raises ``ValueError`` for seq outside 0..99999."""
    return frame(f"AK,{_seq(seq)}")


# ---------------------------------------------------------------------------------------------------
# Framing: shared by the device-frame codec and the host-frame decoder


class _LogLimiter:
    """Counts-based rate limit for warnings (no clock): the first ``burst`` problems after a good frame
    are logged one line each, then one summary line every ``every`` further problems."""

    __slots__ = ("burst", "every", "since_good", "suppressed")

    def __init__(self, burst: int = 5, every: int = 100) -> None:
        self.burst = burst
        self.every = every
        self.since_good = 0
        self.suppressed = 0

    def allow(self, weight: int = 1) -> tuple[bool, int]:
        """Record ``weight`` problems; return (log now?, problems suppressed since the last line)."""
        self.since_good += 1
        if self.since_good <= self.burst:
            return True, 0
        self.suppressed += weight
        if self.suppressed >= self.every:
            n, self.suppressed = self.suppressed, 0
            return True, n
        return False, 0

    def good(self) -> None:
        self.since_good = 0


class _Framer:
    """Splits a byte stream into candidate lines ``$...\\n`` (at most MAX_FRAME bytes).

    Calls ``on_line(bytes)`` for each complete candidate, ``on_garbage(n)`` for bytes outside frames
    (CR/LF between frames excluded), ``on_too_long(n)`` for an over-long frame and ``on_cut(partial)``
    for a partial frame interrupted by a new ``$``.
    """

    __slots__ = ("_buf", "_skipping", "on_cut", "on_garbage", "on_line", "on_too_long")

    def __init__(self, on_line: Callable[[bytes], None], on_garbage: Callable[[int], None],
                 on_too_long: Callable[[int], None], on_cut: Callable[[bytes], None]) -> None:
        self._buf: bytearray | None = None  # None: between frames
        self._skipping = False  # inside an over-long frame, waiting for the next "$"
        self.on_line = on_line
        self.on_garbage = on_garbage
        self.on_too_long = on_too_long
        self.on_cut = on_cut

    def reset(self) -> None:
        self._buf = None
        self._skipping = False

    def feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        while i < n:
            if self._skipping:
                j = data.find(b"$", i)
                if j < 0:
                    return
                self._skipping = False
                i = j
                continue
            if self._buf is None:
                j = data.find(b"$", i)
                end = n if j < 0 else j
                if end > i:
                    seg = data[i:end]
                    junk = len(seg) - seg.count(b"\r") - seg.count(b"\n")
                    if junk:
                        self.on_garbage(junk)
                if j < 0:
                    return
                self._buf = bytearray(b"$")
                i = j + 1
                continue
            # inside a frame: look for its end (LF) or an interrupting start ("$")
            lf = data.find(b"\n", i)
            st = data.find(b"$", i)
            if st >= 0 and (lf < 0 or st < lf):
                stop, interrupted = st, True
            elif lf >= 0:
                stop, interrupted = lf + 1, False
            else:
                stop, interrupted = n, False
            room = MAX_FRAME - len(self._buf)
            if stop - i > room:
                # over-long: count it, then skip everything up to the next "$"
                self.on_too_long(len(self._buf) + (stop - i))
                self._buf = None
                self._skipping = True
                i += room
                continue
            self._buf += data[i:stop]
            i = stop
            if interrupted:
                partial, self._buf = bytes(self._buf), None
                self.on_cut(partial)
            elif self._buf.endswith(b"\n"):
                line, self._buf = bytes(self._buf), None
                self.on_line(line)


_HEX_PAIRS = {f"{a}{b}".encode(): int(f"{a}{b}", 16)
              for a in "0123456789ABCDEFabcdef" for b in "0123456789ABCDEFabcdef"}
"""Each two-hex-digit checksum field (either case) and its value."""

_BODY_BYTES = bytes(b for b in range(0x20, 0x7F) if b not in (0x24, 0x2A))
"""The bytes a frame body may hold: printable ASCII but ``$`` and ``*`` (docs/protocol.md §2)."""


def _split_checked(line: bytes) -> tuple[str, bytes | None, str | None]:
    """Check a ``$...*HH[\\r]\\n`` line. Returns (verdict, body, why): verdict is ``"ok"``,
    ``"checksum"`` or ``"malformed"``."""
    core = line[:-1]
    if core.endswith(b"\r"):
        core = core[:-1]
    if len(core) < 4 or core[-3] != 0x2A:
        return "malformed", None, "no '*' checksum before the line end"
    hh = core[-2:]
    given = _HEX_PAIRS.get(hh)
    if given is None:
        return "malformed", None, "checksum is not two hex digits"
    body = core[1:-3]
    computed = crc8(body)
    if computed != given:
        return "checksum", body, f"checksum {hh.decode('ascii')} != computed {computed:02X}"
    if body.translate(None, _BODY_BYTES):  # what is left is not allowed in a body
        return "malformed", body, "non-printable or reserved byte in frame"
    return "ok", body, None


def _show(raw: bytes, limit: int = 60) -> str:
    text = raw[:limit].decode("ascii", errors="backslashreplace")
    return text + ("..." if len(raw) > limit else "")


# ---------------------------------------------------------------------------------------------------
# Host side: decode device frames


class _Bad(Exception):
    """A frame's content is malformed (internal to the codec)."""


class TsrefCodec:
    """Host-side decoder of the tablesense reference protocol (docs/protocol.md).

    ``TsrefCodec(device)``; ``feed(bytes) -> list[DeviceEvent]`` with every event's ``device`` set to
    ``device``. Handling (counted in :attr:`stats`, logged with structlog, rate-limited):

    - bad checksum: frame dropped, never an event;
    - unknown message type (or a host-to-device type): dropped; its sequence number still counts;
    - malformed content: dropped (so the next frame shows a sequence gap);
    - a frame repeating a recently accepted frame (same seq, same content): dropped as a duplicate,
      so a retransmitted card frame never doubles a card. Once the host acknowledges frames
      (:meth:`ack`), "accepted" means *acknowledged*: a repeat of a frame delivered but not
      acknowledged yet is delivered again (counted in ``resent``), because the host journals a frame
      before acknowledging it and its journaling may have failed (the host drops a resend it did
      journal, by content) -- but not a repeat decoded in the same :meth:`feed` call as the first
      copy (the host has not seen that one yet): a duplicate;
    - a sequence jump: the event is delivered and a :class:`SequenceGap` queued for :meth:`take_gaps`;
    - over-long frames (> 128 bytes) and bytes outside frames: discarded up to the next ``$``.
    """

    name: ClassVar[str] = "tsref"

    def __init__(self, device: str) -> None:
        self.device = device
        self._stats = CodecStats()
        self._events: list[DeviceEvent] = []
        self._gaps: list[SequenceGap] = []
        self._last_seq: int | None = None
        self._recent: OrderedDict[int, bytes] = OrderedDict()
        """Acknowledged frames (seq -> body): a repeat of one is a duplicate and is dropped."""
        self._pending: OrderedDict[int, bytes] = OrderedDict()
        """Frames delivered but not acknowledged yet, in delivery order: a repeat of one is delivered
        again (the host decides; its journaling may have failed), without a gap."""
        self._fed_now: set[int] = set()
        """Sequence numbers delivered by the current :meth:`feed` call (a repeat among them is dropped)."""
        self._acking = False
        """The host acknowledges frames (:meth:`ack` was called): from then on only acknowledged frames
        count as duplicates. Before, every delivered frame does (a host that only listens)."""
        self._limit = _LogLimiter()
        self._garbage_limit = _LogLimiter(burst=3, every=4096)
        self._framer = _Framer(self._line, self._garbage, self._too_long, self._cut)

    # -- public API ---------------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[DeviceEvent]:
        """Decode ``data``; return the events completed by it, in order. Never raises."""
        self._events = []
        self._fed_now.clear()
        try:
            self._framer.feed(bytes(data))
        except Exception as exc:  # a codec bug must not take the driver down; count and carry on
            self._framer.reset()
            self._stats.malformed += 1
            _log.error("codec.internal_error", device=self.device, protocol=self.name,
                       error=f"{type(exc).__name__}: {exc}")
        out, self._events = self._events, []
        self._stats.events += len(out)
        return out

    @property
    def stats(self) -> CodecStats:
        """A snapshot copy of the counters."""
        return replace(self._stats)

    def take_gaps(self) -> list[SequenceGap]:
        """Sequence gaps seen since the last call, oldest first."""
        out, self._gaps = self._gaps, []
        return out

    @property
    def last_seq(self) -> int | None:
        """Sequence number of the last accepted frame (``None`` before the first)."""
        return self._last_seq

    def reset(self) -> None:
        """Drop a partial frame (after a reconnect). The last seq and duplicate memory are kept."""
        self._framer.reset()

    def status_request(self) -> bytes:
        """``$SQ*xx\\r\\n``: ask the device for its identity and current state."""
        return encode_status_request()

    def ack(self, seq: int) -> bytes:
        """``$AK,<seq>*xx\\r\\n``. Raises ``ValueError`` for seq outside 0..99999.

        The host acknowledges a frame once it is journaled, and the acknowledgement is cumulative
        (docs/protocol.md §3): the frames delivered up to ``seq`` become *acknowledged*, and only from
        then on is a repeat of one dropped as a duplicate. A frame delivered but not acknowledged (its
        journaling failed, or is still under way) is delivered again when the device resends it."""
        data = encode_ack(seq)
        self._acking = True
        if seq in self._pending:
            while self._pending:
                s, body = self._pending.popitem(last=False)
                self._remember(s, body)
                if s == seq:
                    break
        return data

    # -- framer callbacks ---------------------------------------------------------------------------

    def _problem(self, counter: str, event: str, weight: int = 1, **kw: object) -> None:
        setattr(self._stats, counter, getattr(self._stats, counter) + weight)
        limiter = self._garbage_limit if counter == "garbage_bytes" else self._limit
        log_now, suppressed = limiter.allow(weight)
        if log_now:
            if suppressed:
                kw["suppressed_since_last_line"] = suppressed
            _log.warning(event, device=self.device, protocol=self.name, **kw,
                         totals=f"bad_checksum={self._stats.bad_checksum} malformed={self._stats.malformed} "
                                f"too_long={self._stats.too_long} unknown_type={self._stats.unknown_type} "
                                f"garbage_bytes={self._stats.garbage_bytes}")

    def _garbage(self, n: int) -> None:
        self._problem("garbage_bytes", "codec.garbage", weight=n, bytes=n)

    def _too_long(self, n: int) -> None:
        self._problem("too_long", "codec.frame_too_long", length=n, limit=MAX_FRAME)

    def _cut(self, partial: bytes) -> None:
        self._problem("malformed", "codec.frame_cut_off", frame=_show(partial),
                      reason="a new '$' arrived before the line end")

    def _line(self, line: bytes) -> None:
        verdict, body, why = _split_checked(line)
        if verdict == "checksum":
            self._problem("bad_checksum", "codec.bad_checksum", frame=_show(line), reason=why)
            return
        if verdict != "ok" or body is None:
            self._problem("malformed", "codec.malformed_frame", frame=_show(line), reason=why)
            return
        self._stats.frames += 1
        text = body.decode("ascii")
        parts = text.split(",")
        mtype = parts[0]
        if mtype not in DEVICE_TYPES:
            seq = int(parts[1]) if len(parts) > 1 and _SEQ_RE.fullmatch(parts[1]) else None
            # an unknown message still used its number; a repeat of one is just a duplicate
            if seq is not None and mtype not in HOST_TYPES and not self._sequence(seq, body):
                return
            why = "host-to-device type (echo or loopback?)" if mtype in HOST_TYPES else "unknown type"
            self._problem("unknown_type", "codec.unknown_type", frame=_show(line), type=mtype, reason=why)
            return
        if len(parts) < 2 or not _SEQ_RE.fullmatch(parts[1]):
            self._problem("malformed", "codec.malformed_frame", frame=_show(line),
                          reason="bad sequence number")
            return
        seq = int(parts[1])
        try:
            event = self._decode(mtype, seq, parts[2:])
        except _Bad as exc:
            self._problem("malformed", "codec.malformed_frame", frame=_show(line), reason=str(exc))
            return
        if not self._sequence(seq, body):
            return
        self._limit.good()
        self._garbage_limit.good()
        self._events.append(event)

    def _sequence(self, seq: int, body: bytes) -> bool:
        """Apply sequence rules; False when the frame is a duplicate to drop.

        Only acknowledged frames count as duplicates: the sequence number of a frame the host has not
        acknowledged (not journaled yet, or its journaling failed) is not recorded as taken, so the
        device's resend of it is delivered again (issue: a failed journal write must not lose a card)."""
        if self._recent.get(seq) == body:
            self._stats.duplicates += 1
            _log.info("codec.duplicate_frame", device=self.device, protocol=self.name, seq=seq)
            return False
        if self._pending.get(seq) == body:
            if seq in self._fed_now:
                # its first copy is in this very batch: the host has not seen it, so cannot have failed
                # to journal it; a device that resent before reading our AK (protocol §3) must not
                # double a card, also for a host that acknowledges at once
                self._stats.duplicates += 1
                _log.info("codec.duplicate_frame", device=self.device, protocol=self.name, seq=seq,
                          reason="repeated within one read, before the host saw the first")
                return False
            self._stats.resent += 1  # resent before the host acknowledged it: the host decides
            self._fed_now.add(seq)
            return True
        last = self._last_seq
        if last is not None and seq != (last + 1) % SEQ_MODULUS:
            expected = (last + 1) % SEQ_MODULUS
            self._stats.seq_gaps += 1
            self._gaps.append(SequenceGap(self.device, expected, seq))
            self._recent.clear()  # the device may have restarted its count: old numbers mean nothing now
            self._pending.clear()
            _log.warning("codec.sequence_gap", device=self.device, protocol=self.name,
                         expected=expected, got=seq)
        self._last_seq = seq
        if not self._acking:
            self._remember(seq, body)
            return True
        self._pending.pop(seq, None)
        self._pending[seq] = body
        self._fed_now.add(seq)
        while len(self._pending) > DUPLICATE_WINDOW:
            self._pending.popitem(last=False)
        return True

    def _remember(self, seq: int, body: bytes) -> None:
        self._recent[seq] = body
        self._recent.move_to_end(seq)
        while len(self._recent) > DUPLICATE_WINDOW:
            self._recent.popitem(last=False)

    def _decode(self, mtype: str, seq: int, f: list[str]) -> DeviceEvent:
        dev = self.device

        def need(n: int) -> None:
            if len(f) < n:
                raise _Bad(f"{mtype} needs {n} field(s) after the sequence number, got {len(f)}")

        def card(text: str) -> Card:
            c = parse_card(text)
            if c is None:
                raise _Bad(f"not a card: {text!r}")
            return c

        def txt(text: str) -> str:
            t = _unescape(text)
            if t is None:
                raise _Bad(f"broken %-escape in {text!r}")
            return t

        # extra trailing fields are ignored (forward compatible); missing ones are malformed
        if mtype == "CD":
            need(1)
            return CardDrawn(dev, seq, card(f[0]))
        if mtype == "CU":
            return CardUnreadable(dev, seq)
        if mtype in _TYPE_STATUS:
            kind = _TYPE_STATUS[mtype]
            burned = card(f[0]) if kind is ShoeStatusKind.BURN and f and f[0] else None
            return ShoeStatus(dev, seq, kind, burned)
        if mtype == "ID":
            need(4)
            session = f[4] if len(f) > 4 else ""
            if session and not _TOKEN_RE.fullmatch(session):
                raise _Bad(f"bad session {session[:20]!r} (1-16 of A-Z a-z 0-9 _ . -)")
            return DeviceIdentity(dev, seq, txt(f[0]), txt(f[1]), txt(f[2]), txt(f[3]), session)
        if mtype == "HB":
            return Heartbeat(dev, seq)
        if mtype == "ER":
            need(2)
            if not _TOKEN_RE.fullmatch(f[0]):
                raise _Bad(f"bad error code {f[0]!r}")
            return DeviceError(dev, seq, f[0], txt(f[1]))
        if mtype == "SP":
            need(3)
            if not _TOKEN_RE.fullmatch(f[0]):
                raise _Bad(f"bad spot name {f[0]!r}")
            state = _WORD_STATE.get(f[1])
            if state is None:
                raise _Bad(f"bad spot state {f[1]!r} (EMPTY, PLACED or LOCKED)")
            if f[2] == "?":
                amount: int | None = None
            elif _AMOUNT_RE.fullmatch(f[2]):
                amount = int(f[2])
            else:
                raise _Bad(f"bad amount {f[2]!r} (minor units or '?')")
            return SpotChanged(dev, seq, f[0], state, amount)
        if mtype == "BT":
            need(1)
            button = _WORD_BUTTON.get(f[0])
            if button is None:
                raise _Bad(f"bad button {f[0]!r} (NO_MORE_BETS, ROUND_END or VOID_ROUND)")
            return DealerButton(dev, seq, button)
        raise _Bad(f"no decoder for {mtype}")  # pragma: no cover - DEVICE_TYPES and this table agree


# ---------------------------------------------------------------------------------------------------
# Device side: decode host frames (for simulators)


class HostDecoder:
    """Incremental decoder of host-to-device frames (``$SQ``, ``$AK``), as a device would run it.

    ``feed(bytes) -> list[HostMessage]``; never raises. Bad frames are counted in ``rejected``.
    """

    def __init__(self) -> None:
        self.rejected = 0
        self._out: list[HostMessage] = []
        self._framer = _Framer(self._line, self._ignore, self._reject, self._reject)

    def feed(self, data: bytes) -> list[HostMessage]:
        """Decode ``data``; return complete host messages in order."""
        self._out = []
        try:
            self._framer.feed(bytes(data))
        except Exception:
            self._framer.reset()
            self.rejected += 1
        out, self._out = self._out, []
        return out

    def _ignore(self, n: int) -> None:
        pass

    def _reject(self, _: object) -> None:
        self.rejected += 1

    def _line(self, line: bytes) -> None:
        verdict, body, _ = _split_checked(line)
        if verdict != "ok" or body is None:
            self.rejected += 1
            return
        parts = body.decode("ascii").split(",")
        if parts[0] == "SQ":
            self._out.append(StatusRequest())
        elif parts[0] == "AK" and len(parts) >= 2 and _SEQ_RE.fullmatch(parts[1]):
            self._out.append(Ack(int(parts[1])))
        else:
            self.rejected += 1


def decode_host(data: bytes) -> list[HostMessage]:
    """Decode complete host-to-device frames in ``data`` (a partial trailing frame is ignored)."""
    return HostDecoder().feed(data)
