"""The journal's WAL truncated in place under a running writer (docs/journal.md "Lost rows").

Truncation keeps the file (same device and inode), so the check for a deleted or replaced WAL cannot see
it. Before: every later append succeeded (the daemon would acknowledge the frames) into a WAL SQLite can
no longer read, and closing the journal checkpointed the hole into the journal file, which was then
malformed, rounds checkpointed long before included. Now the next write raises
:class:`JournalDamaged` (and every one after it), and closing keeps the damaged WAL out of the file: the
rows checkpointed before are intact, and the next start refuses because rows were lost.
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from journal_support import TABLE, Step, Traffic, sealed_rows

from tablesense.daemon.journal import Journal, JournalDamaged, audit, load_key
from tablesense.daemon.journal.seal import MessageRow


def feed(journal: Journal, steps: list[Step]) -> int:
    for inp, emits in steps:
        journal.append(inp, emits)
    return journal.last_seq


def truncate_to_nothing(wal: Path) -> None:
    os.truncate(wal, 0)


def truncate_then_overwrite(wal: Path) -> None:
    """Truncated, then written past the hole (as SQLite's next frames would be): no longer smaller."""
    size = wal.stat().st_size
    os.truncate(wal, 0)
    os.truncate(wal, size + 4096)


@pytest.mark.parametrize("damage", [truncate_to_nothing, truncate_then_overwrite])
def test_a_wal_truncated_mid_run_is_refused_at_the_next_write_and_not_checkpointed(
        tmp_path: Path, damage: object) -> None:
    t = Traffic()
    j = Journal(tmp_path, TABLE)
    try:
        feed(j, t.new_shoe())
        for _ in range(5):
            checkpointed = feed(j, t.baccarat_round())
        j.checkpoint()  # these rounds are in the journal file now
        for _ in range(3):
            last = feed(j, t.baccarat_round())
        wal = tmp_path / "journal.sqlite-wal"
        assert wal.stat().st_size > 0 and last > checkpointed
        damage(wal)  # type: ignore[operator]
        nxt = t.baccarat_round()
        with pytest.raises(JournalDamaged, match="WAL file was truncated"):
            j.append(*nxt[0])
        assert j.last_seq == last  # not journaled, so never acknowledged
        with pytest.raises(JournalDamaged, match="WAL file was truncated"):
            j.append(*nxt[1])  # nor anything after it
        with pytest.raises(JournalDamaged, match="WAL file was truncated"):
            j.prune(now=datetime(2026, 11, 29, 15, tzinfo=UTC))  # maintenance writes neither
    finally:
        j.close()
    # the rows lost with the WAL are lost: the next start says so instead of reusing their seq
    with pytest.raises(JournalDamaged, match="behind the last head"):
        Journal(tmp_path, TABLE).close()
    # but the journal file was not damaged by closing: the checkpointed rounds are intact
    report = audit(tmp_path, load_key())
    assert "malformed" not in (report.failure or "") and "behind the last head" in (report.failure or "")
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(tmp_path / "journal.sqlite", copy / "journal.sqlite")  # without journal.lock's record
    report = audit(copy, load_key())
    assert report.ok, report.failure
    assert report.chain_seq == checkpointed
    assert [r.seq for r in sealed_rows(copy) if isinstance(r, MessageRow)] == list(range(1, checkpointed + 1))


def test_an_untouched_wal_through_appends_maintenance_and_checkpoints_raises_nothing(tmp_path: Path) -> None:
    t = Traffic()
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:
        feed(j, t.new_shoe())
        for n in range(60):
            feed(j, t.baccarat_round())
            if n % 10 == 9:
                for row in j.pending(1000):
                    j.mark_delivered(row.row_id)
                j.prune(now=datetime(2026, 11, 29, 15, tzinfo=UTC))
        last = j.last_seq
    with Journal(tmp_path, TABLE) as j:
        assert j.last_seq == last
    assert audit(tmp_path, load_key()).ok
