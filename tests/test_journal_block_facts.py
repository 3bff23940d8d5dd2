"""The columns of ``blocks`` the chain does not cover -- the round a block completed (``shoe``, ``round``)
and its times (``started_ts``, ``ended_ts``) -- are checked against the block's verified rows
(docs/journal.md "Blocks"): a change made with file access but without the key is damage to ``verify``, to
start-up for the blocks it checks, to recall, and to retention before it deletes a block chosen on their
word (retention by age reads ``ended_ts``, by round count ``round``)."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from journal_support import TABLE, Step, Traffic

from tablesense.daemon.journal import Journal, JournalDamaged
from tablesense.daemon.journal.audit import audit
from tablesense.daemon.journal.key import load_key
from tablesense.daemon.journal.recall import open_for_recall

NOW = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)
"""The day the :class:`Traffic` clock deals on."""


def feed(journal: Journal, steps: list[Step]) -> None:
    for inp, emits in steps:
        journal.append(inp, emits)


def three_shoes(directory: Path, long_quiet: bool = False, **retention: object) -> None:
    """Three shoes dealt today (40, 40 and 5 rounds), every message delivered, maintenance run; with
    ``long_quiet`` a quiet spell before the first so long that it closes a block by size (no round)."""
    t = Traffic()
    with Journal(directory, TABLE, **retention) as j:  # type: ignore[arg-type]
        for shoe in range(3):
            feed(j, t.new_shoe())
            feed(j, t.quiet(600 if long_quiet and shoe == 0 else 128))
            for _ in range(40 if shoe < 2 else 5):
                feed(j, t.baccarat_round())
        while rows := j.pending(500):
            for row in rows:
                j.mark_delivered(row.row_id)
        j.prune(now=NOW)


def tamper(path: Path, sql: str) -> int:
    conn = sqlite3.connect(path)
    try:
        changed = conn.execute(sql).rowcount
        conn.commit()
        return changed
    finally:
        conn.close()


def held_rounds(directory: Path) -> list[str]:
    with open_for_recall(directory) as reader:
        return [r.round_id for r in reader.rounds(200)]


def test_retention_does_not_delete_rounds_on_the_word_of_an_altered_ended_ts(tmp_path: Path) -> None:
    three_shoes(tmp_path, retention_rounds=10, retention_days=365)
    assert len(held_rounds(tmp_path)) >= 80 and audit(tmp_path, load_key()).ok
    conn = sqlite3.connect(tmp_path / "journal.sqlite")
    try:
        blocks = conn.execute("SELECT count(*) FROM blocks").fetchone()[0]
    finally:
        conn.close()
    # shoe 1, dealt today, made to look a quarter of a century old
    assert tamper(tmp_path / "journal.sqlite",
                  "UPDATE blocks SET ended_ts = '2000-01-01T00:00:00.000Z' WHERE shoe = 1") >= 40
    report = audit(tmp_path, load_key())
    assert not report.ok and "altered without the key" in (report.failure or "")
    with (Journal(tmp_path, TABLE, retention_rounds=10, retention_days=365) as j,
          pytest.raises(JournalDamaged, match="altered without the key")):
        j.prune(now=NOW)
    conn = sqlite3.connect(tmp_path / "journal.sqlite")  # nothing was deleted
    try:
        assert conn.execute("SELECT count(*) FROM blocks").fetchone()[0] == blocks
    finally:
        conn.close()


@pytest.mark.parametrize("sql", [
    "UPDATE blocks SET ended_ts = '2000-01-01T00:00:00.000Z' WHERE id = (SELECT min(id) FROM blocks)",
    "UPDATE blocks SET started_ts = '2000-01-01T00:00:00.000Z' WHERE id = (SELECT min(id) FROM blocks)",
    "UPDATE blocks SET started_ts = '2000-01-01T00:00:00.000Z' "
    "WHERE id = (SELECT min(id) FROM blocks WHERE id > 1)",
    "UPDATE blocks SET round = round + 1 WHERE id = (SELECT min(id) FROM blocks WHERE round IS NOT NULL)",
    "UPDATE blocks SET shoe = shoe + 1 WHERE id = (SELECT min(id) FROM blocks WHERE round IS NOT NULL)",
    "UPDATE blocks SET shoe = NULL, round = NULL "
    "WHERE id = (SELECT min(id) FROM blocks WHERE round IS NOT NULL)",
    "UPDATE blocks SET shoe = 1, round = 99 WHERE id = (SELECT min(id) FROM blocks WHERE round IS NULL)",
])
def test_verify_finds_altered_block_facts(tmp_path: Path, sql: str) -> None:
    three_shoes(tmp_path, long_quiet=True)
    assert audit(tmp_path, load_key()).ok
    assert tamper(tmp_path / "journal.sqlite", sql) == 1
    report = audit(tmp_path, load_key())
    assert not report.ok
    assert "altered without the key" in (report.failure or "")


@pytest.mark.parametrize("column", ["ended_ts", "started_ts", "round"])
def test_start_up_finds_altered_facts_of_the_blocks_it_checks(tmp_path: Path, column: str) -> None:
    three_shoes(tmp_path)
    value = "round + 1" if column == "round" else "'2000-01-01T00:00:00.000Z'"
    assert tamper(tmp_path / "journal.sqlite", f"UPDATE blocks SET {column} = {value} "
                  "WHERE id = (SELECT max(id) FROM blocks WHERE round IS NOT NULL)") == 1
    with pytest.raises(JournalDamaged, match="altered without the key"):
        Journal(tmp_path, TABLE).close()


def test_recall_of_a_round_whose_block_was_relabelled_is_damage(tmp_path: Path) -> None:
    three_shoes(tmp_path)
    assert "2-7" in held_rounds(tmp_path)
    # the block of round 2-7 made to claim round 2-8 (recall --round reads the block its label names)
    tamper(tmp_path / "journal.sqlite", "UPDATE blocks SET round = 99 WHERE shoe = 2 AND round = 8")
    assert tamper(tmp_path / "journal.sqlite",
                  "UPDATE blocks SET round = 8 WHERE shoe = 2 AND round = 7") == 1
    with open_for_recall(tmp_path) as reader, pytest.raises(JournalDamaged, match="altered without the key"):
        reader.round("2-8")


def test_honest_retention_by_age_still_deletes(tmp_path: Path) -> None:
    three_shoes(tmp_path, retention_rounds=10, retention_days=1)
    before = held_rounds(tmp_path)
    with Journal(tmp_path, TABLE, retention_rounds=10, retention_days=1) as j:
        assert j.prune(now=datetime(2026, 12, 5, tzinfo=UTC)) > 0
    after = held_rounds(tmp_path)
    assert len(after) < len(before)
    assert audit(tmp_path, load_key()).ok


def test_retention_by_round_count_does_not_count_a_block_relabelled_as_a_round(tmp_path: Path) -> None:
    """Retention keeps the latest ``retention_rounds`` blocks labelled with a round: a block closed by
    size (a long quiet spell) labelled as a round, older than the blocks start-up checks, would make it
    keep one real round fewer (here: one archive unit, 16 rounds, more deleted)."""
    t = Traffic()
    honest, forged = tmp_path / "honest", tmp_path / "forged"
    with Journal(honest, TABLE, retention_rounds=40) as j:
        for shoe in range(4):
            feed(j, t.new_shoe())
            feed(j, t.quiet(1600 if shoe == 1 else 128))  # shoe 2 opens with blocks closed by size
            for _ in range(57 if shoe == 0 else 10):
                feed(j, t.baccarat_round())
        while rows := j.pending(500):
            for row in rows:
                j.mark_delivered(row.row_id)
        j.flush_marks()
    shutil.copytree(honest, forged)
    assert tamper(forged / "journal.sqlite", "UPDATE blocks SET shoe = 2, round = 0 WHERE id = "
                  "(SELECT max(id) FROM blocks WHERE round IS NULL AND id < (SELECT min(id) FROM blocks "
                  "WHERE shoe = 2 AND round IS NOT NULL))") == 1
    with Journal(honest, TABLE, retention_rounds=40) as j:
        assert j.prune(now=NOW) > 0  # the honest journal: rounds beyond the latest 40 go
    kept = len(held_rounds(honest))
    assert kept >= 40
    with (Journal(forged, TABLE, retention_rounds=40) as j,  # start-up does not reach that block
          pytest.raises(JournalDamaged, match="altered without the key")):
        j.prune(now=NOW)
    assert not audit(forged, load_key()).ok
