"""Journal tampering detected at open (docs/journal.md "Integrity"): a row deleted from the
middle of ``inputs`` or ``outbox``, a dropped table, an altered counter in ``meta`` -- all of which pass
SQLite's own integrity check and the per-row CRCs -- make :class:`JournalDamaged`, so ``run`` goes to its
JOURNAL_DAMAGED refusing mode. Rows deleted by retention (:meth:`Journal.prune`) are not damage."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from journal_support import TABLE, Step, Traffic

from tablesense.daemon.app import App
from tablesense.daemon.config import parse_config
from tablesense.daemon.journal import Journal, JournalDamaged
from tablesense.simulators.dealer import sim_config_toml


def feed(journal: Journal, steps: list[Step]) -> None:
    for inp, emits in steps:
        journal.append(inp, emits)


def deliver_all(journal: Journal) -> None:
    while rows := journal.pending(limit=50):
        for row in rows:
            journal.mark_delivered(row.row_id)


def journal_with_rounds(directory: Path, rounds: int = 5, table: str = TABLE) -> Path:
    t = Traffic(table=table)
    with Journal(directory, table) as j:
        feed(j, t.new_shoe())
        for _ in range(rounds):
            feed(j, t.baccarat_round())
        return j.path


def tamper(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    try:
        for sql in statements:
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def test_untouched_journal_reopens(tmp_path: Path) -> None:
    journal_with_rounds(tmp_path)
    with Journal(tmp_path, TABLE) as j:
        assert j.last_seq > 10


@pytest.mark.parametrize(("sql", "message"), [
    ("DELETE FROM inputs WHERE id = (SELECT min(id) + 5 FROM inputs)", "1 input row(s) missing"),
    ("DELETE FROM outbox WHERE row_id = (SELECT min(row_id) + 7 FROM outbox)", "1 outbox row(s) missing"),
    ("DELETE FROM outbox WHERE row_id = (SELECT max(row_id) FROM outbox)", "outbox row(s) missing"),
    ("UPDATE meta SET last_seq = 9223372036854775807", "outbox row(s) missing"),
    ("UPDATE meta SET last_input = last_input + 1", "input row(s) missing"),
    ("DROP TABLE devices", "devices missing from the schema"),
    ("DROP INDEX outbox_pending", "outbox_pending missing from the schema"),
    ("UPDATE prune_marks SET outbox_below = 0", "prune marks missing or inconsistent"),
])
def test_tampering_is_damage(tmp_path: Path, sql: str, message: str) -> None:
    path = journal_with_rounds(tmp_path)
    tamper(path, sql)
    with pytest.raises(JournalDamaged, match=re.escape(message)):
        Journal(tmp_path, TABLE)


def test_pruned_journal_reopens_but_a_later_hole_is_damage(tmp_path: Path) -> None:
    t = Traffic()
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:
        for rounds in (15, 3, 12):
            feed(j, t.new_shoe())
            for _ in range(rounds):
                feed(j, t.baccarat_round())
        deliver_all(j)
        assert j.prune() > 0  # shoe 1 goes: holes below the prune marks
        path = j.path
    conn = sqlite3.connect(path)
    below_out, below_in = conn.execute("SELECT outbox_below, inputs_below FROM prune_marks").fetchone()
    assert below_out > 1 and below_in > 1
    conn.close()
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:  # legitimate holes: reopens clean
        feed(j, t.baccarat_round())
    tamper(path, f"DELETE FROM outbox WHERE row_id = {below_out + 3}")
    with pytest.raises(JournalDamaged, match="outbox row"):
        Journal(tmp_path, TABLE, retention_rounds=10)


def test_journal_from_before_the_marks_still_opens(tmp_path: Path) -> None:
    """A journal written before ``prune_marks`` existed opens clean and gets marks above its rows, so
    a row deleted after that is detected."""
    path = journal_with_rounds(tmp_path)
    tamper(path, "DROP TABLE prune_marks")
    with Journal(tmp_path, TABLE) as j:
        feed(j, Traffic().baccarat_round())
        top = j.last_seq
    tamper(path, f"DELETE FROM outbox WHERE row_id = {top - 1}")
    with pytest.raises(JournalDamaged, match="outbox row"):
        Journal(tmp_path, TABLE)


def test_app_with_a_dropped_table_runs_refusing(tmp_path: Path) -> None:
    """``DROP TABLE devices`` made ``run`` crash with a traceback; now it is the refusing mode."""
    urls = {"shoe": str(tmp_path / "s"), "pads": str(tmp_path / "p")}
    config = parse_config(sim_config_toml("baccarat", urls=urls, host="127.0.0.1", port=1,
                                          journal=tmp_path / "journal"))
    path = journal_with_rounds(tmp_path / "journal", table=config.table)
    tamper(path, "DROP TABLE devices")
    app = App(config)
    app.open()
    assert app.refusal is not None and "devices missing from the schema" in app.refusal
    assert app.journal is None and not app.links
