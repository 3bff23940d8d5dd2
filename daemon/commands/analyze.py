"""``tablesense analyze``: exact probabilities, expected return and house edge of every wager of a game.

    tablesense analyze --game G [--decks N] [--paytable BET=NAME ...] [--commission RATE] [--json]

The figures come from exact enumeration through the same rules code that settles wagers
(:func:`daemon.rules.games.Game.analyze`). ``--json`` prints a list with one entry per wager (bet, hand,
paytable, outcomes with category, odds, probability and exact fraction, expected_return, house_edge;
see :meth:`daemon.rules.analysis.WagerAnalysis.to_dict`); without it a table per wager is printed.
UTH is dealt from one deck: ``--decks`` may be left out and any value but 1 is an error.
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction

from tablesense.daemon.cli import UsageError
from tablesense.daemon.rules.analysis import WagerAnalysis
from tablesense.daemon.rules.games import GAMES, get_game
from tablesense.daemon.rules.money import CommissionRule

__all__ = ["register", "render_table", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``analyze`` sub-command."""
    p = subparsers.add_parser(
        "analyze", help="exact odds, expected return and house edge of every wager of a game",
        description="For every wager of the game: each outcome's exact probability, the expected return "
                    "and the house edge, by exact enumeration through the settlement rules.")
    p.add_argument("--game", metavar="GAME", help=f"one of {', '.join(GAMES)} (required)")
    p.add_argument("--decks", metavar="N", help="decks in the shoe, 1 to 8 (uth: 1, the default)")
    p.add_argument("--paytable", action="append", default=[], metavar="BET=NAME",
                   help="paytable for a bet, e.g. perfect_pairs=B or ultimate_pairs=F (repeatable)")
    p.add_argument("--commission", metavar="RATE",
                   help="Banker commission (baccarat), e.g. 4%% (default 5%%)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=run)


def _paytables(items: list[str]) -> dict[str, str]:
    tables: dict[str, str] = {}
    for item in items:
        bet, sep, name = item.partition("=")
        if not sep or not bet.strip() or not name.strip():
            raise UsageError(f"analyze: --paytable {item!r}: expected BET=NAME, e.g. perfect_pairs=B")
        if bet.strip() in tables:
            raise UsageError(f"analyze: --paytable given twice for {bet.strip()!r}")
        tables[bet.strip()] = name.strip()
    return tables


def analyze(args: argparse.Namespace) -> list[WagerAnalysis]:
    """Build the rules from the arguments and analyse every wager.

    Raises:
        UsageError: unknown game, bad deck count, bad paytable or commission (one line).
    """
    if args.game is None:
        raise UsageError(f"analyze: --game is required (one of {', '.join(GAMES)})")
    try:
        game = get_game(args.game)
        decks: int | None = None
        if args.decks is not None:
            text = str(args.decks).strip()
            if not text.isdigit():
                raise UsageError(f"analyze: --decks must be a whole number from 1 to 8, got {args.decks!r}")
            decks = int(text)
        commission = None
        if args.commission is not None:
            try:
                commission = CommissionRule(CommissionRule.parse_rate(args.commission))
            except (ValueError, ZeroDivisionError):
                raise UsageError(f"analyze: --commission: not a rate: {args.commission!r} "
                                 f"(e.g. 5%)") from None
        rules = game.rules(decks, _paytables(args.paytable), commission)
        return game.analyze(rules)
    except ValueError as exc:  # RulesError and its subclasses
        raise UsageError(f"analyze: {' '.join(str(exc).split())}") from None


def _percent(x: Fraction) -> str:
    return f"{float(x) * 100:.4f} %"


def render_table(analyses: list[WagerAnalysis], title: str) -> None:
    """Print one rich table per wager: outcome, odds, probability, share of the expected return; below
    it, on one line of its own, the expected return and the house edge (not a table caption, which rich
    wraps to the table's width and so split ``14.3596 %`` of a narrow table over two lines)."""
    from rich.table import Table

    from tablesense.daemon.terminal import PipeConsole

    console = PipeConsole()
    console.print(f"[bold]{title}[/bold]")
    for a in analyses:
        name = a.bet.value + (f" ({a.hand.value})" if a.hand else "")
        table = Table(title=f"{name} — paytable {a.paytable}", title_justify="left")
        table.add_column("outcome")
        table.add_column("result")
        table.add_column("odds", justify="right")
        table.add_column("probability", justify="right")
        table.add_column("return / unit", justify="right")
        for o in a.outcomes:
            table.add_row(o.category, o.outcome.value, str(o.odds) if o.odds else "—",
                          f"{float(o.probability):.9f}", f"{float(o.probability * o.net_per_unit):+.6f}")
        console.print(table)
        console.print(f"expected return {float(a.expected_return):+.6f} per unit staked, "
                      f"house edge {_percent(a.house_edge)}", highlight=False, soft_wrap=True)


def run(args: argparse.Namespace) -> int:
    """Print the analysis as JSON (``--json``) or as tables; exit status 0."""
    analyses = analyze(args)
    if args.json:
        print(json.dumps([a.to_dict() for a in analyses], indent=2, ensure_ascii=False))
    else:
        decks = int(args.decks) if args.decks is not None else get_game(args.game).default_decks
        render_table(analyses, f"{args.game}, {decks} deck{'s' if decks != 1 else ''}")
    return 0
