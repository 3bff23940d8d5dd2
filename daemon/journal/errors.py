"""Errors of the write-ahead journal (a damaged journal raises a critical alarm and tablesense
refuses to settle rather than guess).

The two errors map onto the two critical alarms the app raises:

* :class:`JournalDamaged`: the journal failed its integrity check (SQLite page structure, a row
  checksum, the schema version, or it belongs to another table). Settling must stop; the journal is
  never cleared automatically (critical memory, Okla. Admin. Code 325:85-15-19).
* :class:`JournalUnwritable`: a write failed (disk full, read-only, I/O error, size cap reached,
  locked by another process). The failed transaction was rolled back whole, so nothing half-written is
  visible and nothing unjournaled may be published.
"""

from __future__ import annotations

import sqlite3

__all__ = ["JournalDamaged", "JournalError", "JournalUnwritable", "classify_sqlite_error"]


class JournalError(Exception):
    """Base class of the journal's errors."""


class JournalDamaged(JournalError):
    """The journal failed its integrity check: the app raises a critical alarm and refuses to settle."""


class JournalUnwritable(JournalError):
    """An append (or open) could not be written: disk full, read-only, I/O error or locked.

    Raised after the transaction was rolled back: nothing of the failed append is in the journal.
    """


# Primary SQLite result codes (https://www.sqlite.org/rescode.html).
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


def classify_sqlite_error(exc: sqlite3.Error, what: str) -> JournalError:
    """Map a :class:`sqlite3.Error` to :class:`JournalDamaged` (corrupt / not a database) or
    :class:`JournalUnwritable` (everything else: full, read-only, I/O, busy, constraint), with ``what``
    (e.g. ``"append"``) and SQLite's own error name in the message."""
    code = getattr(exc, "sqlite_errorcode", None)
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    text = f"journal {what} failed: {exc} ({name})"
    if code is not None and (code & 0xFF) in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return JournalDamaged(text)
    if code is None and isinstance(exc, sqlite3.DatabaseError) and "malformed" in str(exc):
        return JournalDamaged(text)
    return JournalUnwritable(text)
