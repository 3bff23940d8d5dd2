"""``tablesense recall [--journal DIR | --config FILE] [--last N] [--round ID] [--json]``: game recall.

Shows the last rounds in full from the table's journal, also while the daemon runs (a separate
read-only connection; :mod:`daemon.journal.recall`): every card in draw order with where it went, each
spot's locked wager, every settlement, alarms, timestamps, and whether the round was voided. The
default is the last 10 rounds: the current round and the 9 before it (AGCO "most recent game plus 9
prior"; Fla. Admin. Code 75-14.043 "last 10 games"). Face-down cards of the round in progress are not
shown until it is complete (the information barrier).

``--json`` prints a JSON list of round records (:class:`daemon.journal.RoundRecord`), oldest first.
Money is integer minor units; with ``--config`` the human view shows it in the table's currency.
Every row shown was verified against the table's journal key first (``--key FILE``, else the config's
``[journal] key_file``): a row that fails its seal is never shown; recall refuses, naming it. A missing,
damaged or altered journal, a missing key, an unknown round or a bad option is one line on stderr,
exit 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tablesense.daemon.cli import UsageError
from tablesense.daemon.config import ConfigError, JournalConfig, load_config
from tablesense.daemon.journal import (
    JournalDamaged,
    JournalError,
    JournalKeyError,
    JournalMissing,
    RoundRecord,
    load_key,
    open_for_recall,
)
from tablesense.daemon.terminal import PipeConsole

__all__ = ["MAX_LAST", "register", "render_round", "run"]

MAX_LAST = 1_000_000
"""``--last`` at most this many rounds (a journal keeps ``retention_rounds``, at most 10**9 by config;
the bound keeps the number a SQLite integer and the answer printable)."""


def register(subparsers: Any) -> None:
    """Add the ``recall`` sub-command."""
    parser = subparsers.add_parser(
        "recall", help="show the last rounds in full from the journal (game recall)",
        description="Show the last rounds in full from the table's journal (also while the daemon runs): "
                    "cards in draw order with their hands, locked wagers, settlements, alarms, timestamps. "
                    "Default: the current round and the 9 before it.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--journal", metavar="DIR", help="the journal directory (holds journal.sqlite)")
    where.add_argument("--config", metavar="FILE",
                       help="a table config: use its journal.directory and key_file")
    parser.add_argument("--key", metavar="FILE",
                        help="the journal key file (instead of the config's key_file)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--last", metavar="N", type=int, default=10, help="how many rounds (default 10)")
    which.add_argument("--round", metavar="ID", help="one round: SHOE-ROUND (e.g. 3-17), or ROUND in the "
                                                     "latest shoe that has it")
    parser.add_argument("--json", action="store_true", help="print a JSON list of round records")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the requested rounds; returns 0.

    Raises:
        UsageError: no journal there, a damaged journal, an unknown round, ``--last`` below 1, a bad config.
    """
    currency, minor_unit = None, None
    key_file = JournalConfig().key_file
    if args.config is not None:
        try:
            cfg = load_config(args.config)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        directory, currency, minor_unit = cfg.journal.directory, cfg.currency, cfg.minor_unit
        key_file = cfg.journal.key_file
    else:
        directory = args.journal if args.journal is not None else JournalConfig().directory
    if getattr(args, "key", None) is not None:
        key_file = str(Path(args.key).absolute())
    if args.round is None and not 1 <= args.last <= MAX_LAST:
        shown = args.last if abs(args.last) < 10**30 else "a longer number"
        raise UsageError(f"--last must be at least 1 and at most {MAX_LAST}, got {shown}")
    try:
        key = load_key(key_file)
    except JournalKeyError as exc:
        raise UsageError(f"{exc}: recall verifies every row against the table's key, so it needs it (give "
                         "--key FILE or a config whose key_file can be read)") from None
    try:
        with open_for_recall(directory, key) as reader:
            records = [reader.round(args.round)] if args.round is not None else reader.rounds(args.last)
    except JournalMissing:
        raise UsageError(f"no journal in {directory} (give --journal DIR or --config FILE)") from None
    except JournalDamaged as exc:
        raise UsageError(f"the journal is damaged or altered, recall refused: {exc} (tablesense verify names "
                         "every check)") from None
    except JournalError as exc:
        raise UsageError(f"cannot read the journal: {exc}") from None
    except KeyError as exc:
        raise UsageError(str(exc.args[0]) if exc.args else "no such round") from None
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(records), indent=2).decode())
        return 0
    console = PipeConsole(highlight=False, soft_wrap=False)
    if not console.is_terminal:  # piped into a file or a pager: wide enough for the settlement table
        console = PipeConsole(highlight=False, soft_wrap=False, width=max(console.width, 150))
    if not records:
        console.print(f"The journal in {directory} holds no rounds yet.")
        return 0
    for record in records:
        console.print(render_round(record, currency, minor_unit))
    return 0


def _money(minor: int, currency: str | None, minor_unit: int | None) -> str:
    if minor_unit is None:
        return str(minor)
    sign = "-" if minor < 0 else ""
    whole, frac = divmod(abs(minor), 10 ** minor_unit)
    amount = f"{sign}{whole}.{frac:0{minor_unit}d}" if minor_unit else f"{sign}{whole}"
    return f"{amount} {currency}" if currency else amount


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False, expand=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    return table


def render_round(record: RoundRecord, currency: str | None = None, minor_unit: int | None = None
                 ) -> RenderableType:
    """A rich panel with everything recall holds about one round (money in minor units unless the
    table's ``currency`` and ``minor_unit`` are given)."""
    unit = "" if minor_unit is not None else " (minor units)"
    parts: list[RenderableType] = []
    cards = _table("Cards in draw order", "#", "card", "position", "face", "status", "time", "device", "seq")
    for c in record.cards:
        cards.add_row(str(c.index), c.card or "?", c.position or "-", "up" if c.face_up else "down", c.status,
                      c.ts, c.device or "-", "-" if c.device_seq is None else str(c.device_seq))
    parts.append(cards if record.cards else Text("No cards out of the shoe yet." if not record.hidden_cards
                                                 else "No face-up cards yet."))
    if record.hidden_cards:
        parts.append(Text(f"{record.hidden_cards} more card(s) drawn, face down: shown once the round is "
                          "complete.", style="italic"))
    if record.burns:
        parts.append(Text("Burned: " + " ".join(b.card or "?" for b in record.burns)))
    if record.baccarat is not None:
        b = record.baccarat
        flags = [("player pair", b.player_pair), ("banker pair", b.banker_pair)]
        if record.game == "ez-baccarat":  # Dragon 7 and Panda 8 are EZ Baccarat outcomes only
            flags += [("dragon 7", b.dragon_7), ("panda 8", b.panda_8)]
        pairs = [n for n, hit in flags if hit]
        parts.append(Text(
            f"Player {' '.join(b.player)} ({b.player_total}{', natural' if b.player_natural else ''})  "
            f"Banker {' '.join(b.banker)} ({b.banker_total}{', natural' if b.banker_natural else ''})  "
            f"winner: {b.winner}" + (f"  [{', '.join(pairs)}]" if pairs else "")))
    for box in record.boxes:
        parts.append(Text(f"{box.position}: {' '.join(box.cards)}" + (f" ({box.pair})" if box.pair else "")))
    if record.dealer:
        parts.append(Text(f"dealer: {' '.join(record.dealer)}"))
    if record.board:
        parts.append(Text(f"board: {' '.join(record.board)}"))
    if record.wagers:
        wagers = _table("Locked wagers" + unit, "spot", "seat", "bet", "hand", "stake")
        for w in record.wagers:
            wagers.add_row(w.spot, w.seat, w.bet, w.hand or "-", _money(w.stake, currency, minor_unit)
                           + (" (presence)" if w.presence_only else ""))
        parts.append(wagers)
    if record.settlements:
        settled = _table("Settlements" + unit, "spot", "bet", "hand", "stake", "outcome", "category", "odds",
                         "net", "commission", "time", "after lock")
        for s in record.settlements:
            settled.add_row(s.spot, s.bet, s.hand or "-", _money(s.stake, currency, minor_unit), s.outcome,
                            s.category, s.odds or "-", _money(s.net, currency, minor_unit),
                            _money(s.commission, currency, minor_unit), s.ts,
                            "CHANGED" if s.changed_after_lock else "")
        parts.append(settled)
    if record.alarms:
        alarms = _table("Alarms", "id", "code", "severity", "state", "held", "text", "time")
        for a in record.alarms:
            alarms.add_row(a.alarm_id, a.code, a.severity, a.state, "held" if a.held else "", a.text, a.ts)
        parts.append(alarms)
    if record.spot_changes:
        spots = _table("Spot changes" + unit, "time", "spot", "state", "amount", "after lock")
        for sc in record.spot_changes:
            spots.add_row(sc.ts, sc.spot, sc.state, "-" if sc.amount is None else
                          _money(sc.amount, currency, minor_unit), "AFTER LOCK" if sc.after_lock else "")
        parts.append(spots)
    if record.commands:
        cmds = _table("Operator commands", "time", "command", "args", "operator", "result")
        for cmd in record.commands:
            cmds.add_row(cmd.ts, cmd.name, " ".join(f"{k}={v}" for k, v in cmd.args.items()), cmd.operator,
                         "ok" if cmd.ok else f"refused: {cmd.reason}")
        parts.append(cmds)
    if record.events:
        events = _table("Inputs so far (round in progress)", "time", "input", "device", "seq", "detail")
        for e in record.events:
            detail = " ".join(f"{k}={v}" for k, v in e.detail.items() if k not in ("device", "seq"))
            events.add_row(e.ts, e.kind, e.device or "-", "-" if e.device_seq is None else str(e.device_seq),
                           detail)
        parts.append(events)
    waiting = sum(1 for m in record.messages if not m.delivered)
    if record.messages:
        parts.append(Text(f"{len(record.messages)} message(s), seq {record.messages[0].seq}-"
                          f"{record.messages[-1].seq}, {waiting} awaiting the broker's acknowledgement",
                          style="dim"))
    status = record.status.upper() if record.status != "complete" else "complete"
    if record.held:
        status += ", HELD"
    title = f"Round {record.round_id} · {status} · {record.game or 'game ?'} · table {record.table}"
    subtitle = f"{record.started_ts} → {record.ended_ts or 'in progress'}"
    return Panel(Group(*parts), title=title, subtitle=subtitle, title_align="left", subtitle_align="left",
                 expand=False)
