"""The floor database: PostgreSQL through psycopg 3 (async) in production, SQLite for the demo.

The floor's SQL is written once for both: ``?`` placeholders (turned into psycopg's ``%s`` for
PostgreSQL), ``INSERT ... ON CONFLICT``, ``TEXT``/``BIGINT``/``BOOLEAN`` columns, timestamps as ISO 8601
UTC text (``2026-12-01T10:00:00.000Z``: their text order is their time order), no server-side functions.

:func:`open_database` takes ``postgresql://...`` (libpq connection URI) or ``sqlite:///path`` / a plain
file path. A :class:`Database` holds one connection; :meth:`Database.transaction` gives a :class:`Tx`
(``execute``, ``fetchall``, ``savepoint``) that commits when the block ends and rolls back when it
raises. One transaction at a time per :class:`Database` (an asyncio lock); use another
:class:`Database` for concurrent readers (the floor page).

Errors: :class:`DatabaseUnavailable` (the server is gone or refused: retry later, nothing was committed),
:class:`ConstraintViolation` (a UNIQUE/NOT NULL/CHECK constraint; inside a savepoint only that savepoint
is rolled back), :class:`BadValue` (a value the database cannot hold: an integer beyond 64 bits, a NUL in
PostgreSQL text, a key too large for its index; the statement's fault, never the server's: retrying it
fails again), :class:`DatabaseError` (their base: anything else the database raised).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "BadValue",
    "ConstraintViolation",
    "Database",
    "DatabaseError",
    "DatabaseUnavailable",
    "Tx",
    "open_database",
    "redact_url",
]

Params = Sequence[Any]


class DatabaseError(Exception):
    """The database refused or failed a statement (one-line message)."""


class DatabaseUnavailable(DatabaseError):
    """No connection to the database (refused, lost, shut down): nothing of the transaction committed."""


class ConstraintViolation(DatabaseError):
    """A statement broke a constraint (e.g. a UNIQUE index)."""


class BadValue(DatabaseError):
    """A statement's value cannot be stored (out of range, a NUL in PostgreSQL text, too large for an
    index): the same statement fails again whenever it is retried."""


def redact_url(url: str) -> str:
    """``url`` without a password (for logs and error lines)."""
    if "://" not in url or "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url


class Tx(Protocol):
    """An open transaction."""

    dialect: str

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        ...

    async def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Run one query; returns its rows."""
        ...

    def savepoint(self) -> contextlib.AbstractAsyncContextManager[None]:
        """A nested block: an exception rolls back only what ran inside it (and is re-raised)."""
        ...


class Database(abc.ABC):
    """One connection to the floor database (see the module docstring). Create with
    :func:`open_database`; ``dialect`` is ``"postgresql"`` or ``"sqlite"``; the two subclasses implement
    the abstract methods."""

    dialect: str = ""

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = asyncio.Lock()

    @abc.abstractmethod
    async def connect(self) -> None:
        """Open the connection now (raises :class:`DatabaseUnavailable`)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the connection (idempotent)."""

    @abc.abstractmethod
    def transaction(self) -> contextlib.AbstractAsyncContextManager[Tx]:
        """``async with db.transaction() as tx:`` commits at the end, rolls back on an exception."""

    async def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """One read-only query in a transaction of its own."""
        async with self.transaction() as tx:
            return await tx.fetchall(sql, params)


# --------------------------------------------------------------------------------------------- PostgreSQL


class _PgTx:
    dialect = "postgresql"

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Params = ()) -> int:
        async with _pg_errors():
            cur = await self._conn.execute(sql.replace("?", "%s"), tuple(params))
            return int(cur.rowcount)

    async def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        async with _pg_errors():
            cur = await self._conn.execute(sql.replace("?", "%s"), tuple(params))
            rows: list[tuple[Any, ...]] = await cur.fetchall()
            return rows

    @contextlib.asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        async with _pg_errors(), self._conn.transaction():  # nested: a SAVEPOINT
            yield


@contextlib.asynccontextmanager
async def _pg_errors() -> AsyncIterator[None]:
    import psycopg

    try:
        yield
    except psycopg.errors.IntegrityError as exc:
        raise ConstraintViolation(_one_line(exc)) from exc
    except (psycopg.DataError, psycopg.errors.ProgramLimitExceeded) as exc:
        # ProgramLimitExceeded (class 54: an index row too large) is an OperationalError to psycopg,
        # but the statement's fault: taken for a lost server, it was retried for ever
        raise BadValue(_one_line(exc)) from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise DatabaseUnavailable(_one_line(exc)) from exc
    except psycopg.Error as exc:
        raise DatabaseError(_one_line(exc)) from exc


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:400] or type(exc).__name__


class PostgresDatabase(Database):
    """PostgreSQL through one psycopg 3 ``AsyncConnection`` (autocommit off only inside transactions).
    A broken connection is replaced at the next :meth:`transaction`."""

    dialect = "postgresql"

    def __init__(self, url: str, connect_timeout: float = 5.0) -> None:
        super().__init__(url)
        self._conn: Any = None
        self._timeout = connect_timeout

    async def connect(self) -> None:
        import psycopg

        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return
        await self.close()
        try:
            self._conn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=max(1, int(self._timeout)))
        except psycopg.Error as exc:
            raise DatabaseUnavailable(f"cannot connect to {redact_url(self.url)}: {_one_line(exc)}") from None

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Tx]:
        async with self._lock:
            await self.connect()
            conn = self._conn
            try:
                async with _pg_errors(), conn.transaction():
                    yield _PgTx(conn)
            except DatabaseUnavailable:
                await self.close()
                raise


# --------------------------------------------------------------------------------------------- SQLite


class _SqliteTx:
    dialect = "sqlite"

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        self._depth = 0

    async def execute(self, sql: str, params: Params = ()) -> int:
        n: int = await self._db._call(_sqlite_execute, sql, tuple(params))
        return n

    async def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = await self._db._call(_sqlite_fetchall, sql, tuple(params))
        return rows

    @contextlib.asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        self._depth += 1
        name = f"sp{self._depth}"
        await self.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            await self.execute(f"ROLLBACK TO SAVEPOINT {name}")
            await self.execute(f"RELEASE SAVEPOINT {name}")
            raise
        else:
            await self.execute(f"RELEASE SAVEPOINT {name}")
        finally:
            self._depth -= 1


def _sqlite_execute(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> int:
    return int(conn.execute(sql, params).rowcount)


def _sqlite_fetchall(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(sql, params).fetchall()]


class SqliteDatabase(Database):
    """SQLite (WAL, ``synchronous=FULL``) on one connection driven from one worker thread."""

    dialect = "sqlite"

    def __init__(self, url: str, path: Path) -> None:
        super().__init__(url)
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="floor-sqlite")

    async def _call(self, fn: Any, *args: Any) -> Any:
        conn = self._conn
        if conn is None:
            raise DatabaseUnavailable(f"{self.path}: not open")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, fn, conn, *args)
        except sqlite3.IntegrityError as exc:
            raise ConstraintViolation(_one_line(exc)) from exc
        except (OverflowError, sqlite3.DataError) as exc:  # an int beyond 64 bits, a string too big
            raise BadValue(f"{self.path}: {_one_line(exc)}") from exc
        except sqlite3.OperationalError as exc:
            text = _one_line(exc)
            if "locked" in text or "unable to open" in text or "disk" in text:
                raise DatabaseUnavailable(f"{self.path}: {text}") from exc
            raise DatabaseError(f"{self.path}: {text}") from exc
        except sqlite3.Error as exc:
            raise DatabaseError(f"{self.path}: {_one_line(exc)}") from exc

    async def connect(self) -> None:
        if self._conn is not None:
            return

        def open_() -> sqlite3.Connection:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            return conn

        loop = asyncio.get_running_loop()
        try:
            self._conn = await loop.run_in_executor(self._pool, open_)
        except sqlite3.Error as exc:
            raise DatabaseUnavailable(f"cannot open {self.path}: {_one_line(exc)}") from None

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._pool, conn.close)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Tx]:
        async with self._lock:
            await self.connect()
            tx = _SqliteTx(self)
            await tx.execute("BEGIN IMMEDIATE")
            try:
                yield tx
            except BaseException:
                with contextlib.suppress(DatabaseError):
                    await tx.execute("ROLLBACK")
                raise
            await tx.execute("COMMIT")


def open_database(url: str) -> Database:
    """A :class:`Database` for ``url`` (not yet connected).

    ``postgresql://user@host:5432/name`` (or ``postgres://``): PostgreSQL; ``sqlite:///abs/path``,
    ``sqlite:rel/path`` or a plain path: an SQLite file.

    Raises:
        ValueError: any other scheme (one line naming it).
    """
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresDatabase(url)
    if url.startswith("sqlite:"):
        rest = url[len("sqlite:"):]
        path = rest[2:] if rest.startswith("//") else rest
        if not path:
            raise ValueError(f"{url!r}: no file path after sqlite:")
        return SqliteDatabase(url, Path(path))
    if "://" in url:
        raise ValueError(f"{redact_url(url)!r}: unsupported database (postgresql://... or sqlite:///path)")
    return SqliteDatabase(url, Path(url))
