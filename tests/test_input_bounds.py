"""Bounded inputs (frame lengths, command sizes, config sizes), docs/security.md "Bounds".

* device frames: at most 128 bytes (drivers/protocols/tsref.py ``MAX_FRAME``); the codec's memory stays
  bounded whatever arrives (a never-ending frame, pure garbage, a storm of start bytes), and a valid
  frame after it still decodes. Properties of ordinary corruption (splits, bit errors, repeats, garbage
  between frames) are in tests/test_protocol_properties.py and are not repeated here;
* config: at most 1 MiB (``MAX_CONFIG_BYTES``, counted in UTF-8 bytes); any TOML-ish text gives a table
  config or one ``ConfigError`` line, never another exception;
* credentials file: at most 64 KiB; commands: tests/test_command_fuzz.py.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_config import BASE

from tablesense.daemon.config import MAX_CONFIG_BYTES, ConfigError, parse_config
from tablesense.daemon.mqtt import CredentialsError, load_credentials
from tablesense.daemon.rules.cards import Card
from tablesense.drivers.events import CardDrawn, DeviceError, Heartbeat
from tablesense.drivers.protocols.tsref import (
    MAX_FRAME,
    HostDecoder,
    TsrefCodec,
    crc8,
    encode,
    encode_status_request,
)

CARD = encode(CardDrawn("x", 7, Card.parse("QH")))


def raw_frame(body: bytes) -> bytes:
    """A frame with a correct CRC and any length (``frame()`` refuses more than 128 bytes)."""
    return b"$" + body + b"*" + f"{crc8(body):02X}".encode() + b"\r\n"


# ------------------------------------------------------------------------------------ frame length

@settings(max_examples=200, deadline=None)
@given(st.integers(0, 600), st.integers(1, 64))
def test_checksummed_frame_decodes_only_up_to_128_bytes(pad: int, chunk: int) -> None:
    """A well-formed, correctly checksummed frame is an event iff it is at most MAX_FRAME bytes long;
    a longer one is counted ``too_long`` and the next frame still decodes, however the bytes arrive."""
    body = b"ER,00001,E1," + b"x" * pad
    data = raw_frame(body) + CARD
    codec = TsrefCodec("d")
    events = []
    for i in range(0, len(data), chunk):
        events += codec.feed(data[i:i + chunk])
    card = CardDrawn("d", 7, Card.parse("QH"))
    if len(raw_frame(body)) <= MAX_FRAME:
        assert events == [DeviceError("d", 1, "E1", "x" * pad), card]
        assert codec.stats.too_long == 0
    else:
        assert events == [card]
        assert codec.stats.too_long == 1


def _peak_while_feeding(feed: object, chunk: bytes, times: int) -> int:
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for _ in range(times):
            feed(chunk)  # type: ignore[operator]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


@pytest.mark.parametrize(("what", "chunk"), [
    ("a frame that never ends", b"A" * 65536),
    ("bytes outside any frame", bytes(range(36)) * 1820),
    ("start bytes only", b"$" * 4096),
])
def test_codec_memory_is_bounded_for_huge_inputs(what: str, chunk: bytes) -> None:
    """8 MiB (start bytes: 64 KiB, each a cut-off frame) fed in chunks: the codec's extra memory stays
    under 1 MiB (it keeps at most one 128-byte frame), nothing decodes, and the next valid frame does."""
    codec = TsrefCodec("d")
    times = (8 << 20) // len(chunk) if chunk[:1] != b"$" else 16
    first = b"$" if what == "a frame that never ends" else b""
    codec.feed(first)
    grew = _peak_while_feeding(codec.feed, chunk, times)
    assert grew < 1 << 20, f"{what}: {grew} bytes"
    assert codec.stats.events == 0
    assert codec.feed(b"\r\n" + CARD) == [CardDrawn("d", 7, Card.parse("QH"))]
    if what == "a frame that never ends":
        assert codec.stats.too_long == 1
    elif what == "bytes outside any frame":
        junk_per_chunk = len(chunk) - chunk.count(b"\r") - chunk.count(b"\n")
        assert codec.stats.garbage_bytes >= junk_per_chunk * times
    else:
        assert codec.stats.malformed >= 4096 * 16 - 1


def test_host_decoder_memory_is_bounded_for_huge_inputs() -> None:
    """The device side (simulators, firmware reference) keeps the same 128-byte bound."""
    dec = HostDecoder()
    dec.feed(b"$")
    grew = _peak_while_feeding(dec.feed, b"S" * 65536, 128)
    assert grew < 1 << 20
    assert dec.feed(b"\n" + encode_status_request())
    assert dec.rejected >= 1


def test_one_huge_write_is_bounded_too() -> None:
    """A single 4 MiB read (a misbehaving transport) is not buffered beyond one frame either."""
    codec = TsrefCodec("d")
    blob = b"$HB,00001," + b"9" * (4 << 20)
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        events = codec.feed(blob)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert events == []
    # the codec copies its input once (bytes(data)); beyond that, at most one frame
    assert peak - base < len(blob) + (1 << 20)
    assert codec.feed(b"*00\r\n" + encode(Heartbeat("x", 2))) == [Heartbeat("d", 2)]
    assert codec.stats.too_long == 1


# ------------------------------------------------------------------------------------ config

VALID = (BASE + '[mqtt]\nhost = "127.0.0.1"\n').strip().splitlines()
"""The config tests' base table plus an [mqtt] section: the text the fuzzer mutates line by line."""

KEYS = ["table", "game", "decks", "seats", "currency", "minor_unit", "min", "max", "paytable", "seat", "bet",
        "hand", "url", "role", "protocol", "baud", "host", "port", "mode", "count", "start", "x", "é", ""]
toml_values = st.one_of(
    st.integers(-(10**30), 10**30).map(str), st.floats(allow_nan=False).map(repr),
    st.text(max_size=30).map(lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    st.sampled_from(["true", "false", "[]", "{}", '["1"]', "[1, [2, [3]]]", '{ a = 1 }', "1979-05-27",
                     "inf", "nan", '"""x"""', "'raw'", "0x1F", "1_000"]),
    st.text(max_size=20))
toml_lines = st.one_of(
    st.tuples(st.sampled_from(KEYS) | st.text(max_size=10), toml_values).map(lambda kv: f"{kv[0]} = {kv[1]}"),
    st.sampled_from(KEYS).map(lambda k: f"[{k}]"),
    st.sampled_from(["[wagers.tie]", "[devices.shoe]", "[[spots]]", "[burn]", "[round]", "[journal]"]),
    st.text(max_size=40))


def test_the_fuzzed_base_config_is_valid() -> None:
    assert parse_config("\n".join(VALID)).table == "t9"


def check_config(text: str) -> None:
    """parse_config's contract: a config, or one ConfigError line; never another exception."""
    try:
        parse_config(text)
    except ConfigError as exc:
        msg = str(exc)
        assert msg and "\n" not in msg and len(msg) < 1000, msg


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_random_text_is_a_config_or_one_error_line(text: str) -> None:
    check_config(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(VALID)), st.sampled_from(["insert", "replace", "delete"]),
                          toml_lines), max_size=6))
def test_mutated_config_is_a_config_or_one_error_line(edits: list[tuple[int, str, str]]) -> None:
    lines = list(VALID)
    for at, how, line in edits:
        at = min(at, len(lines))
        if how == "insert":
            lines.insert(at, line)
        elif lines and at < len(lines):
            if how == "replace":
                lines[at] = line
            else:
                del lines[at]
    check_config("\n".join(lines))


def test_config_size_is_counted_in_bytes() -> None:
    """1 MiB of text in UTF-8: 600 Ki two-byte characters are over the limit though fewer characters."""
    big = "\n".join(VALID) + "\n# " + "é" * (MAX_CONFIG_BYTES // 2 + 1) + "\n"
    assert len(big) < MAX_CONFIG_BYTES < len(big.encode())
    with pytest.raises(ConfigError, match="larger than"):
        parse_config(big)


@pytest.mark.parametrize("text", ["a = " + "[" * 5000 + "]" * 5000,
                                  "a = " + "{b = " * 3000 + "1" + "}" * 3000,
                                  "decks = " + "9" * 5000])
def test_pathological_toml_is_one_error_line(text: str) -> None:
    check_config(text)


# ------------------------------------------------------------------------------------ credentials

def test_credentials_file_over_64_kib_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "creds"
    f.write_text('username = "table-t9"\npassword = "x"\n# ' + "y" * (64 * 1024) + "\n")
    f.chmod(0o600)
    with pytest.raises(CredentialsError, match="larger than 64 KiB"):
        load_credentials(f)
