"""The tablesense reference protocol (docs/protocol.md): encoding, decoding, sequence rules, bad input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tablesense.daemon.rules.cards import Card
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    CardUnreadable,
    DealerButton,
    DeviceError,
    DeviceIdentity,
    Heartbeat,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)
from tablesense.drivers.protocols import CodecStats, SequenceGap
from tablesense.drivers.protocols.tsref import (
    MAX_FRAME,
    Ack,
    HostDecoder,
    StatusRequest,
    TsrefCodec,
    crc8,
    decode_host,
    encode,
    frame,
    parse_card,
)

QH = Card.parse("QH")
TEN_D = Card.parse("10D")


def cd(seq: int, card: str = "QH", device: str = "shoe") -> CardDrawn:
    return CardDrawn(device, seq, Card.parse(card))


def test_crc8_check_value_and_frame_layout() -> None:
    # CRC-8/SMBUS check value from the catalogue of CRC algorithms.
    assert crc8(b"123456789") == 0xF4
    assert crc8(b"") == 0
    f = frame("CD,00012,QH")
    assert f == b"$CD,00012,QH*" + f"{crc8(b'CD,00012,QH'):02X}".encode() + b"\r\n"


@pytest.mark.parametrize("event, wire", [
    (CardDrawn("d", 12, QH), b"$CD,00012,QH*"),
    (CardDrawn("d", 0, TEN_D), b"$CD,00000,10D*"),
    (CardUnreadable("d", 99999), b"$CU,99999*"),
    (ShoeStatus("d", 1, ShoeStatusKind.NEW_SHOE), b"$NS,00001*"),
    (ShoeStatus("d", 2, ShoeStatusKind.BURN, Card.parse("AS")), b"$BN,00002,AS*"),
    (ShoeStatus("d", 3, ShoeStatusKind.BURN), b"$BN,00003*"),
    (ShoeStatus("d", 4, ShoeStatusKind.CUT_CARD), b"$CC,00004*"),
    (ShoeStatus("d", 5, ShoeStatusKind.EMPTY), b"$EM,00005*"),
    (ShoeStatus("d", 6, ShoeStatusKind.LID_OPEN), b"$LO,00006*"),
    (ShoeStatus("d", 7, ShoeStatusKind.LID_CLOSED), b"$LC,00007*"),
    (Heartbeat("d", 8), b"$HB,00008*"),
    (DeviceError("d", 9, "E26", "card face up"), b"$ER,00009,E26,card face up*"),
    (DeviceIdentity("d", 10, "Acme, Inc.", "S-8", "2.1", "SN*1"), b"$ID,00010,Acme%2C Inc.,S-8,2.1,SN%2A1*"),
    (DeviceIdentity("d", 0, "Acme Gaming", "CS-8", "2.4.1", "SN12345", "b7e1c20a"),
     b"$ID,00000,Acme Gaming,CS-8,2.4.1,SN12345,b7e1c20a*"),
    (SpotChanged("d", 11, "P1", SpotState.PLACED, 2500), b"$SP,00011,P1,PLACED,2500*"),
    (SpotChanged("d", 12, "banker", SpotState.LOCKED, None), b"$SP,00012,banker,LOCKED,?*"),
    (SpotChanged("d", 13, "T", SpotState.EMPTY, 0), b"$SP,00013,T,EMPTY,0*"),
    (DealerButton("d", 14, Button.NO_MORE_BETS), b"$BT,00014,NO_MORE_BETS*"),
    (DealerButton("d", 15, Button.ROUND_END), b"$BT,00015,ROUND_END*"),
    (DealerButton("d", 16, Button.VOID_ROUND), b"$BT,00016,VOID_ROUND*"),
])
def test_every_event_type_encodes_to_documented_frame_and_decodes_back(event, wire) -> None:
    data = encode(event)
    assert data.startswith(wire) and data.endswith(b"\r\n") and len(data) == len(wire) + 4
    codec = TsrefCodec("d")
    assert codec.feed(data) == [event]
    assert codec.stats == CodecStats(frames=1, events=1)


def test_decoded_events_carry_the_configured_device_name() -> None:
    codec = TsrefCodec("table7-shoe")
    (event,) = codec.feed(encode(cd(5, device="ignored")))
    assert event == CardDrawn("table7-shoe", 5, QH)


def test_non_ascii_identity_text_round_trips_through_escapes() -> None:
    ident = DeviceIdentity("d", 1, "Société", "ß-1 %", "v1,2", "番号")
    data = encode(ident)
    assert all(b < 0x80 for b in data)
    assert TsrefCodec("d").feed(data) == [ident]


@pytest.mark.parametrize("bad", [
    CardDrawn("d", 100000, QH),
    CardDrawn("d", -1, QH),
    SpotChanged("d", 1, "spot with space", SpotState.PLACED, 5),
    SpotChanged("d", 1, "P1", SpotState.PLACED, -5),
    DeviceError("d", 1, "", "x"),
    DeviceIdentity("d", 1, "v" * 40, "m" * 40, "f" * 40, "s"),
    ShoeStatus("d", 1, ShoeStatusKind.CUT_CARD, QH),
])
def test_encoder_refuses_what_cannot_be_sent(bad) -> None:
    with pytest.raises(ValueError):
        encode(bad)


def test_wire_cards_accept_t_for_ten_and_reject_lowercase_and_nonsense() -> None:
    assert parse_card("TD") == TEN_D
    assert parse_card("10D") == TEN_D
    for text in ("qh", "1D", "11H", "QX", "Q", "", "Q♥", "QHH"):
        assert parse_card(text) is None
    codec = TsrefCodec("d")
    assert codec.feed(frame("CD,00001,TD")) == [CardDrawn("d", 1, TEN_D)]
    assert codec.feed(frame("CD,00002,1D")) == []
    assert codec.stats.malformed == 1


def test_bad_checksum_is_dropped_counted_and_logged_never_an_event() -> None:
    good = encode(cd(1))
    bad = good.replace(good[-4:-2], b"00" if good[-4:-2] != b"00" else b"01")
    codec = TsrefCodec("shoe")
    with capture_logs() as logs:
        assert codec.feed(bad) == []
    assert codec.stats.bad_checksum == 1 and codec.stats.events == 0
    assert [entry["event"] for entry in logs] == ["codec.bad_checksum"]
    assert logs[0]["device"] == "shoe" and "$CD,00001,QH" in logs[0]["frame"]


def test_lowercase_checksum_digits_and_bare_lf_are_accepted() -> None:
    body = b"HB,00001"
    line = b"$" + body + b"*" + f"{crc8(body):02x}".encode() + b"\n"
    assert TsrefCodec("d").feed(line) == [Heartbeat("d", 1)]


@pytest.mark.parametrize("line, counter", [
    (b"$CD,00001,QH\r\n", "malformed"),              # no checksum
    (b"$CD,00001,QH*G1\r\n", "malformed"),           # checksum not hex
    (frame("ZZ,00001"), "unknown_type"),
    (frame("cd,00001,QH"), "unknown_type"),
    (frame("CD,1x,QH"), "malformed"),                # bad sequence number
    (frame("CD,123456,QH"), "malformed"),            # six-digit sequence number
    (frame("CD,00001"), "malformed"),                # missing card
    (frame("SP,00001,P1,MAYBE,5"), "malformed"),
    (frame("SP,00001,P1,PLACED,-5"), "malformed"),
    (frame("SP,00001,P1,PLACED"), "malformed"),
    (frame("BT,00001,SHUFFLE"), "malformed"),
    (frame("ID,00001,a,b,c"), "malformed"),
    (frame("ID,00001,a%2,b,c,d"), "malformed"),      # broken escape
    (frame("ER,00001,E 1,x"), "malformed"),
    (frame("SQ"), "unknown_type"),                   # host frame echoed back
])
def test_bad_frames_are_dropped_and_counted_by_kind(line, counter) -> None:
    codec = TsrefCodec("d")
    with capture_logs() as logs:
        assert codec.feed(line) == []
    assert getattr(codec.stats, counter) == 1
    assert codec.stats.events == 0
    assert len(logs) == 1 and logs[0]["log_level"] == "warning"


def test_extra_trailing_fields_are_ignored_for_forward_compatibility() -> None:
    assert TsrefCodec("d").feed(frame("CD,00001,QH,vendor-extra")) == [cd(1, device="d")]


def test_non_printable_byte_inside_a_checksummed_frame_is_malformed() -> None:
    body = b"CD,00001,Q\x01H"
    line = b"$" + body + b"*" + f"{crc8(body):02X}".encode() + b"\r\n"
    codec = TsrefCodec("d")
    assert codec.feed(line) == []
    assert codec.stats.malformed == 1


def test_garbage_between_frames_and_blank_lines() -> None:
    codec = TsrefCodec("d")
    data = b"\r\n\r\n" + encode(cd(1)) + b"noise\x00\xff" + encode(cd(2, "AS")) + b"\r\n"
    assert codec.feed(data) == [cd(1, device="d"), cd(2, "AS", device="d")]
    assert codec.stats.garbage_bytes == 7  # the CR/LF between frames are not garbage


def test_opened_mid_frame_discards_the_tail_then_decodes() -> None:
    stream = encode(cd(1)) + encode(cd(2, "KS"))
    codec = TsrefCodec("d")
    assert codec.feed(stream[5:]) == [cd(2, "KS", device="d")]
    assert codec.stats.garbage_bytes == len(encode(cd(1))) - 5 - 2


def test_a_frame_cut_off_by_a_new_start_is_malformed_and_the_new_frame_survives() -> None:
    codec = TsrefCodec("d")
    assert codec.feed(encode(cd(1))[:8] + encode(cd(1, "2C"))) == [cd(1, "2C", device="d")]
    assert codec.stats.malformed == 1


def test_too_long_frame_is_discarded_up_to_the_next_start() -> None:
    codec = TsrefCodec("d")
    long_line = b"$CD,00001," + b"Q" * 200 + b"*00\r\n"
    assert codec.feed(long_line + encode(cd(2))) == [cd(2, device="d")]
    assert codec.stats.too_long == 1 and codec.stats.malformed == 0


def test_frame_of_exactly_max_length_is_accepted() -> None:
    text = "x" * (MAX_FRAME - len("$ER,00001,E1,*XX\r\n"))
    data = encode(DeviceError("d", 1, "E1", text))
    assert len(data) == MAX_FRAME
    assert TsrefCodec("d").feed(data) == [DeviceError("d", 1, "E1", text)]


def test_too_long_frame_arriving_in_small_pieces() -> None:
    codec = TsrefCodec("d")
    data = b"$HB,00001," + b"7" * 300 + b"*00\r\n" + encode(Heartbeat("x", 2))
    events = []
    for i in range(0, len(data), 3):
        events += codec.feed(data[i:i + 3])
    assert events == [Heartbeat("d", 2)]
    assert codec.stats.too_long == 1


def test_duplicate_frame_is_dropped_so_a_card_is_never_doubled() -> None:
    codec = TsrefCodec("d")
    f1, f2 = encode(cd(1)), encode(cd(2, "9S"))
    assert codec.feed(f1 + f1 + f2 + f2 + f1) == [cd(1, device="d"), cd(2, "9S", device="d")]
    assert codec.stats.duplicates == 3
    assert codec.stats.seq_gaps == 0
    assert codec.take_gaps() == []


def test_a_repeat_in_the_same_read_is_dropped_also_once_the_host_acknowledges() -> None:
    """CI flake of the unplug test: a device that resent a frame before reading its AK (a status request
    or its resend timer) put both copies in one read; the codec delivered both, because a frame delivered
    but not acknowledged is delivered again when resent. The host had not seen the first copy, so the
    repeat cannot be a retry of a failed journal write: a duplicate. Across reads the rule stands."""
    codec = TsrefCodec("d")
    f0, f1, f2 = encode(cd(0)), encode(cd(1, "7D")), encode(cd(2, "9S"))
    assert codec.feed(f0) == [cd(0, device="d")]
    codec.ack(0)  # the host acknowledges: from now on only acknowledged frames count as duplicates
    assert codec.feed(f1 + f1 + f2 + f1 + f2) == [cd(1, "7D", device="d"), cd(2, "9S", device="d")]
    assert (codec.stats.duplicates, codec.stats.resent, codec.stats.seq_gaps) == (3, 0, 0)
    assert codec.feed(f2) == [cd(2, "9S", device="d")]  # a later read, not acknowledged yet: the host decides
    assert codec.stats.resent == 1
    codec.ack(2)
    assert codec.feed(f1 + f2) == [] and codec.stats.duplicates == 5


def test_sequence_gap_delivers_the_event_and_queues_the_gap() -> None:
    codec = TsrefCodec("shoe")
    with capture_logs() as logs:
        events = codec.feed(encode(cd(1)) + encode(cd(4, "3H")))
    assert events == [cd(1), cd(4, "3H")]
    assert codec.stats.seq_gaps == 1
    assert codec.take_gaps() == [SequenceGap("shoe", 2, 4)]
    assert codec.take_gaps() == []
    assert [e["event"] for e in logs] == ["codec.sequence_gap"]


def test_sequence_wraps_from_99999_to_0_without_a_gap() -> None:
    codec = TsrefCodec("d")
    codec.feed(encode(cd(99998)) + encode(cd(99999, "2S")) + encode(cd(0, "3S")) + encode(cd(1, "4S")))
    assert codec.stats.seq_gaps == 0 and codec.stats.events == 4


def test_device_restart_at_seq_zero_is_a_gap_and_not_mistaken_for_duplicates() -> None:
    codec = TsrefCodec("d")
    before = [encode(cd(i, c)) for i, c in enumerate(["AS", "2S", "3S", "4S"])]
    codec.feed(b"".join(before))
    # the device reboots and numbers from 0 again, with different content
    after = encode(DeviceIdentity("d", 0, "v", "m", "f", "s")) + encode(cd(1, "2S")) + encode(cd(2, "9D"))
    events = codec.feed(after)
    assert [e.seq for e in events] == [0, 1, 2]
    assert codec.take_gaps() == [SequenceGap("d", 4, 0)]
    assert codec.stats.duplicates == 0


def test_malformed_frame_leaves_a_gap_but_unknown_type_consumes_its_seq() -> None:
    codec = TsrefCodec("d")
    codec.feed(encode(cd(1)) + frame("CD,00002,ZZ") + encode(cd(3, "2D")))
    assert codec.take_gaps() == [SequenceGap("d", 2, 3)]
    codec.feed(frame("XV,00004,vendor-thing") + encode(cd(5, "5D")))
    assert codec.take_gaps() == []
    assert codec.stats.unknown_type == 1


def test_reset_drops_partial_frame_but_keeps_sequence_memory() -> None:
    codec = TsrefCodec("d")
    f1, f2 = encode(cd(1)), encode(cd(2, "7C"))
    assert codec.feed(f1 + f2[:6]) == [cd(1, device="d")]
    codec.reset()  # the link dropped; the device retransmits its last frames after the reconnect
    assert codec.feed(f1 + f2) == [cd(2, "7C", device="d")]
    assert codec.stats.duplicates == 1
    assert codec.take_gaps() == []
    assert codec.last_seq == 2


def test_stats_is_a_snapshot() -> None:
    codec = TsrefCodec("d")
    snap = codec.stats
    codec.feed(encode(cd(1)))
    assert snap.frames == 0 and codec.stats.frames == 1


def test_garbage_logging_is_rate_limited() -> None:
    codec = TsrefCodec("d")
    with capture_logs() as logs:
        for _ in range(2000):
            codec.feed(b"\xfe\x01junk")
            codec.feed(b"$")  # ends each garbage run; "$x" is then a malformed line
            codec.feed(b"x\r\n")
    assert codec.stats.garbage_bytes == 2000 * 6
    assert codec.stats.malformed == 2000
    # 3 + 5 first occurrences, then one line per 4096 garbage bytes and one per 100 bad frames
    assert 8 <= len(logs) <= 8 + 12000 // 4096 + 2000 // 100 + 2
    assert any("suppressed_since_last_line" in e for e in logs)


def test_bad_checksum_flood_is_rate_limited_and_resets_after_a_good_frame() -> None:
    codec = TsrefCodec("d")
    bad = encode(cd(1))[:-4] + b"00\r\n"
    if bad == encode(cd(1)):  # pragma: no cover - the checksum of this frame is not 00
        pytest.fail("test frame unexpectedly has checksum 00")
    with capture_logs() as logs:
        codec.feed(bad * 1000)
        n_flood = len(logs)
        codec.feed(encode(cd(1)))
        codec.feed(bad)
    assert codec.stats.bad_checksum == 1001
    assert n_flood <= 5 + 10
    assert logs[-1]["event"] == "codec.bad_checksum"  # logged again once a good frame came through


def test_host_frames_status_request_and_ack() -> None:
    codec = TsrefCodec("d")
    assert codec.status_request().startswith(b"$SQ*")
    assert codec.ack(42).startswith(b"$AK,00042*")
    assert decode_host(codec.status_request() + b"zz" + codec.ack(42)) == [StatusRequest(), Ack(42)]
    with pytest.raises(ValueError):
        codec.ack(100000)
    dec = HostDecoder()
    both = codec.status_request() + codec.ack(7)
    assert dec.feed(both[:5]) == []
    assert dec.feed(both[5:]) == [StatusRequest(), Ack(7)]
    assert dec.feed(frame("XX") + b"$SQ*00\r\n") == []
    assert dec.rejected == 2


def test_feed_accepts_bytearray_and_memoryview() -> None:
    data = encode(cd(1))
    assert TsrefCodec("d").feed(bytearray(data)) == [cd(1, device="d")]
    assert TsrefCodec("d").feed(memoryview(data)) == [cd(1, device="d")]  # type: ignore[arg-type]


def test_unusual_inputs_never_raise() -> None:
    codec = TsrefCodec("d")
    for data in (b"", b"$", b"$$$$", b"*\r\n", b"$*\r\n", b"$*00\r\n", b"$,*00\r\n", b"\n" * 10,
                 b"$\n", b"$" + b"\x80" * 500, bytes(range(256)) * 3):
        assert codec.feed(data) == []
    assert codec.stats.events == 0


def test_a_repeated_unknown_frame_counts_once_as_unknown_then_as_duplicate() -> None:
    codec = TsrefCodec("d")
    vendor = frame("XV,00001,extension")
    assert codec.feed(vendor + vendor + encode(cd(2))) == [cd(2, device="d")]
    assert (codec.stats.unknown_type, codec.stats.duplicates, codec.stats.seq_gaps) == (1, 1, 0)


def test_a_wrong_baud_rate_does_not_flood_the_log() -> None:
    from tablesense.simulators.faults import wrong_baud
    from tablesense.simulators.shoe import VirtualShoe

    shoe = VirtualShoe(8, seed=12)
    data = shoe.start_shoe()
    while shoe.remaining:
        data += shoe.draw()
    for sent, read in ((9600, 19200), (19200, 9600)):
        garbled = wrong_baud(data, sent, read)
        codec = TsrefCodec("shoe")
        with capture_logs() as logs:
            for i in range(0, len(garbled), 32):
                assert codec.feed(garbled[i:i + 32]) == []
        s = codec.stats
        problems = s.garbage_bytes // 4096 + s.dropped // 100
        assert s.garbage_bytes > 1000
        assert len(logs) <= 8 + problems + 2, (sent, read, len(logs), s)
        assert len(logs) < len(garbled) // 200


def test_the_identity_session_of_protocol_version_2() -> None:
    """docs/protocol.md §4: the identity frame's fifth field is the device session (a version 1 frame
    has none: session ""); a session that is not a 1-16 character token makes the frame malformed."""
    codec = TsrefCodec("shoe")
    (v1,) = codec.feed(frame("ID,00000,Acme,CS-8,2.4,SN1"))
    assert v1 == DeviceIdentity("shoe", 0, "Acme", "CS-8", "2.4", "SN1", "")
    assert codec.feed(frame("ID,00001,Acme,CS-8,2.4,SN1,boot-00042")) == [
        DeviceIdentity("shoe", 1, "Acme", "CS-8", "2.4", "SN1", "boot-00042")]
    assert codec.feed(frame("ID,00002,Acme,CS-8,2.4,SN1,a%20b")) == []
    assert codec.stats.malformed == 1
    doc = (Path(__file__).resolve().parents[1] / "docs" / "protocol.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"`(\$ID,[^`]*)`", doc)  # the documented example decodes as documented
    assert TsrefCodec("shoe").feed(example.encode() + b"\r\n")[0].session == "b7e1c20a"
