"""The table's sealed write-ahead journal, transactional outbox, game recall and audit
(docs/journal.md).

``Journal`` (writer, one process), ``open_for_recall`` (read-only, any process) and ``audit`` (``tablesense
verify``). Every row is sealed in one HMAC-SHA256 hash chain under the table's key (``load_key``). Knows
SQLite and message rows; no game rules.
"""

from tablesense.daemon.journal.audit import AuditReport, SealedSnapshot, audit, sealed_snapshot
from tablesense.daemon.journal.errors import JournalDamaged, JournalError, JournalUnwritable
from tablesense.daemon.journal.key import JournalKeyError, key_id, load_key, write_new_key
from tablesense.daemon.journal.recall import JournalMissing, RecallReader, RoundRecord, open_for_recall
from tablesense.daemon.journal.store import Journal, OutboxRow

__all__ = [
    "AuditReport",
    "Journal",
    "JournalDamaged",
    "JournalError",
    "JournalKeyError",
    "JournalMissing",
    "JournalUnwritable",
    "OutboxRow",
    "RecallReader",
    "RoundRecord",
    "SealedSnapshot",
    "audit",
    "key_id",
    "load_key",
    "open_for_recall",
    "sealed_snapshot",
    "write_new_key",
]
