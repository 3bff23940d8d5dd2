"""The floor database schema, as versioned migrations the floor command applies itself.

Each :class:`Migration` has a version (1, 2, ...), a name and its statements (the same SQL for
PostgreSQL and SQLite). :func:`migrate` applies, in one transaction each and in order, every migration
newer than the highest version recorded in ``schema_migrations``; on PostgreSQL under an advisory lock,
so two floor processes starting together do not both migrate. A database whose recorded version is
newer than this software knows is refused (:class:`SchemaTooNew`): an older floor must not write a
newer schema.

Tables (docs/floor.md lists every column):

* ``messages``: every table message stored, raw (``payload``), by ``msg_id`` (PRIMARY KEY: a repeated
  ``msg_id`` changes nothing) and ``(table_id, epoch, seq)`` (UNIQUE for ``seq > 0``: one message per
  place in a journal's sequence);
* ``tables``, ``shoes``, ``rounds`` (the floor record), ``wagers``, ``settlements``, ``alarms`` (the
  tables' alarms), ``commands`` (operator commands in the floor records);
* ``quarantine``: what failed its schema, with the reason;
* ``seq_tracks``, ``gaps``, ``replay_requests``, ``chain_marks``, ``floor_alarms``: the floor's own
  sequence audit (:mod:`.tracker`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from tablesense.daemon.floor.store import Database, Tx

__all__ = ["MIGRATIONS", "Migration", "SchemaTooNew", "current_version", "migrate"]


class SchemaTooNew(Exception):
    """The database was migrated by a newer tablesense than this one (one-line message)."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``version`` (consecutive from 1), ``name``, ``statements`` (run in order)."""

    version: int
    name: str
    statements: tuple[str, ...]


_V1 = (
    """CREATE TABLE messages (
        msg_id TEXT PRIMARY KEY,
        table_id TEXT NOT NULL,
        epoch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        schema_name TEXT NOT NULL,
        topic TEXT NOT NULL,
        ts TEXT NOT NULL,
        shoe BIGINT,
        round BIGINT,
        payload TEXT NOT NULL,
        payload_sha256 TEXT NOT NULL,
        received_at TEXT NOT NULL,
        via TEXT NOT NULL,
        consumer TEXT NOT NULL)""",
    "CREATE UNIQUE INDEX messages_table_seq ON messages (table_id, epoch, seq) WHERE seq > 0",
    "CREATE INDEX messages_table_ts ON messages (table_id, ts)",
    """CREATE TABLE tables (
        table_id TEXT PRIMARY KEY,
        first_seen TEXT NOT NULL,
        last_message_at TEXT,
        game TEXT,
        decks INTEGER,
        currency TEXT,
        minor_unit INTEGER,
        commission TEXT,
        paytables TEXT,
        info_msg_id TEXT,
        info_epoch TEXT,
        info_seq BIGINT,
        state TEXT,
        status_detail TEXT,
        status_received_at TEXT,
        instance TEXT,
        software TEXT,
        config_digest TEXT,
        epoch TEXT,
        status_last_seq BIGINT,
        chain_seq BIGINT,
        chain_head TEXT,
        shoe BIGINT,
        round BIGINT,
        phase TEXT,
        held BOOLEAN,
        round_epoch TEXT,
        round_seq BIGINT)""",
    """CREATE TABLE shoes (
        table_id TEXT NOT NULL,
        epoch TEXT NOT NULL,
        shoe BIGINT NOT NULL,
        first_ts TEXT NOT NULL,
        last_ts TEXT NOT NULL,
        PRIMARY KEY (table_id, epoch, shoe))""",
    """CREATE TABLE rounds (
        msg_id TEXT PRIMARY KEY REFERENCES messages (msg_id),
        table_id TEXT NOT NULL,
        epoch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        shoe BIGINT,
        round BIGINT,
        game TEXT NOT NULL,
        void BOOLEAN NOT NULL,
        ts TEXT NOT NULL,
        opened_ts TEXT,
        locked_ts TEXT,
        completed_ts TEXT,
        cards TEXT NOT NULL,
        burns TEXT NOT NULL,
        results TEXT NOT NULL,
        chain_seq BIGINT,
        chain_head TEXT)""",
    "CREATE INDEX rounds_table_round ON rounds (table_id, epoch, shoe, round)",
    "CREATE INDEX rounds_ts ON rounds (ts)",
    """CREATE TABLE wagers (
        round_msg_id TEXT NOT NULL REFERENCES rounds (msg_id),
        idx INTEGER NOT NULL,
        table_id TEXT NOT NULL,
        shoe BIGINT,
        round BIGINT,
        spot TEXT NOT NULL,
        seat TEXT NOT NULL,
        bet TEXT NOT NULL,
        hand TEXT,
        stake BIGINT NOT NULL,
        presence_only BOOLEAN NOT NULL,
        PRIMARY KEY (round_msg_id, idx))""",
    """CREATE TABLE settlements (
        msg_id TEXT PRIMARY KEY REFERENCES messages (msg_id),
        table_id TEXT NOT NULL,
        epoch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        shoe BIGINT,
        round BIGINT,
        ts TEXT NOT NULL,
        spot TEXT NOT NULL,
        seat TEXT NOT NULL,
        bet TEXT NOT NULL,
        hand TEXT,
        stake BIGINT NOT NULL,
        outcome TEXT NOT NULL,
        category TEXT NOT NULL,
        odds TEXT,
        net BIGINT NOT NULL,
        commission BIGINT NOT NULL,
        changed_after_lock BOOLEAN NOT NULL,
        game TEXT,
        paytable TEXT,
        house_edge TEXT)""",
    "CREATE INDEX settlements_ts ON settlements (ts)",
    "CREATE INDEX settlements_table_ts ON settlements (table_id, ts)",
    """CREATE TABLE alarms (
        msg_id TEXT PRIMARY KEY REFERENCES messages (msg_id),
        table_id TEXT NOT NULL,
        epoch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        shoe BIGINT,
        round BIGINT,
        ts TEXT NOT NULL,
        alarm_id TEXT NOT NULL,
        code TEXT NOT NULL,
        severity TEXT NOT NULL,
        text TEXT NOT NULL,
        state TEXT NOT NULL,
        held BOOLEAN NOT NULL,
        seat TEXT,
        spot TEXT,
        device TEXT)""",
    "CREATE INDEX alarms_table ON alarms (table_id, epoch, alarm_id, seq)",
    """CREATE TABLE commands (
        round_msg_id TEXT NOT NULL REFERENCES rounds (msg_id),
        idx INTEGER NOT NULL,
        table_id TEXT NOT NULL,
        shoe BIGINT,
        round BIGINT,
        ts TEXT NOT NULL,
        name TEXT NOT NULL,
        args TEXT NOT NULL,
        operator TEXT NOT NULL,
        ok BOOLEAN NOT NULL,
        reason TEXT NOT NULL,
        PRIMARY KEY (round_msg_id, idx))""",
    """CREATE TABLE quarantine (
        quarantine_id TEXT PRIMARY KEY,
        received_at TEXT NOT NULL,
        topic TEXT NOT NULL,
        table_id TEXT,
        msg_id TEXT,
        reason TEXT NOT NULL,
        payload TEXT NOT NULL,
        consumer TEXT NOT NULL)""",
    """CREATE TABLE seq_tracks (
        table_id TEXT NOT NULL,
        epoch TEXT NOT NULL,
        through_seq BIGINT NOT NULL,
        max_seq BIGINT NOT NULL,
        status_last_seq BIGINT NOT NULL,
        first_seen TEXT NOT NULL,
        last_progress_at TEXT NOT NULL,
        PRIMARY KEY (table_id, epoch))""",
    """CREATE TABLE gaps (
        table_id TEXT NOT NULL,
        epoch TEXT NOT NULL,
        from_seq BIGINT NOT NULL,
        to_seq BIGINT NOT NULL,
        state TEXT NOT NULL,
        first_seen TEXT NOT NULL,
        requests INTEGER NOT NULL,
        last_request_at TEXT,
        next_request_at TEXT NOT NULL,
        closed_at TEXT,
        detail TEXT NOT NULL,
        PRIMARY KEY (table_id, epoch, from_seq))""",
    """CREATE TABLE replay_requests (
        command_id TEXT PRIMARY KEY,
        table_id TEXT NOT NULL,
        epoch TEXT NOT NULL,
        from_seq BIGINT NOT NULL,
        to_seq BIGINT NOT NULL,
        sent_at TEXT NOT NULL,
        consumer TEXT NOT NULL,
        reply_ok BOOLEAN,
        reply_reason TEXT,
        replied_at TEXT)""",
    """CREATE TABLE chain_marks (
        table_id TEXT NOT NULL,
        epoch TEXT NOT NULL,
        chain_seq BIGINT NOT NULL,
        chain_head TEXT NOT NULL,
        source TEXT NOT NULL,
        source_ts TEXT NOT NULL,
        seen_at TEXT NOT NULL,
        PRIMARY KEY (table_id, epoch, chain_seq))""",
    """CREATE TABLE floor_alarms (
        alarm_key TEXT PRIMARY KEY,
        table_id TEXT NOT NULL,
        code TEXT NOT NULL,
        severity TEXT NOT NULL,
        text TEXT NOT NULL,
        state TEXT NOT NULL,
        raised_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        cleared_at TEXT)""",
    "CREATE INDEX floor_alarms_state ON floor_alarms (state, table_id)",
)

_V2: tuple[str, ...] = (
    # chain heads are compared between floor records only: a status's head moves with delivery marks
    "DELETE FROM chain_marks WHERE substr(source, 1, 7) = 'status:'",
)

_V3: tuple[str, ...] = (
    # a settlement takes the rules of the table info before it in its journal epoch
    "CREATE INDEX messages_table_info ON messages (table_id, epoch, seq) WHERE schema_name = "
    "'tablesense.table_info'",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "floor record, raw messages, quarantine, sequence audit", _V1),
    Migration(2, "chain marks from floor records only", _V2),
    Migration(3, "table infos by seq", _V3),
)
"""Every migration, in version order (append only: a released migration never changes)."""

_LOCK_KEY = 0x7461626C  # "tabl": the advisory lock of the floor's migrations


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def _recorded(tx: Tx) -> int:
    await tx.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                     "name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    rows = await tx.fetchall("SELECT MAX(version) FROM schema_migrations")
    return int(rows[0][0] or 0) if rows else 0


async def current_version(db: Database) -> int:
    """The highest migration version recorded in ``db`` (0 for an empty database)."""
    async with db.transaction() as tx:
        return await _recorded(tx)


async def migrate(db: Database, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Bring ``db`` to the newest schema; returns the versions applied now (empty when up to date).

    Raises:
        SchemaTooNew: the database records a version newer than ``migrations`` knows.
        DatabaseError: a statement failed (that migration is rolled back entirely).
    """
    applied: list[int] = []
    newest = migrations[-1].version if migrations else 0
    for m in migrations:
        async with db.transaction() as tx:
            if tx.dialect == "postgresql":
                await tx.execute("SELECT pg_advisory_xact_lock(?)", (_LOCK_KEY,))
            have = await _recorded(tx)
            if have > newest:
                raise SchemaTooNew(f"the floor database is at schema version {have}, newer than this "
                                   f"tablesense knows ({newest}): upgrade tablesense")
            if have >= m.version:
                continue
            for sql in m.statements:
                await tx.execute(sql)
            await tx.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                             (m.version, m.name, _now()))
            applied.append(m.version)
    if not migrations:
        async with db.transaction() as tx:
            have = await _recorded(tx)
            if have > newest:
                raise SchemaTooNew(f"the floor database is at schema version {have}, newer than this "
                                   f"tablesense knows ({newest}): upgrade tablesense")
    return applied
