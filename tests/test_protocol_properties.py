"""Hypothesis properties of the tsref codec: splits, garbage, mid-stream opens, bit errors, repeats."""

from __future__ import annotations

import itertools
import random

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tablesense.daemon.rules.cards import ALL_CARDS
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
from tablesense.drivers.protocols.tsref import SEQ_MODULUS, TsrefCodec, encode
from tablesense.simulators import faults

DEV = "dev"

cards = st.sampled_from(ALL_CARDS)
tokens = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-",
                 min_size=1, max_size=16)
texts = st.text(max_size=8)


def _event(kind: str, seq: int, data: st.DataObject) -> DeviceEvent:
    if kind == "card":
        return CardDrawn(DEV, seq, data.draw(cards))
    if kind == "unreadable":
        return CardUnreadable(DEV, seq)
    if kind == "status":
        k = data.draw(st.sampled_from(list(ShoeStatusKind)))
        card = data.draw(st.none() | cards) if k is ShoeStatusKind.BURN else None
        return ShoeStatus(DEV, seq, k, card)
    if kind == "identity":
        v, m, f, s = (data.draw(texts) for _ in range(4))
        return DeviceIdentity(DEV, seq, v, m, f, s)
    if kind == "heartbeat":
        return Heartbeat(DEV, seq)
    if kind == "error":
        return DeviceError(DEV, seq, data.draw(tokens), data.draw(texts))
    if kind == "spot":
        return SpotChanged(DEV, seq, data.draw(tokens), data.draw(st.sampled_from(list(SpotState))),
                           data.draw(st.none() | st.integers(0, 10**12 - 1)))
    return DealerButton(DEV, seq, data.draw(st.sampled_from(list(Button))))


KINDS = ["card", "card", "card", "unreadable", "status", "identity", "heartbeat", "error", "spot", "button"]


@st.composite
def event_streams(draw: st.DrawFn, min_size: int = 1, max_size: int = 25) -> tuple[list[DeviceEvent], bytes]:
    """Events with consecutive sequence numbers (possibly wrapping) and their encoded stream."""
    n = draw(st.integers(min_size, max_size))
    start = draw(st.integers(0, SEQ_MODULUS - 1))
    data = draw(st.data())
    events: list[DeviceEvent] = []
    out = b""
    for i in range(n):
        ev = _event(draw(st.sampled_from(KINDS)), (start + i) % SEQ_MODULUS, data)
        try:
            frame = encode(ev)
        except ValueError:  # a text too long for one frame: not sendable, so not part of the stream
            assume(False)
        events.append(ev)
        out += frame
    return events, out


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def decode_chunks(chunks: list[bytes]) -> tuple[list[DeviceEvent], TsrefCodec]:
    codec = TsrefCodec(DEV)
    events: list[DeviceEvent] = []
    for chunk in chunks:
        events += codec.feed(chunk)
    return events, codec


@settings(deadline=None)
@given(event_streams(), st.lists(st.integers(min_value=0), max_size=40))
def test_any_split_of_a_valid_stream_decodes_to_the_same_events(stream, cuts) -> None:
    events, data = stream
    decoded, codec = decode_chunks(split_at(data, cuts))
    assert decoded == events
    s = codec.stats
    assert (s.frames, s.events, s.dropped, s.garbage_bytes, s.seq_gaps, s.duplicates) == (
        len(events), len(events), 0, 0, 0, 0)


@settings(deadline=None)
@given(event_streams())
def test_byte_by_byte_feed_decodes_the_same_events(stream) -> None:
    events, data = stream
    decoded, _ = decode_chunks([data[i:i + 1] for i in range(len(data))])
    assert decoded == events


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(min_value=0), max_size=30))
def test_random_bytes_never_crash_and_never_yield_a_card(data, cuts) -> None:
    decoded, codec = decode_chunks([*split_at(data, cuts), b"\n"])  # the final LF ends any open frame
    assert not [e for e in decoded if isinstance(e, CardDrawn)]
    s = codec.stats
    assert s.events == len(decoded)
    # every byte that is not a line end is accounted for as garbage or as part of some frame
    if data.strip(b"\r\n"):
        assert s.garbage_bytes + s.frames + s.dropped > 0


@settings(deadline=None)
@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=30),
       st.lists(st.sampled_from([b"$", b"*", b"\r", b"\n", b"$CD,1,QH", b"*FF\r\n"]), max_size=5))
def test_frame_like_junk_never_yields_a_card(pieces, frame_bits) -> None:
    junk = b"".join(p + (frame_bits[i % len(frame_bits)] if frame_bits else b"")
                    for i, p in enumerate(pieces))
    decoded, _ = decode_chunks([junk])
    assert not [e for e in decoded if isinstance(e, CardDrawn)]


@settings(deadline=None)
@given(event_streams(), st.randoms(use_true_random=False), st.lists(st.integers(min_value=0), max_size=20))
def test_garbage_between_frames_loses_nothing(stream, rng, cuts) -> None:
    events, data = stream
    noisy = faults.insert_garbage(data, rng, probability=0.7, max_len=60)
    decoded, _ = decode_chunks(split_at(noisy, cuts))
    assert decoded == events


@settings(deadline=None)
@given(event_streams(min_size=2), st.integers(min_value=1))
def test_opened_mid_stream_yields_exactly_the_complete_frames_after_the_cut(stream, at) -> None:
    events, data = stream
    k = at % len(data)
    frames = faults.frames_of(data)
    starts = [sum(len(f) for f in frames[:i]) for i in range(len(frames))]
    decoded, _ = decode_chunks([data[k:]])
    assert decoded == [e for e, s in zip(events, starts, strict=True) if s >= k]


@settings(deadline=None)
@given(event_streams(), st.randoms(use_true_random=False))
def test_every_single_bit_error_in_a_frame_is_detected(stream, rng) -> None:
    events, data = stream
    frames = faults.frames_of(data)
    victim = rng.randrange(len(frames))
    original = frames[victim]
    while True:
        hit = faults.corrupt_bits(original, rng, flips=1)
        if not set(hit[1:-5]) & set(b"$\r\n"):  # the flip kept the frame one line
            break
    frames[victim] = hit
    decoded, codec = decode_chunks([b"".join(frames)])
    assert decoded == events[:victim] + events[victim + 1:]
    assert codec.stats.bad_checksum + codec.stats.malformed == 1


@settings(deadline=None)
@given(event_streams(), st.randoms(use_true_random=False))
def test_any_bit_errors_never_invent_an_event(stream, rng) -> None:
    events, data = stream
    frames = faults.frames_of(data)
    noisy = b"".join(faults.corrupt_bits(f, rng, flips=rng.randint(1, 3)) if rng.random() < 0.5 else f
                     for f in frames)
    decoded, _ = decode_chunks([noisy])
    for e in decoded:
        assert e in events


@settings(deadline=None)
@given(event_streams(), st.randoms(use_true_random=False))
def test_repeated_frames_are_dropped_and_counted(stream, rng) -> None:
    events, data = stream
    repeated = faults.repeat_frames(data, rng, probability=0.5)
    decoded, codec = decode_chunks([repeated])
    assert decoded == events
    assert codec.stats.duplicates == len(faults.frames_of(repeated)) - len(events)
    assert codec.stats.seq_gaps == 0


@settings(deadline=None)
@given(event_streams(min_size=2), st.integers(min_value=0), st.integers(min_value=0))
def test_reconnect_mid_frame_then_retransmit_loses_and_doubles_nothing(stream, at, back) -> None:
    """The link drops at byte ``at``; the transport resets the codec; the device resends from the start
    of some earlier frame (the unacknowledged ones)."""
    events, data = stream
    frames = faults.frames_of(data)
    starts = [sum(len(f) for f in frames[:i]) for i in range(len(frames))]
    k = at % len(data)
    current = max(i for i, s in enumerate(starts) if s <= k)
    resend_from = starts[current - back % (min(current, 60) + 1)]
    codec = TsrefCodec(DEV)
    decoded = codec.feed(data[:k])
    codec.reset()
    decoded += codec.feed(data[resend_from:])
    assert decoded == events
    assert codec.take_gaps() == []


@settings(deadline=None)
@given(event_streams(min_size=3), st.data())
def test_lost_frames_are_reported_as_one_gap_each_run(stream, data) -> None:
    events, raw = stream
    frames = faults.frames_of(raw)
    lose = data.draw(st.integers(1, len(frames) - 2))
    kept = frames[:lose] + frames[lose + 1:]
    codec = TsrefCodec(DEV)
    decoded = codec.feed(b"".join(kept))
    assert decoded == events[:lose] + events[lose + 1:]
    gaps = codec.take_gaps()
    assert [(g.expected, g.got) for g in gaps] == [(events[lose].seq, events[lose + 1].seq)]


def test_wrong_baud_rates_yield_zero_events_and_count_garbage() -> None:
    """Deterministic: 15 seeded streams, each read at the wrong speed both ways and at far-off rates."""
    for seed in range(15):
        rng = random.Random(seed)
        events = [CardDrawn(DEV, i, rng.choice(ALL_CARDS)) if i % 3 else Heartbeat(DEV, i) for i in range(40)]
        data = b"".join(encode(e) for e in events)
        for sent, read in ((9600, 19200), (19200, 9600), (9600, 38400), (38400, 9600), (9600, 115200),
                           (115200, 9600), (9600, 4800), (19200, 57600)):
            garbled = faults.wrong_baud(data, sent, read)
            codec = TsrefCodec(DEV)
            assert codec.feed(garbled) == [], (seed, sent, read)
            s = codec.stats
            assert s.garbage_bytes + s.dropped > 0
        assert TsrefCodec(DEV).feed(faults.wrong_baud(data, 9600, 9600)) == events


def _split_checked_reference(line: bytes) -> tuple[str, bytes | None, str | None]:
    """The line check as first written (a byte at a time), kept to pin the table-driven one to it."""
    from tablesense.drivers.protocols.tsref import crc8
    core = line[:-1]
    if core.endswith(b"\r"):
        core = core[:-1]
    if len(core) < 4 or core[-3] != 0x2A:
        return "malformed", None, "no '*' checksum before the line end"
    hh = core[-2:]
    try:
        given = int(hh.decode("ascii"), 16)
    except (UnicodeDecodeError, ValueError):
        return "malformed", None, "checksum is not two hex digits"
    if not all(c in b"0123456789ABCDEFabcdef" for c in hh):
        return "malformed", None, "checksum is not two hex digits"
    body = core[1:-3]
    if crc8(body) != given:
        return "checksum", body, f"checksum {hh.decode('ascii')} != computed {crc8(body):02X}"
    if any(b < 0x20 or b > 0x7E or b in (0x24, 0x2A) for b in body):
        return "malformed", body, "non-printable or reserved byte in frame"
    return "ok", body, None


_LINE_BYTES = st.sampled_from([b"$", b"*", b"\r", b" ", b"+", b"-", b"0", b"7", b"a", b"F", b"g", b"Z", b",",
                               b"\x00", b"\x1f", b"\x7f", b"\x80", b"\xff", b"\xc3\xa9", b"~"])


@settings(max_examples=3000)
@given(st.lists(_LINE_BYTES, max_size=12).map(b"".join), st.booleans(), st.sampled_from(
    [None, *(f"{v:02X}".encode() for v in (0, 0x0F, 0xA5, 0xFF)), b"a5", b" F", b"+F", b"0x", b"G1"]))
def test_the_line_check_agrees_with_its_first_byte_at_a_time_version(body: bytes, cr: bool,
                                                                    checksum: bytes | None) -> None:
    from tablesense.drivers.protocols.tsref import _split_checked, crc8
    field = f"{crc8(body):02X}".encode() if checksum is None else checksum
    for line in (b"$" + body + b"*" + field + (b"\r" if cr else b"") + b"\n", body + b"\n",
                 b"$" + body + b"\n"):
        assert _split_checked(line) == _split_checked_reference(line)
