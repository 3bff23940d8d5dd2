"""Adversarial review of the sealed journal: a person with file access but not the key plants SQL
schema objects in ``journal.sqlite``.

The rows, the state and the chain are sealed; the schema is not. SQLite runs a file's triggers inside the
writer's own transactions, so a trigger planted while the daemon is stopped changes what the daemon
journals afterwards: ``BEFORE INSERT ON outbox ... SELECT RAISE(IGNORE)`` silently drops the rows it
matches (the transaction commits, the daemon publishes what it believes it journaled: "journaled before
published" no longer holds, and nothing says so until the next start or ``verify``); an ``AFTER INSERT
ON pending`` trigger deleting the new row hides messages from the relay. Before this review neither
``tablesense verify`` nor the journal's open looked at anything but the tables and indexes being present.

Each test tampers the way such a person would (``sqlite3`` on the file, no key) and checks that
``tablesense verify`` (and, for the writer, ``Journal(...)`` and therefore ``run``) refuses the journal,
naming the foreign object.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from journal_support import TABLE, Traffic

from tablesense.daemon.app import App
from tablesense.daemon.cli import main
from tablesense.daemon.config import parse_config
from tablesense.daemon.journal import Journal, JournalDamaged
from tablesense.simulators.dealer import sim_config_toml

DROP_SETTLEMENTS = ("CREATE TRIGGER t_drop BEFORE INSERT ON outbox "
                    "WHEN instr(NEW.row, CAST('tablesense.settlement' AS BLOB)) > 0 "
                    "BEGIN SELECT RAISE(IGNORE); END")
HIDE_PENDING = ("CREATE TRIGGER t_hide AFTER INSERT ON pending "
                "BEGIN DELETE FROM pending WHERE seq = NEW.seq; END")
A_VIEW = "CREATE VIEW v_outbox AS SELECT seq FROM outbox"


def build(directory: Path, table: str = TABLE, rounds: int = 3) -> Path:
    """A genuine journal: a new shoe and ``rounds`` baccarat rounds, nothing delivered."""
    t = Traffic(table=table)
    with Journal(directory, table) as j:
        for inp, emits in t.new_shoe():
            j.append(inp, emits)
        for _ in range(rounds):
            for inp, emits in t.baccarat_round():
                j.append(inp, emits)
        return j.path


def tamper(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    try:
        for sql in statements:
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def redefine_pending(path: Path) -> None:
    """``PRAGMA writable_schema``: the ``pending`` table's stored definition changed (a column default
    added), which SQLite honours from the next connection on."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA writable_schema=ON")
        conn.execute("UPDATE sqlite_schema SET sql = replace(sql, 'topic TEXT', 'topic TEXT DEFAULT ''x''') "
                     "WHERE name = 'pending'")
        conn.commit()
    finally:
        conn.close()


def verify_cli(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    key = Path(os.environ["CREDENTIALS_DIRECTORY"]) / "journal-key"
    code = main(["verify", "--journal", str(directory), "--key", str(key)])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize(("sql", "named"), [
    (DROP_SETTLEMENTS, "trigger 't_drop'"),
    (HIDE_PENDING, "trigger 't_hide'"),
    (A_VIEW, "view 'v_outbox'"),
])
def test_verify_refuses_a_journal_with_a_foreign_schema_object(tmp_path: Path, sql: str, named: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``verify`` said "intact" (exit 0) with the trigger in the file, so a daily audit passed a
    journal that drops every settlement row the daemon writes after its next start."""
    build(tmp_path)
    code, out = verify_cli(tmp_path, capsys)
    assert code == 0, out
    tamper(tmp_path / "journal.sqlite", sql)
    code, out = verify_cli(tmp_path, capsys)
    assert code == 1, out
    assert named in out and "FAILED" in out


def test_verify_refuses_a_journal_whose_table_definition_was_changed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build(tmp_path)
    redefine_pending(tmp_path / "journal.sqlite")
    code, out = verify_cli(tmp_path, capsys)
    assert code == 1, out
    assert "table 'pending'" in out


@pytest.mark.parametrize("sql", [DROP_SETTLEMENTS, HIDE_PENDING])
def test_the_writer_refuses_a_journal_with_a_planted_trigger(tmp_path: Path, sql: str) -> None:
    """Before: the journal opened, and its next appends ran the trigger: a settlement row silently not
    written (published all the same), or a message never handed to the relay."""
    path = build(tmp_path)
    tamper(path, sql)
    with pytest.raises(JournalDamaged, match="trigger"):
        Journal(tmp_path, TABLE).close()


def test_run_refuses_to_settle_on_a_journal_with_a_planted_trigger(tmp_path: Path) -> None:
    urls = {"shoe": str(tmp_path / "s"), "pads": str(tmp_path / "p")}
    config = parse_config(sim_config_toml("baccarat", urls=urls, host="127.0.0.1", port=1,
                                          journal=tmp_path / "journal"))
    path = build(tmp_path / "journal", table=config.table)
    tamper(path, DROP_SETTLEMENTS)
    app = App(config)
    app.open()
    try:
        assert app.refusal is not None and "trigger 't_drop'" in app.refusal
        assert app.journal is None and not app.links
    finally:
        if app.journal is not None:
            app.journal.close()


# ------------------------------------------------------------------------------------ rows beyond the head


def plant_row(path: Path, table: str) -> None:
    """Insert one unsealed row just after the sealed head (no key needed: the row is junk)."""
    conn = sqlite3.connect(path)
    try:
        if table == "log":
            top = conn.execute("SELECT max(id) FROM log").fetchone()[0]
            conn.execute("INSERT INTO log VALUES (?, x'00', x'0000')", (top + 1,))
        else:
            top = conn.execute("SELECT max(seq) FROM outbox").fetchone()[0]
            conn.execute("INSERT INTO outbox VALUES (?, x'00', x'0000')", (top + 1,))
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize(("table", "named"), [("log", "entry row(s) after the sealed head"),
                                               ("outbox", "outbox row(s) after the sealed head")])
def test_verify_refuses_rows_after_the_sealed_head(tmp_path: Path, table: str, named: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``verify`` said "intact" with an unsealed row after the head, while every append of the
    daemon collided with it (``UNIQUE constraint failed``) and failed as if the disk were full."""
    build(tmp_path)
    plant_row(tmp_path / "journal.sqlite", table)
    code, out = verify_cli(tmp_path, capsys)
    assert code == 1, out
    assert named in out


@pytest.mark.parametrize("table", ["log", "outbox"])
def test_run_refuses_a_journal_with_rows_after_the_sealed_head(tmp_path: Path, table: str) -> None:
    """Before: ``run`` opened the journal and then every input failed to be journaled ("journal failure,
    settling stopped": a disk problem, it said), at every start, for ever; now it is the documented
    JOURNAL_DAMAGED refusing mode, naming what is wrong."""
    urls = {"shoe": str(tmp_path / "s"), "pads": str(tmp_path / "p")}
    config = parse_config(sim_config_toml("baccarat", urls=urls, host="127.0.0.1", port=1,
                                          journal=tmp_path / "journal"))
    path = build(tmp_path / "journal", table=config.table)
    plant_row(path, table)
    app = App(config)
    app.open()
    try:
        assert app.refusal is not None and "after the sealed head" in app.refusal
        assert app.journal is None and not app.links
    finally:
        if app.journal is not None:
            app.journal.close()


@pytest.mark.parametrize("table", ["log", "outbox"])
def test_an_append_colliding_with_a_row_planted_while_open_is_damage_not_a_full_disk(
        tmp_path: Path, table: str) -> None:
    """A row planted after the sealed head while the journal is open (the open's check ran before):
    the next append collides with it (``UNIQUE constraint failed``). Before: that was
    :class:`JournalUnwritable` ("disk full, read-only, I/O error"), so the floor was sent to free space;
    now it is :class:`JournalDamaged`, naming the collision."""
    t = Traffic()
    with Journal(tmp_path, TABLE) as j:
        for inp, emits in t.new_shoe():
            j.append(inp, emits)
        plant_row(j.path, table)
        steps = t.baccarat_round()
        with pytest.raises(JournalDamaged, match="UNIQUE constraint failed"):
            for inp, emits in steps:
                j.append(inp, emits)
