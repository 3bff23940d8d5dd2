"""Journal tampering with its structure detected at open (docs/journal.md "Start-up"): a row deleted from
the middle or the end, a dropped table or index, an altered state record, a block's links or metadata
changed -- each makes :class:`JournalDamaged`, so ``run`` goes to its JOURNAL_DAMAGED refusing mode. Blocks
deleted by retention (:meth:`Journal.prune`, sealed as prune entries) are not damage. The forgeries of
row contents are in tests/test_journal_seal.py."""

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
    ("DELETE FROM log WHERE id = (SELECT min(id) + 5 FROM log)", "entry row(s) 6 missing"),
    ("DELETE FROM outbox WHERE seq = (SELECT min(seq) + 7 FROM outbox)", "outbox row(s) seq 8 missing"),
    ("DELETE FROM outbox WHERE seq = (SELECT max(seq) FROM outbox)", "outbox row(s) seq"),
    ("DELETE FROM log WHERE id = (SELECT max(id) FROM log)", "entry row(s)"),
    ("UPDATE state SET data = data || x'00'", "state record"),
    ("UPDATE meta SET table_id = 'bac-8'", "state record"),
    ("UPDATE meta SET key_id = '0000000000000000'", "sealed with another key"),
    ("DROP TABLE pending", "pending missing from the schema"),
    ("DROP INDEX blocks_seq", "blocks_seq missing from the schema"),
    ("DELETE FROM blocks WHERE id = (SELECT max(id) FROM blocks)", "does not follow"),
    ("UPDATE blocks SET link_after = zeroblob(32) WHERE id = (SELECT max(id) FROM blocks)",
     "its rows do not end at the block's sealed link"),
    ("UPDATE blocks SET last_entry = last_entry - 1 WHERE id = (SELECT max(id) FROM blocks)",
     "outside the block"),
    ("UPDATE blocks SET link_before = link_after WHERE id = (SELECT max(id) FROM blocks)", "does not follow"),
    ("UPDATE log SET hint = x'0000' WHERE id = 3", None),  # a hint only locates a failure: not damage alone
])
def test_tampering_is_damage(tmp_path: Path, sql: str, message: str | None) -> None:
    path = journal_with_rounds(tmp_path)
    tamper(path, sql)
    if message is None:
        Journal(tmp_path, TABLE).close()
        return
    with pytest.raises(JournalDamaged, match=re.escape(message)):
        Journal(tmp_path, TABLE)


def test_pruned_journal_reopens_but_a_later_hole_is_damage(tmp_path: Path) -> None:
    t = Traffic()
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:
        for rounds in (40, 3, 12):
            feed(j, t.new_shoe())
            feed(j, t.quiet())  # heartbeats: the devices' frames before the replay are not needed
            for _ in range(rounds):
                feed(j, t.baccarat_round())
        deliver_all(j)
        assert j.prune() > 0  # whole units of shoe 1 go: a hole below the sealed base
        path = j.path
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:  # legitimate holes: reopens clean
        feed(j, t.baccarat_round())
        top = j.last_seq
    tamper(path, f"DELETE FROM outbox WHERE seq = {top - 3}")
    with pytest.raises(JournalDamaged, match="outbox row"):
        Journal(tmp_path, TABLE, retention_rounds=10)


def test_unsealed_journal_of_an_older_tablesense_is_refused_with_the_way_out(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "journal.sqlite")
    conn.execute("CREATE TABLE meta (id INTEGER PRIMARY KEY)")
    conn.execute("PRAGMA user_version=1")
    conn.close()
    with pytest.raises(JournalDamaged, match=r"schema version 1;.*unsealed.*move it aside"):
        Journal(tmp_path, TABLE)


def test_app_with_a_dropped_table_runs_refusing(tmp_path: Path) -> None:
    """``DROP TABLE`` made ``run`` crash with a traceback; now it is the refusing mode."""
    urls = {"shoe": str(tmp_path / "s"), "pads": str(tmp_path / "p")}
    config = parse_config(sim_config_toml("baccarat", urls=urls, host="127.0.0.1", port=1,
                                          journal=tmp_path / "journal"))
    path = journal_with_rounds(tmp_path / "journal", table=config.table)
    tamper(path, "DROP TABLE pending")
    app = App(config)
    app.open()
    assert app.refusal is not None and "pending missing from the schema" in app.refusal
    assert app.journal is None and not app.links
