"""The journal's WAL deleted under a running daemon, and ``msg_id`` reuse.

Before: deleting ``journal.sqlite-wal`` mid-run went unnoticed; after a restart the rows committed since
the last checkpoint were gone, ``seq`` started again below them, and 48 ``msg_id`` values
(``{table}-{epoch}-{seq}``) were reused for different content, which consumers that de-duplicate by
``msg_id`` drop. Now: the next write notices (the committed rows are saved into the journal file and the
journal reopened; that write fails loudly), a restart after the rows were really lost refuses (the head
recorded in ``journal.lock`` is ahead of the file), and every ``msg_id`` carries a random part drawn
when it was journaled, so no ``msg_id`` ever names two contents, whatever happens to the files.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from journal_support import TABLE, Step, Traffic, sealed_rows

from tablesense.daemon.journal import Journal, JournalDamaged, audit, load_key
from tablesense.daemon.journal.seal import MessageRow

ROOT = Path(__file__).resolve().parent.parent


def feed(journal: Journal, steps: list[Step]) -> list[Any]:
    rows = []
    for inp, emits in steps:
        rows += journal.append(inp, emits)
    return rows


def test_a_wal_deleted_mid_run_is_noticed_at_the_next_write_and_nothing_is_lost(tmp_path: Path) -> None:
    t = Traffic()
    with Journal(tmp_path, TABLE) as j:
        written = feed(j, t.new_shoe())
        for _ in range(3):
            written += feed(j, t.baccarat_round())
        wal = tmp_path / "journal.sqlite-wal"
        assert wal.stat().st_size > 0
        wal.unlink()
        nxt = t.baccarat_round()
        with pytest.raises(JournalDamaged, match=r"WAL file was deleted or replaced.*saved"):
            j.append(*nxt[0])
        assert j.last_seq == written[-1].seq  # the input that found it was not journaled
        written += feed(j, nxt)  # the journal was reopened on a new WAL: it goes on
    with Journal(tmp_path, TABLE) as j:
        assert j.last_seq == written[-1].seq
    held = [r for r in sealed_rows(tmp_path) if isinstance(r, MessageRow)]
    assert [(r.seq, r.msg_id) for r in held] == [(r.seq, r.msg_id) for r in written]
    assert audit(tmp_path, load_key()).ok


WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    from journal_support import Traffic
    from tablesense.daemon.journal import Journal

    t = Traffic(start=Traffic().start.replace(hour=13))
    j = Journal(sys.argv[1], "bac-7")
    for _ in range(4):
        for inp, emits in t.baccarat_round():
            for row in j.append(inp, emits):
                print(row.seq, row.msg_id, flush=True)
    print("done", flush=True)
    sys.stdin.readline()  # killed here, its last rows only in the WAL
""")


def test_a_wal_deleted_before_a_crash_is_refused_at_restart_and_no_msg_id_is_reused(tmp_path: Path) -> None:
    """The daemon killed after its WAL was deleted: the rows only the WAL held are lost. The restart
    refuses (``run`` goes to its refusing mode) instead of journaling new messages under the lost ones'
    ``seq``; and had the journal gone on (its lock file removed too), the new messages' ``msg_id`` still
    differ from the lost ones'."""
    t = Traffic()
    with Journal(tmp_path, TABLE) as j:  # an earlier run, checkpointed at its clean close
        kept = feed(j, t.new_shoe())
        for _ in range(2):
            kept += feed(j, t.baccarat_round())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(ROOT / "tests")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None
        lost: dict[int, str] = {}
        for line in child.stdout:
            if line.strip() == "done":
                break
            seq, msg_id = line.split()
            lost[int(seq)] = msg_id
        (tmp_path / "journal.sqlite-wal").unlink()
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        child.kill()
        if child.stdout is not None:
            child.stdout.close()
        if child.stdin is not None:
            child.stdin.close()
    assert len(lost) > 20 and min(lost) == kept[-1].seq + 1
    with pytest.raises(JournalDamaged, match="behind the last head its writer recorded"):
        Journal(tmp_path, TABLE)
    assert not audit(tmp_path, load_key()).ok
    # Had someone removed journal.lock as well, the journal would go on from the older state: seq is
    # reused (the floor sees the chain head go back), msg_id never is.
    (tmp_path / "journal.lock").unlink()
    with Journal(tmp_path, TABLE) as j:
        assert j.last_seq == kept[-1].seq
        again = feed(j, Traffic(start=t.start.replace(hour=14)).baccarat_round() * 3)
    reused = [r for r in again if r.seq in lost]
    assert len(reused) > 20
    assert all(r.msg_id != lost[r.seq] for r in reused)
    assert {r.msg_id for r in again}.isdisjoint(lost.values())


def test_a_journal_restored_from_an_older_copy_never_reuses_a_msg_id(tmp_path: Path) -> None:
    """The whole directory restored from a backup (lock file included: nothing inside tells): the rows
    journaled after the backup are replaced by new ones under the same ``seq``, each with a new
    ``msg_id``."""
    t = Traffic()
    with Journal(tmp_path / "j", TABLE) as j:
        feed(j, t.new_shoe())
        feed(j, t.baccarat_round())
    shutil.copytree(tmp_path / "j", tmp_path / "backup")
    with Journal(tmp_path / "j", TABLE) as j:
        later = feed(j, t.baccarat_round() + t.baccarat_round())
    shutil.rmtree(tmp_path / "j")
    shutil.copytree(tmp_path / "backup", tmp_path / "j")
    with Journal(tmp_path / "j", TABLE) as j:
        again = feed(j, t.baccarat_round() + t.baccarat_round())
    assert [r.seq for r in again] == [r.seq for r in later]
    assert all(a.msg_id != b.msg_id for a, b in zip(again, later, strict=True))


def test_a_deleted_journal_file_is_not_silently_replaced(tmp_path: Path) -> None:
    """The journal file deleted (its lock file left): the next open refuses instead of starting an empty
    journal; moving the lock file aside too is the deliberate way to start a new one (new epoch)."""
    with Journal(tmp_path, TABLE) as j:
        feed(j, Traffic().new_shoe())
        epoch = j.epoch
    for name in ("journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    recorded = f"holds no journal, but journal.lock records journal epoch {epoch}"
    with pytest.raises(JournalDamaged, match=recorded):
        Journal(tmp_path, TABLE)
    assert not (tmp_path / "journal.sqlite").exists()  # nothing created
    (tmp_path / "journal.lock").rename(tmp_path / "journal.lock.old")
    with Journal(tmp_path, TABLE) as j:
        assert j.epoch != epoch and j.last_seq == 0
