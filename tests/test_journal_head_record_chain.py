"""The head recorded in ``journal.lock`` against a journal file that is further ahead
(docs/journal.md "Lost rows").

A file ahead of the record is normal: the record is written without an fsync, so after a crash it may lag
the durable journal. But a diverged copy of the same journal (a spare controller's cloned disk: same epoch
and key) copied over the table's file, ``journal.lock`` left in place, is ahead too. Before, the record
was compared only when the entry numbers were equal, so start-up and ``verify`` accepted the swap. Now
the file's chain must pass through the recorded head at the recorded entry and seq.
"""

from __future__ import annotations

import copy
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from journal_support import TABLE, Step, Traffic

from tablesense.daemon.journal import Journal, JournalDamaged, audit, load_key


def feed(journal: Journal, steps: list[Step]) -> None:
    for inp, emits in steps:
        journal.append(inp, emits)


def test_a_diverged_clone_swapped_in_under_the_lock_file_is_refused(tmp_path: Path) -> None:
    table, spare = tmp_path / "table", tmp_path / "spare"
    t = Traffic()
    with Journal(table, TABLE) as j:
        feed(j, t.new_shoe())
        for _ in range(3):
            feed(j, t.baccarat_round())
    shutil.copytree(table, spare)  # the cloned disk
    t_spare = copy.deepcopy(t)
    with Journal(table, TABLE) as j:
        for _ in range(3):
            feed(j, t.baccarat_round(cards=("QH", "QS", "3D", "8C")))
    with Journal(spare, TABLE) as j:  # the clone deals on, other cards, further
        for _ in range(6):
            feed(j, t_spare.baccarat_round(cards=("7H", "7S", "7D", "2C"), stake=99999))
    shutil.copy(spare / "journal.sqlite", table / "journal.sqlite")  # the table's journal.lock kept
    with pytest.raises(JournalDamaged, match="diverged copy"):
        Journal(table, TABLE).close()
    report = audit(table, load_key())
    assert not report.ok
    assert "diverged copy" in (report.failure or "")


@pytest.mark.parametrize("prune", [False, True])
def test_a_lagging_head_record_on_the_files_own_chain_is_accepted(tmp_path: Path, prune: bool) -> None:
    """The record lags the file (a crash before the page cache reached the disk): the recorded head is on
    the file's chain, in an archived block when maintenance ran meanwhile."""
    t = Traffic()
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:
        feed(j, t.new_shoe())
        for _ in range(3):
            feed(j, t.baccarat_round())
        lagging = (tmp_path / "journal.lock").read_bytes()
        for _ in range(40 if prune else 2):
            feed(j, t.baccarat_round())
        if prune:
            for row in j.pending(1000):
                j.mark_delivered(row.row_id)
            j.prune(now=datetime(2026, 11, 29, 15, tzinfo=UTC))
        last = j.last_seq
    (tmp_path / "journal.lock").write_bytes(lagging)
    assert audit(tmp_path, load_key()).ok
    with Journal(tmp_path, TABLE) as j:
        assert j.last_seq == last
