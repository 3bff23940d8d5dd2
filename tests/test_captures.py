"""Capture corpus regression (the gpsd way): replay every tests/captures/*.cap through its codec and
diff against the golden ``.events`` transcript. ``TABLESENSE_UPDATE_GOLDEN=1`` rewrites the goldens
(review the diff before committing). Also: the .cap format itself."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablesense.drivers.events import CardDrawn, SpotChanged, SpotState
from tablesense.drivers.protocols import SequenceGap, get_codec
from tablesense.simulators.capture_format import (
    MAGIC,
    Capture,
    CaptureChunk,
    CaptureFormatError,
    CaptureWriter,
    dumps,
    event_line,
    load,
    loads,
    transcript,
)

CAPTURES = Path(__file__).parent / "captures"
CAP_FILES = sorted(CAPTURES.glob("*.cap"))
UPDATE = os.environ.get("TABLESENSE_UPDATE_GOLDEN") == "1"


def replay(capture: Capture) -> tuple[list, list[SequenceGap], object]:
    codec = get_codec(capture.protocol)(capture.device)
    events, gaps = [], []
    for chunk in capture.chunks:
        events += codec.feed(chunk.data)
        gaps += codec.take_gaps()
    return events, gaps, codec.stats


def test_the_corpus_is_there() -> None:
    names = {p.stem for p in CAP_FILES}
    assert {"baccarat_clean", "shoe_noisy", "pads_past_posting", "shoe_wrong_baud"} <= names


@pytest.mark.parametrize("path", CAP_FILES, ids=[p.stem for p in CAP_FILES])
def test_capture_replays_to_its_golden_transcript(path: Path) -> None:
    capture = load(path)
    events, gaps, stats = replay(capture)
    got = transcript(events, gaps, stats)  # type: ignore[arg-type]
    golden = path.with_suffix(".events")
    if UPDATE:
        golden.write_text(got, encoding="utf-8")
    assert golden.exists(), f"no golden transcript {golden.name}; run with TABLESENSE_UPDATE_GOLDEN=1"
    assert got == golden.read_text(encoding="utf-8"), f"{path.name} no longer decodes to {golden.name}"


def test_clean_round_has_no_errors_and_whole_rounds() -> None:
    events, gaps, stats = replay(load(CAPTURES / "baccarat_clean.cap"))
    assert gaps == []
    assert stats.dropped == 0 and stats.garbage_bytes == 0 and stats.duplicates == 0  # type: ignore[attr-defined]
    assert sum(isinstance(e, CardDrawn) for e in events) >= 8


def test_noisy_capture_counts_every_fault_and_never_doubles_a_card() -> None:
    events, gaps, stats = replay(load(CAPTURES / "shoe_noisy.cap"))
    s = stats
    assert s.bad_checksum >= 1 and s.too_long == 1 and s.unknown_type == 1  # type: ignore[attr-defined]
    assert s.duplicates == 1 and s.garbage_bytes > 0  # type: ignore[attr-defined]
    seqs = [e.seq for e in events]
    assert len(seqs) == len(set(seqs))
    assert len(gaps) >= 1


def test_pad_capture_shows_a_change_after_the_lock() -> None:
    events, _, _ = replay(load(CAPTURES / "pads_past_posting.cap"))
    p2 = [(e.state, e.amount) for e in events if isinstance(e, SpotChanged) and e.spot == "P2"]
    assert (SpotState.LOCKED, 500) in p2
    assert p2[p2.index((SpotState.LOCKED, 500)) + 1] == (SpotState.PLACED, 50000)


def test_wrong_baud_capture_yields_nothing() -> None:
    events, _, stats = replay(load(CAPTURES / "shoe_wrong_baud.cap"))
    assert events == []
    assert stats.garbage_bytes > 100  # type: ignore[attr-defined]


# -- the format -------------------------------------------------------------------------------------


def test_format_round_trip_with_meta_and_multiline_notes() -> None:
    cap = Capture("shoe", "tsref", "line one\nline two", {"serial": "9600 8N1"},
                  [CaptureChunk(0.0, b"$HB,00001*0F\r\n"), CaptureChunk(1.5, b"\x00\xff#"),
                   CaptureChunk(1.5, b"")])
    text = dumps(cap)
    assert text.startswith(MAGIC + "\n# device: shoe\n# protocol: tsref\n"
                           "# notes: line one\n# notes: line two\n")
    assert "+1.500000 00ff23  # \\x00\\xff#" in text
    assert loads(text) == cap
    assert loads(dumps(cap, readable=False)) == cap
    assert loads(text).data == b"$HB,00001*0F\r\n\x00\xff#"


@pytest.mark.parametrize("text, where", [
    ("", ":1:"),
    ("# something else\n", ":1:"),
    (f"{MAGIC}\n# protocol: tsref\n+0 00\n", "device"),
    (f"{MAGIC}\n# device: shoe\n", "protocol"),
    (f"{MAGIC}\n# device: shoe\n# protocol: tsref\n0.5 00\n", ":4:"),
    (f"{MAGIC}\n# device: shoe\n# protocol: tsref\n+0.5 0\n", ":4: odd"),
    (f"{MAGIC}\n# device: shoe\n# protocol: tsref\n+0.5 zz\n", ":4:"),
    (f"{MAGIC}\n# device: shoe\n# protocol: tsref\n+2 00\n+1 00\n", ":5: offset"),
])
def test_format_errors_name_the_line(text: str, where: str) -> None:
    with pytest.raises(CaptureFormatError, match=where.replace("+", r"\+")):
        loads(text, source="x.cap")


def test_comments_after_the_header_and_blank_lines_are_ignored() -> None:
    text = f"{MAGIC}\n# device: pads\n# protocol: tsref\n\n+0.1 24  # $\n# notes: late comment\n+0.2 0a\n"
    cap = loads(text)
    assert cap.notes == "" and cap.data == b"$\n" and cap.duration == 0.2


def test_streaming_writer_produces_a_readable_capture() -> None:
    out = io.StringIO()
    w = CaptureWriter(out, "shoe", "tsref", notes="live", meta={"source": "/dev/ttyUSB0"})
    w.write(0.25, b"$NS,00000*79\r\n")
    w.write(0.10, b"\x01")  # a clock step backwards is clamped, never an unreadable file
    cap = loads(out.getvalue())
    assert [c.offset for c in cap.chunks] == [0.25, 0.25]
    assert cap.meta == {"source": "/dev/ttyUSB0"} and w.chunks == 2 and w.bytes == 15
    with pytest.raises(ValueError):
        CaptureWriter(io.StringIO(), "shoe", "tsref", meta={"device": "x"})


def test_event_lines_are_stable_text() -> None:
    from tablesense.daemon.rules.cards import Card
    assert event_line(CardDrawn("shoe", 14, Card.parse("10D"))) == "shoe 00014 CardDrawn card=10D"
    assert event_line(SpotChanged("pads", 3, "P1", SpotState.PLACED, None)) == (
        "pads 00003 SpotChanged spot=P1 state=placed amount=-")



@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**7), st.binary(max_size=80)), max_size=20),
       st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=40))
def test_any_capture_round_trips(chunks, notes) -> None:
    offsets = sorted(us for us, _ in chunks)
    cap = Capture("shoe", "tsref", notes.strip(), {},
                  [CaptureChunk(us / 1e6, data) for us, (_, data) in zip(offsets, chunks, strict=True)])
    back = loads(dumps(cap))
    assert back.data == cap.data
    assert [c.offset for c in back.chunks] == [c.offset for c in cap.chunks]
    assert back.notes == cap.notes
