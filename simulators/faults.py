"""Fault injection as pure byte transforms on tsref streams (no I/O, no clock).

Each function takes bytes (and a ``random.Random`` where it is random, so a seed reproduces it) and
returns the bytes a faulty device or line would deliver: garbage between frames, frames split into
chunks, bad checksums, repeated frames, an unreadable card, a card the shoe cannot hold, bit errors
and a wrong baud rate. Unplug/replug is a transport matter (the pty wrappers).
"""

from __future__ import annotations

import random
from bisect import bisect_right
from math import gcd

from tablesense.daemon.rules.cards import Card
from tablesense.drivers.protocols.tsref import frame
from tablesense.simulators.shoe import VirtualShoe

__all__ = [
    "corrupt_bits",
    "corrupt_checksum",
    "frames_of",
    "impossible_card",
    "insert_garbage",
    "repeat_frames",
    "split_random",
    "unreadable",
    "wrong_baud",
]


def frames_of(data: bytes) -> list[bytes]:
    """Split a stream into its lines, each keeping its ``\\n`` (a trailing partial line is kept too)."""
    return data.splitlines(keepends=True)


def split_random(data: bytes, rng: random.Random, max_chunk: int = 16) -> list[bytes]:
    """Cut ``data`` into chunks of 1..``max_chunk`` bytes at random places (reads of a serial port)."""
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, max_chunk)
        out.append(data[i:i + n])
        i += n
    return out


def random_garbage(rng: random.Random, length: int) -> bytes:
    """``length`` random bytes (any value, including ``$``, CR and LF)."""
    return bytes(rng.randrange(256) for _ in range(length))


def insert_garbage(data: bytes, rng: random.Random, probability: float = 0.5, max_len: int = 20) -> bytes:
    """Insert a run of 1..``max_len`` random bytes before each frame with ``probability`` (and at the end).

    Garbage only goes between frames, so every original frame still arrives intact.
    """
    out = bytearray()
    for f in [*frames_of(data), b""]:
        if rng.random() < probability:
            out += random_garbage(rng, rng.randint(1, max_len))
        out += f
    return bytes(out)


def corrupt_checksum(one_frame: bytes) -> bytes:
    """The same frame with a wrong checksum (the two hex digits changed to another valid hex value)."""
    star = one_frame.rfind(b"*")
    if star < 0 or len(one_frame) < star + 3:
        raise ValueError(f"not a frame: {one_frame!r}")
    value = (int(one_frame[star + 1:star + 3], 16) + 0x5B) % 256
    return one_frame[:star + 1] + f"{value:02X}".encode() + one_frame[star + 3:]


def corrupt_bits(one_frame: bytes, rng: random.Random, flips: int = 1) -> bytes:
    """Flip ``flips`` random bits between ``$`` and the checksum (a line error the CRC-8 must catch:
    every 1- and 2-bit error in a frame this short is detected)."""
    star = one_frame.rfind(b"*")
    if star < 2:
        raise ValueError(f"not a frame: {one_frame!r}")
    out = bytearray(one_frame)
    positions = rng.sample(range(8 * (star - 1)), flips)
    for p in positions:
        out[1 + p // 8] ^= 1 << (p % 8)
    return bytes(out)


def repeat_frames(data: bytes, rng: random.Random, probability: float = 0.3) -> bytes:
    """Send each frame a second time (same seq, same bytes) with ``probability`` (a retransmission)."""
    out = bytearray()
    for f in frames_of(data):
        out += f
        if rng.random() < probability:
            out += f
    return bytes(out)


def unreadable(card_frame: bytes) -> bytes:
    """Turn a ``$CD,<seq>,<card>`` frame into ``$CU,<seq>`` (the shoe failed to read that card)."""
    body = card_frame[1:card_frame.rfind(b"*")].decode("ascii")
    parts = body.split(",")
    if parts[0] != "CD" or len(parts) < 3:
        raise ValueError(f"not a card frame: {card_frame!r}")
    return frame(f"CU,{parts[1]}")


def impossible_card(shoe: VirtualShoe, card: Card | str = "AS") -> bytes:
    """Card frames for ``card`` from ``shoe`` until one more has come out than the shoe holds (a ninth
    A♠ from 8 decks, counting the copies already dealt or burned). The cards are not taken from the shoe.
    """
    c = card if isinstance(card, Card) else Card.parse(card)
    already = sum(1 for x in [*shoe.burned, *shoe.dealt] if x == c)
    return b"".join(shoe.inject_card(c) for _ in range(max(1, shoe.decks + 1 - already)))


def wrong_baud(data: bytes, sent_baud: int = 9600, read_baud: int = 19200, *, idle_bits: int = 20,
               framing_error_byte: int | None = 0) -> bytes:
    """What a UART reading at ``read_baud`` receives from a device sending ``data`` at ``sent_baud``.

    A deterministic bit-level model of 8N1 framing: the sender sends bytes back to back within a frame
    and idles ``idle_bits`` bit times after each LF; the receiver waits for a falling edge, samples the
    middle of the start bit (a high sample is a false start), then eight data bits (LSB first) and the
    stop bit at its own bit time. A low stop bit is a framing error, delivered as ``framing_error_byte``
    (Linux delivers ``\\0`` unless IGNPAR/PARMRK are set), or as the garbled byte when ``None``.
    """
    if sent_baud <= 0 or read_baud <= 0:
        raise ValueError("baud rates must be positive")
    g = gcd(sent_baud, read_baud)
    ts = 2 * read_baud // g  # sender bit time in ticks
    tr = 2 * sent_baud // g  # receiver bit time in ticks (even, so half a bit is whole ticks)
    starts: list[int] = []
    t = 0
    for b in data:
        starts.append(t)
        t += 10 * ts
        if b == 0x0A:
            t += idle_bits * ts
    end = t

    def level(at: int) -> int:
        k = bisect_right(starts, at) - 1
        if k < 0 or at >= starts[k] + 10 * ts:
            return 1
        bit = (at - starts[k]) // ts
        if bit == 0:
            return 0
        if bit == 9:
            return 1
        return (data[k] >> (bit - 1)) & 1

    def next_boundary(at: int) -> int:
        """The next time the line may change (a sender bit boundary or the next byte's start)."""
        k = bisect_right(starts, at) - 1
        if k >= 0 and at < starts[k] + 10 * ts:
            return starts[k] + ((at - starts[k]) // ts + 1) * ts
        return starts[k + 1] if k + 1 < len(starts) else end

    out = bytearray()
    at, prev = 0, 1
    while at < end:
        cur = level(at)
        if prev == 1 and cur == 0:
            mid = at + tr // 2
            if level(mid) == 0:
                value = 0
                for i in range(8):
                    value |= level(mid + (i + 1) * tr) << i
                stop = level(mid + 9 * tr)
                if stop == 1 or framing_error_byte is None:
                    out.append(value)
                else:
                    out.append(framing_error_byte)
                at = mid + 9 * tr
                prev = stop
                continue
        prev = cur
        at = next_boundary(at)
    return bytes(out)
