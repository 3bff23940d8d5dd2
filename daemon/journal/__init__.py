"""The table's write-ahead journal, transactional outbox and game recall (docs/journal.md).

``Journal`` (writer, one process) and ``open_for_recall`` (read-only, any process). Knows SQLite and
message rows; no game rules (one module, one job: the rules stay in daemon/rules/).
"""

from tablesense.daemon.journal.errors import JournalDamaged, JournalError, JournalUnwritable
from tablesense.daemon.journal.recall import JournalMissing, RecallReader, RoundRecord, open_for_recall
from tablesense.daemon.journal.store import Journal, OutboxRow

__all__ = [
    "Journal",
    "JournalDamaged",
    "JournalError",
    "JournalMissing",
    "JournalUnwritable",
    "OutboxRow",
    "RecallReader",
    "RoundRecord",
    "open_for_recall",
]
