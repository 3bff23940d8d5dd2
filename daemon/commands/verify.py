"""``tablesense verify --config FILE [--key FILE] [--journal DIR] [--head SEQ:HEAD ...] [--json]``: audit a
table's sealed journal offline (docs/journal.md "Verify").

Checks the whole journal with the table's key (:func:`daemon.journal.audit`): SQLite's full integrity
check, the sealed state, every block's HMAC-SHA256 chain and that the blocks join, the delivery marks,
the head the writer last recorded, and that each ``--head SEQ:HEAD`` (a chain head a floor system
received in a floor record or the status message) is on the chain. Safe while the daemon runs (a
read-only snapshot).

Exit 0: ``journal <path> (table T, epoch E): intact; chain head SEQ:HEAD; N rows (...)``. Exit 1: the
first row, block or record that fails (one line), or a head not on the chain. Exit 2: no journal, no
key, a bad config or option (one line).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tablesense.daemon.cli import UsageError

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``verify`` sub-command."""
    parser = subparsers.add_parser(
        "verify", help="audit the sealed journal offline (exit 0 intact, 1 with the first row that fails)",
        description="Audit a table's journal with its key: every row's seal and the hash chain, the sealed "
                    "counters, the delivery marks; prints the chain head and row count (exit 0) or the "
                    "first row that fails (exit 1).")
    parser.add_argument("--config", metavar="FILE", help="the table config: its journal directory and key")
    parser.add_argument("--journal", metavar="DIR", help="the journal directory (instead of the config's)")
    parser.add_argument("--key", metavar="FILE",
                        help="the journal key file (instead of the config's key_file)")
    parser.add_argument("--head", metavar="SEQ:HEAD", action="append", default=[],
                        help="a chain head the floor holds (from a floor record or the status message): "
                             "check the journal still holds exactly that history (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Audit the journal; print the result; return 0 (intact) or 1 (a check failed).

    Raises:
        UsageError: no journal directory or key given and none in a config, a bad config, key or
            ``--head``, no journal there.
    """
    from tablesense.daemon.config import ConfigError, JournalConfig, load_config
    from tablesense.daemon.journal import JournalError, JournalKeyError, audit, load_key
    from tablesense.daemon.journal.audit import parse_head

    journal_cfg = JournalConfig()
    if args.config is not None:
        try:
            journal_cfg = load_config(args.config).journal
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    elif args.journal is None:
        raise UsageError("give --config FILE (or --journal DIR with --key FILE)")
    directory = Path(args.journal if args.journal is not None else journal_cfg.directory)
    try:
        heads = [parse_head(h) for h in args.head]
    except ValueError as exc:
        raise UsageError(f"--head {exc}") from None
    try:
        key = load_key(str(Path(args.key).absolute()) if args.key is not None else journal_cfg.key_file)
    except JournalKeyError as exc:
        raise UsageError(f"{exc} (give the table's key with --key FILE)") from None
    try:
        report = audit(directory, key, heads)
    except JournalError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps({
            "journal": str(report.path), "ok": report.ok, "failure": report.failure, "table": report.table,
            "epoch": report.epoch, "chain_seq": report.chain_seq, "chain_head": report.chain_head,
            "rows": report.rows, "entries": report.entries, "inputs": report.inputs,
            "messages": report.messages, "marks": report.marks, "prunes": report.prunes,
            "blocks": report.blocks, "pending": report.pending, "first_seq": report.first_seq,
            "heads": [{"seq": s, "head": h, "found": f} for s, h, f in report.heads]}, indent=2))
        return 0 if report.ok else 1
    if report.failure is not None:
        print(f"journal {report.path}: FAILED: {report.failure}")
        return 1
    held = f"seq {report.first_seq}..{report.chain_seq}" if report.first_seq is not None else "no messages"
    print(f"journal {report.path} (table {report.table}, epoch {report.epoch}): intact; chain head "
          f"{report.chain_seq}:{report.chain_head}; {report.rows} rows ({report.inputs} inputs, "
          f"{report.messages} messages ({held}, {report.pending} awaiting delivery), {report.marks} delivery "
          f"marks, {report.prunes} retention records) in {report.blocks} closed blocks")
    for seq, head, found in report.heads:
        verdict = {True: "on the chain", False: "NOT on the chain (rolled back, replaced or forged)",
                   None: "older than the rows still held (pruned): cannot be checked"}[found]
        print(f"head {seq}:{head}: {verdict}")
    return 0 if report.ok else 1
