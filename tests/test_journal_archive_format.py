"""The archive's storage format (docs/journal.md "Storage"): units are written as one Zstandard frame
with the preset dictionary; units written as raw deflate by earlier versions still read, verify and
recall; a damaged frame (truncated, trailing bytes, a content size missing or too large) is reported as
damage, never decompressed blindly."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path

import pytest
import zstandard
from journal_support import TABLE, forge
from test_journal_seal import build, verify_cli

from tablesense.daemon.journal import Journal, JournalDamaged, audit, load_key, open_for_recall
from tablesense.daemon.journal import blocks as bk
from tablesense.daemon.journal.seal import (
    _ARCHIVE_DEFLATE,
    _ZSTD_DICT,
    InputRow,
    MessageRow,
    _unit_plain,
    encode_row,
    pack_unit,
    unpack_unit,
)
from tablesense.daemon.journal.zdict import ZDICT


def pack_unit_deflate(blocks: list[tuple[int, bytes, list[bytes], list[tuple[str, bytes]]]]) -> bytes:
    """``pack_unit`` as versions before Zstandard wrote it: raw deflate (RFC 1951, level 6) with the
    same dictionary, behind format byte 1."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict=ZDICT)
    return bytes((_ARCHIVE_DEFLATE,)) + packer.compress(_unit_plain(blocks)) + packer.flush()


def _units(directory: Path) -> dict[int, bytes]:
    """Each archive unit's blob (its parts joined)."""
    conn = sqlite3.connect(directory / "journal.sqlite")
    try:
        units = [u for (u,) in conn.execute("SELECT DISTINCT unit FROM blocks WHERE unit != 0")]
        return {u: b"".join(bytes(p) for (p,) in conn.execute(
            "SELECT part FROM archive WHERE id BETWEEN ? AND ? ORDER BY id", bk.archive_keys(u)))
            for u in units}
    finally:
        conn.close()


def _sample_unit() -> list[tuple[int, bytes, list[bytes], list[tuple[str, bytes]]]]:
    """One block: an input and the settlement it emitted."""
    entry = encode_row(InputRow(1, "2026-12-02T00:00:00.000Z", "CardDrawn", b'{"seq":1}'))
    message = encode_row(MessageRow(1, 1, "bac-01-e-1-x", "settlements", None, False, 1, b'{"net":0}'))
    return [(1, b"\x00\x01", [entry], [("settlements", message)])]


def test_units_are_written_as_zstandard_frames(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build(tmp_path, shoes=(20, 3, 3), prune=True)
    units = _units(tmp_path)
    assert len(units) >= 1
    for blob in units.values():
        assert blob[0] == 2  # the format byte
        assert 0 < zstandard.frame_content_size(blob[1:]) <= 1 << 26
    code, out = verify_cli(tmp_path, capsys)
    assert code == 0, out


def test_units_archived_as_deflate_by_an_earlier_version_still_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build(tmp_path, shoes=(20, 3, 3), prune=True)
    with open_for_recall(tmp_path) as reader:
        before = reader.round("1-2")
    assert forge(tmp_path, lambda row: row, pack=pack_unit_deflate) == 0  # every unit rewritten, rows kept
    assert all(blob[0] == 1 for blob in _units(tmp_path).values())
    code, out = verify_cli(tmp_path, capsys)
    assert code == 0, out
    assert audit(tmp_path, load_key()).ok
    with open_for_recall(tmp_path) as reader:
        assert reader.round("1-2") == before
    with Journal(tmp_path, TABLE) as j:  # replay by seq reads the old units too
        assert len(j.messages_by_seq(1, j.last_seq)) == j.last_seq


def test_both_formats_give_back_the_same_rows() -> None:
    blocks = _sample_unit()
    assert unpack_unit(pack_unit(blocks), "u") == unpack_unit(pack_unit_deflate(blocks), "u")


def _frame(plain: bytes, *, content_size: bool = True) -> bytes:
    return bytes((2,)) + zstandard.ZstdCompressor(level=3, dict_data=_ZSTD_DICT,
                                                  write_content_size=content_size).compress(plain)


DAMAGE = {  # how the blob is damaged, and what the report says
    "truncated": (lambda good: good[:-5], "did not decompress full frame"),
    "trailing-bytes": (lambda good: good + b"\x00\x00", "unused data"),
    "bad-header": (lambda good: good[:1] + b"\x00" * 8 + good[9:], "content size"),
    "no-content-size": (lambda good: _frame(b"x" * 5000, content_size=False), "content size missing"),
    # checked from the frame header, before anything is allocated for it
    "content-size-too-large": (lambda good: _frame(bytes((1 << 26) + 1)), "or too large"),
    "deflate-truncated": (lambda good: pack_unit_deflate(_sample_unit())[:-3], "truncated"),
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_unit_is_reported_not_decompressed_blindly(damage: str) -> None:
    good = pack_unit(_sample_unit())
    make, says = DAMAGE[damage]
    with pytest.raises(JournalDamaged, match=f"unit 7: archive cannot be read: .*{says}"):
        unpack_unit(make(good), "unit 7")


def test_an_unknown_format_byte_is_damage() -> None:
    with pytest.raises(JournalDamaged, match="unknown archive format"):
        unpack_unit(b"\x03" + pack_unit(_sample_unit())[1:], "unit 7")
