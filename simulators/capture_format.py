"""The ``.cap`` capture file format: a device's raw bytes with timestamps, readable by a human.

In the spirit of gpsd's regression logs (gpsd's regress-driver): a header of ``#`` lines, then
one line per chunk of bytes as read from the device::

    # tablesense-capture 1
    # device: shoe
    # protocol: tsref
    # notes: a clean baccarat round from a seeded 8-deck shoe
    # serial: 9600 8N1
    +0.000000 2449442c30303030302c...0d0a  # $ID,00000,tablesense,...\\r\\n
    +0.250000 2443442c30303031342c33432a43300d0a  # $CD,00014,3C*C0\\r\\n

- First line ``# tablesense-capture 1`` (format version). Header lines ``# key: value`` up to the first
  chunk; ``device`` and ``protocol`` are required, ``notes`` may repeat (joined with newlines), other
  keys are kept in ``meta`` (e.g. ``serial``, ``source``, ``started``).
- Chunk lines: ``+<seconds since the capture started>`` (non-decreasing, up to microseconds), a space,
  the bytes as lowercase hex (authoritative), then optionally ``  # `` and a readable rendering that
  readers ignore. Blank lines and ``#`` lines after the header are comments.

The module also renders events as stable one-line text for the golden ``.events`` transcripts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tablesense.drivers.events import (
    CardDrawn,
    CardUnreadable,
    DealerButton,
    DeviceError,
    DeviceEvent,
    DeviceIdentity,
    Heartbeat,
    ShoeStatus,
    SpotChanged,
)
from tablesense.drivers.protocols.base import CodecStats, SequenceGap

__all__ = [
    "MAGIC",
    "Capture",
    "CaptureChunk",
    "CaptureFormatError",
    "CaptureWriter",
    "dumps",
    "event_line",
    "load",
    "loads",
    "save",
    "transcript",
]

MAGIC = "# tablesense-capture 1"
"""The first line of every capture file."""

_HEADER_RE = re.compile(r"#\s*([A-Za-z][A-Za-z0-9_-]*)\s*:\s?(.*)")
_CHUNK_RE = re.compile(r"\+(\d+(?:\.\d{1,9})?)(?:\s+([0-9a-fA-F]+))?(?:\s+#.*)?")


class CaptureFormatError(ValueError):
    """A capture file cannot be read; the message names the line number and what is wrong."""


@dataclass(frozen=True, slots=True)
class CaptureChunk:
    """One read from the device: ``offset`` seconds after the capture started, and its ``data``."""

    offset: float
    data: bytes


@dataclass(slots=True)
class Capture:
    """A capture: which device and protocol, free-text notes, other header keys, and the chunks."""

    device: str
    protocol: str
    notes: str = ""
    meta: dict[str, str] = field(default_factory=dict)
    chunks: list[CaptureChunk] = field(default_factory=list)

    @property
    def data(self) -> bytes:
        """All captured bytes joined."""
        return b"".join(c.data for c in self.chunks)

    @property
    def duration(self) -> float:
        """Offset of the last chunk in seconds (0.0 when empty)."""
        return self.chunks[-1].offset if self.chunks else 0.0


def _readable(data: bytes, limit: int = 80) -> str:
    text = data.decode("latin-1").encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[:limit] + "..."


def _check_key_value(key: str, value: str) -> None:
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", key):
        raise ValueError(f"capture header key {key!r} must be a word (letters, digits, _ and -)")
    if "\n" in value or "\r" in value:
        raise ValueError(f"capture header {key!r} value must be one line")


def chunk_line(offset: float, data: bytes, readable: bool = True) -> str:
    """One chunk line (without the newline). Raises ``ValueError`` for a negative offset."""
    if offset < 0:
        raise ValueError(f"chunk offset must be >= 0 seconds, got {offset}")
    line = f"+{offset:.6f} {data.hex()}"
    if readable and data:
        line += f"  # {_readable(data)}"
    return line


def header_lines(device: str, protocol: str, notes: str = "",
                 meta: dict[str, str] | None = None) -> list[str]:
    """The header lines of a capture (without newlines)."""
    _check_key_value("device", device)
    _check_key_value("protocol", protocol)
    lines = [MAGIC, f"# device: {device}", f"# protocol: {protocol}"]
    lines += [f"# notes: {n}" for n in notes.splitlines()] if notes else []
    for k, v in (meta or {}).items():
        if k in ("device", "protocol", "notes"):
            raise ValueError(f"capture header key {k!r} is reserved")
        _check_key_value(k, v)
        lines.append(f"# {k}: {v}")
    return lines


def dumps(capture: Capture, readable: bool = True) -> str:
    """The text of a capture file. Raises ``ValueError`` for header values that cannot be written."""
    lines = header_lines(capture.device, capture.protocol, capture.notes, capture.meta)
    lines += [chunk_line(c.offset, c.data, readable) for c in capture.chunks]
    return "\n".join(lines) + "\n"


def loads(text: str, source: str = "<capture>") -> Capture:
    """Read a capture from its text.

    Raises:
        CaptureFormatError: ``source:line: what is wrong`` (bad magic line, missing device or protocol,
            a chunk line that is not ``+seconds hex``, odd-length hex, offsets going backwards).
    """
    lines = text.splitlines()
    if not lines or lines[0].strip() != MAGIC:
        raise CaptureFormatError(f"{source}:1: not a tablesense capture (first line must be {MAGIC!r})")
    header: dict[str, str] = {}
    notes: list[str] = []
    chunks: list[CaptureChunk] = []
    last = 0.0
    for no, raw in enumerate(lines[1:], start=2):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = _HEADER_RE.fullmatch(line)
            if m and not chunks:
                key, value = m.group(1).lower(), m.group(2).rstrip()
                if key == "notes":
                    notes.append(value)
                else:
                    header[key] = value
            continue
        m = _CHUNK_RE.fullmatch(line)
        if m is None:
            raise CaptureFormatError(
                f"{source}:{no}: expected '+<seconds> <hex>', got {_readable(raw.encode())!r}")
        offset = float(m.group(1))
        if offset < last:
            raise CaptureFormatError(f"{source}:{no}: offset {offset} is earlier than the previous {last}")
        hexdata = m.group(2) or ""
        if len(hexdata) % 2:
            raise CaptureFormatError(f"{source}:{no}: odd number of hex digits")
        chunks.append(CaptureChunk(offset, bytes.fromhex(hexdata)))
        last = offset
    for required in ("device", "protocol"):
        if not header.get(required):
            raise CaptureFormatError(f"{source}: header has no '# {required}: ...' line")
    device, protocol = header.pop("device"), header.pop("protocol")
    return Capture(device, protocol, "\n".join(notes), header, chunks)


def load(path: str | Path) -> Capture:
    """Read a capture file (UTF-8). Raises ``CaptureFormatError`` or ``OSError``."""
    p = Path(path)
    return loads(p.read_text(encoding="utf-8"), source=str(p))


def save(path: str | Path, capture: Capture) -> None:
    """Write a capture file (UTF-8)."""
    Path(path).write_text(dumps(capture), encoding="utf-8")


class CaptureWriter:
    """Streaming writer for ``tablesense capture``: header first, then one line per chunk, flushed.

    The caller supplies offsets (seconds since it started capturing); this class reads no clock.
    """

    def __init__(self, out: TextIO, device: str, protocol: str, notes: str = "",
                 meta: dict[str, str] | None = None) -> None:
        self._out = out
        self._last = 0.0
        self.chunks = 0
        self.bytes = 0
        for line in header_lines(device, protocol, notes, meta):
            out.write(line + "\n")
        out.flush()

    def write(self, offset: float, data: bytes) -> None:
        """Append one chunk; an offset earlier than the previous one is clamped to it."""
        offset = max(offset, self._last)
        self._last = offset
        self._out.write(chunk_line(offset, data) + "\n")
        self._out.flush()
        self.chunks += 1
        self.bytes += len(data)


# ---------------------------------------------------------------------------------------------------
# Stable text form of events (golden transcripts)


def event_line(event: DeviceEvent) -> str:
    """One stable line for an event, e.g. ``shoe 00014 CardDrawn card=3C``.

    Fields: device, seq (five digits), event class, then ``key=value`` pairs in a fixed order; text
    values are written with ``repr``-style quoting; ``None`` is ``-``.
    """
    head = f"{event.device} {event.seq:05d} {type(event).__name__}"
    match event:
        case CardDrawn(card=card):
            return f"{head} card={card}"
        case CardUnreadable():
            return head
        case ShoeStatus(kind=kind, card=card):
            return f"{head} kind={kind.value}" + (f" card={card}" if card is not None else "")
        case DeviceIdentity(vendor=v, model=m, firmware=f, serial=s, session=session):
            return (f"{head} vendor={v!r} model={m!r} firmware={f!r} serial={s!r}"
                    + (f" session={session}" if session else ""))
        case Heartbeat():
            return head
        case DeviceError(code=code, text=text):
            return f"{head} code={code} text={text!r}"
        case SpotChanged(spot=spot, state=state, amount=amount):
            return f"{head} spot={spot} state={state.value} amount={'-' if amount is None else amount}"
        case DealerButton(button=button):
            return f"{head} button={button.value}"
    raise TypeError(f"not a device event: {event!r}")


def transcript(events: Iterable[DeviceEvent], gaps: Iterable[SequenceGap] = (),
               stats: CodecStats | None = None) -> str:
    """A golden transcript: one :func:`event_line` per event, then ``# gap`` lines and a ``# stats`` line."""
    lines = [event_line(e) for e in events]
    lines += [f"# gap device={g.device} expected={g.expected:05d} got={g.got:05d}" for g in gaps]
    if stats is not None:
        lines.append("# stats " + " ".join(f"{k}={getattr(stats, k)}" for k in
                                            ("frames", "events", "bad_checksum", "garbage_bytes", "too_long",
                                             "unknown_type", "malformed", "seq_gaps", "duplicates")))
    return "\n".join(lines) + "\n"
