"""Table-games accounting from the floor record: handle, win, hold and theoretical win.

Per gaming day, table, shoe and wager (bet and hand): ``rounds`` (rounds in which the wager had a
settlement), ``wagers`` (settled wagers), ``handle`` (total staked, minor units), ``player_net`` (what
the players won, net of commission; negative when they lost), ``house_win`` (= -player_net, commission
included), ``commission`` (Banker commission collected, 58 Pa. Code § 631a.13), ``hold`` (house win /
handle) and ``theo`` (theoretical win: handle x the exact house edge of that wager under the table's
decks and paytable, :func:`.edges.house_edge`, the analysis ``tablesense analyze`` prints), with
``theo_hold`` = theo / handle.

Void settlements (outcome ``void``: the stake returned, nothing won or lost) are excluded from every
figure above and shown apart: ``void_wagers`` and ``void_stake``; void rounds (a ``floor/rounds`` record
with ``void`` true) are counted apart in ``void_rounds``, not in ``rounds``. A void round's settlements
are judged one by one, as the daemon made them: ``void_round`` (and the dealer's void button) settles
``void`` only the wagers not yet settled (docs/state-machine.md, "void_round"; irregularities, rules.md
§1.8); a wager the rules had already decided before the round was voided (a Perfect Pairs wager on
the first two cards of its hand) was won or lost and paid or collected, and its settlement stays in the
handle, the win and the theoretical win. Only wagers tablesense settles are counted (the pair side
wagers and the baccarat wagers; a blackjack or UTH main wager is locked but settled by the dealer, not
here).

A settlement belongs to the gaming day of its own time (``ts``, the time of the card that decided it):
the gaming day D runs from ``start_hour`` o'clock on D to ``start_hour`` o'clock on D + 1 in the casino's
time zone (daylight saving handled by :mod:`zoneinfo`). Money is integer minor units throughout and
printed as exact decimals (:func:`money`); the theoretical win is an exact fraction of a minor unit, in
the same units as the handle, printed in major units rounded half to even to the minor unit
(:func:`money_exact`); hold percentages are exact fractions printed rounded half to even
(:func:`decimal_text`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from fractions import Fraction
from typing import Any
from zoneinfo import ZoneInfo

from tablesense.daemon.floor.edges import house_edge
from tablesense.daemon.floor.store import Database

__all__ = [
    "DayTable",
    "Figures",
    "GamingDay",
    "build_report",
    "decimal_text",
    "money",
    "money_exact",
    "render_csv",
    "render_json",
    "render_table",
    "today_by_table",
]


@dataclass(frozen=True, slots=True)
class GamingDay:
    """The casino's gaming day: starts at ``start_hour`` (0-23) local time in ``zone`` (IANA name)."""

    start_hour: int = 6
    zone: str = "UTC"

    def tz(self) -> ZoneInfo:
        """The zone (raises ``zoneinfo.ZoneInfoNotFoundError`` for an unknown name)."""
        return ZoneInfo(self.zone)

    def of(self, ts: str | datetime) -> date:
        """The gaming day a UTC time (ISO text or aware datetime) belongs to."""
        dt = datetime.fromisoformat(ts) if isinstance(ts, str) else ts
        local = dt.astimezone(self.tz())
        return local.date() - timedelta(days=1) if local.hour < self.start_hour else local.date()

    def bounds(self, day: date) -> tuple[str, str]:
        """``[start, end)`` of ``day`` as the floor's UTC timestamps (sortable text)."""
        tz = self.tz()
        lo = datetime.combine(day, time(self.start_hour), tz).astimezone(UTC)
        hi = datetime.combine(day + timedelta(days=1), time(self.start_hour), tz).astimezone(UTC)
        return _stamp(lo), _stamp(hi)


def _stamp(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(slots=True)
class Figures:
    """Sums over settled wagers (minor units) and the exact theoretical win."""

    rounds: int = 0
    wagers: int = 0
    handle: int = 0
    player_net: int = 0
    commission: int = 0
    theo: Fraction = field(default_factory=Fraction)
    theo_handle: int = 0
    void_rounds: int = 0
    void_wagers: int = 0
    void_stake: int = 0

    @property
    def house_win(self) -> int:
        """What the house won (minor units): minus the players' net, commission included."""
        return -self.player_net

    @property
    def hold(self) -> Fraction | None:
        """House win / handle, or ``None`` without handle."""
        return Fraction(self.house_win, self.handle) if self.handle else None

    @property
    def theo_hold(self) -> Fraction | None:
        """Theoretical win / handle (over the handle whose house edge is known), or ``None``."""
        return self.theo / self.theo_handle if self.theo_handle else None

    def add(self, other: Figures, rounds: bool = True) -> None:
        """Add ``other`` into this (``rounds``: add its round counts too)."""
        if rounds:
            self.rounds += other.rounds
            self.void_rounds += other.void_rounds
        self.wagers += other.wagers
        self.handle += other.handle
        self.player_net += other.player_net
        self.commission += other.commission
        self.theo += other.theo
        self.theo_handle += other.theo_handle
        self.void_wagers += other.void_wagers
        self.void_stake += other.void_stake


@dataclass(slots=True)
class WagerLine:
    """One wager's figures: ``bet``, ``hand``, ``paytable`` and exact ``house_edge`` (``None``: unknown)."""

    bet: str
    hand: str | None
    paytable: str | None
    house_edge: Fraction | None
    figures: Figures = field(default_factory=Figures)


@dataclass(slots=True)
class ShoeBlock:
    """One shoe of a table on a gaming day."""

    shoe: int | None
    totals: Figures = field(default_factory=Figures)
    wagers: list[WagerLine] = field(default_factory=list)


@dataclass(slots=True)
class DayTable:
    """One table on one gaming day: totals, per wager (all shoes) and per shoe."""

    day: date
    table: str
    game: str | None
    currency: str | None
    minor_unit: int
    totals: Figures = field(default_factory=Figures)
    wagers: list[WagerLine] = field(default_factory=list)
    shoes: list[ShoeBlock] = field(default_factory=list)


_SPLIT = 1 << 32


def _sum_sql(column: str) -> str:
    """SQL summing ``column`` exactly in two parts (quotient and remainder by 2**32; both databases
    truncate toward zero): SQLite's SUM of 64-bit integers stops with 'integer overflow' at 2**63, which
    1,024 stakes of 2**53 - 1 (the money bound) reach; the parts do not overflow before 2**31 rows."""
    return f"SUM({column} / {_SPLIT}), SUM({column} - {column} / {_SPLIT} * {_SPLIT})"  # no '%': psycopg


def _summed(high: Any, low: Any) -> int:
    """The exact sum from the two parts of :func:`_sum_sql` (``None``: no row)."""
    return int(high or 0) * _SPLIT + int(low or 0)


def _days_cte(days: list[tuple[date, str, str]]) -> tuple[str, list[Any]]:
    values = ", ".join("(?, ?, ?)" for _ in days)
    params: list[Any] = []
    for d, lo, hi in days:
        params += [d.isoformat(), lo, hi]
    return f"WITH d(day, lo, hi) AS (VALUES {values}) ", params


async def _day_list(db: Database, gd: GamingDay, day: date | None, table: str | None) -> list[date]:
    """The gaming days that have a settlement or a floor record: ``[day]`` when given. Read from the
    distinct UTC hours stored (an hour spans at most one gaming-day start), not as every day from the
    first time to the last: one message stamped 1970 by a controller without a clock made that millions
    of queries."""
    if day is not None:
        return [day]
    where, params = (" WHERE table_id = ?", [table]) if table else ("", [])
    rows = await db.fetchall(f"SELECT DISTINCT substr(ts, 1, 13) FROM settlements{where} UNION "
                             f"SELECT DISTINCT substr(ts, 1, 13) FROM rounds{where}", params + params)
    days: set[date] = set()
    for (hour,) in rows:
        try:
            start = datetime.fromisoformat(f"{hour}:00:00+00:00")
            days.update((gd.of(start), gd.of(start + timedelta(hours=1, microseconds=-1))))
        except (ValueError, OverflowError):  # not a time the floor stores (ingest refuses them)
            continue
    return sorted(days)


async def build_report(db: Database, gaming_day: GamingDay, day: date | None = None,
                       table: str | None = None) -> list[DayTable]:
    """The figures per gaming day and table (``day``/``table`` restrict them), sorted by day and table.

    Raises ``zoneinfo.ZoneInfoNotFoundError`` for an unknown zone and the database's errors.
    """
    days = await _day_list(db, gaming_day, day, table)
    out: dict[tuple[date, str], DayTable] = {}
    if not days:
        return []
    info = {str(r[0]): r[1:] for r in await db.fetchall(
        "SELECT table_id, game, decks, paytables, commission, currency, minor_unit FROM tables")}
    for chunk_start in range(0, len(days), 300):
        chunk = [(d, *gaming_day.bounds(d)) for d in days[chunk_start:chunk_start + 300]]
        cte, params = _days_cte(chunk)
        where = " AND s.table_id = ?" if table else ""
        rows = await db.fetchall(
            cte + "SELECT d.day, s.table_id, s.shoe, s.bet, s.hand, s.paytable, s.house_edge, "
            "CASE WHEN s.outcome = 'void' THEN 1 ELSE 0 END AS voided, "
            f"COUNT(DISTINCT s.epoch || ':' || s.round), COUNT(*), {_sum_sql('s.stake')}, "
            f"{_sum_sql('s.net')}, {_sum_sql('s.commission')} "
            "FROM settlements s JOIN d ON s.ts >= d.lo AND s.ts < d.hi "
            f"WHERE 1 = 1{where} "
            "GROUP BY d.day, s.table_id, s.shoe, s.bet, s.hand, s.paytable, s.house_edge, "
            "CASE WHEN s.outcome = 'void' THEN 1 ELSE 0 END",
            params + ([table] if table else []))
        round_rows = await db.fetchall(
            cte + "SELECT d.day, r.table_id, r.shoe, CASE WHEN r.void THEN 1 ELSE 0 END, COUNT(*) "
            "FROM rounds r JOIN d ON r.ts >= d.lo AND r.ts < d.hi "
            f"WHERE 1 = 1{' AND r.table_id = ?' if table else ''} "
            "GROUP BY d.day, r.table_id, r.shoe, CASE WHEN r.void THEN 1 ELSE 0 END",
            params + ([table] if table else []))
        for (d_text, tbl, shoe, bet, hand, paytable, edge_text, voided, n_rounds, n, *sums) in rows:
            stake, net, commission = (_summed(sums[i], sums[i + 1]) for i in (0, 2, 4))
            key = (date.fromisoformat(str(d_text)), str(tbl))
            dt = out.get(key) or _new_day_table(key, info.get(str(tbl)))
            out[key] = dt
            edge = Fraction(str(edge_text)) if edge_text else None
            if edge is None and str(tbl) in info:
                game, decks, paytables, comm = info[str(tbl)][:4]
                found = house_edge(game, decks, paytables, comm, str(bet), hand)
                if found is not None:
                    paytable, edge = found
            f = Figures()
            if int(voided):
                f.void_wagers, f.void_stake = int(n), int(stake or 0)
            else:
                f.rounds, f.wagers, f.handle = int(n_rounds), int(n), int(stake or 0)
                f.player_net, f.commission = int(net or 0), int(commission or 0)
                if edge is not None:
                    f.theo, f.theo_handle = f.handle * edge, f.handle
            shoe_no = int(shoe) if shoe is not None else None
            block = next((b for b in dt.shoes if b.shoe == shoe_no), None)
            if block is None:
                block = ShoeBlock(shoe_no)
                dt.shoes.append(block)
            _line(block.wagers, str(bet), hand, paytable, edge).figures.add(f)
            _line(dt.wagers, str(bet), hand, paytable, edge).figures.add(f)
            block.totals.add(f, rounds=False)
            dt.totals.add(f, rounds=False)
        for d_text, tbl, shoe, void, n in round_rows:
            key = (date.fromisoformat(str(d_text)), str(tbl))
            dt = out.get(key) or _new_day_table(key, info.get(str(tbl)))
            out[key] = dt
            shoe_no = int(shoe) if shoe is not None else None
            block = next((b for b in dt.shoes if b.shoe == shoe_no), None)
            if block is None:
                block = ShoeBlock(shoe_no)
                dt.shoes.append(block)
            for fig in (block.totals, dt.totals):
                if int(void):
                    fig.void_rounds += int(n)
                else:
                    fig.rounds += int(n)
    result = [out[k] for k in sorted(out)]
    for dt in result:
        dt.shoes.sort(key=lambda b: (b.shoe is None, b.shoe or 0))
        dt.wagers.sort(key=_wager_order)
        for b in dt.shoes:
            b.wagers.sort(key=_wager_order)
    return result


def _wager_order(w: WagerLine) -> tuple[str, str]:
    return w.bet, w.hand or ""


def _new_day_table(key: tuple[date, str], info: Any) -> DayTable:
    game = currency = None
    minor = 2
    if info is not None:
        game, currency = info[0], info[4]
        minor = int(info[5]) if info[5] is not None else 2
    return DayTable(key[0], key[1], game, currency, minor)


def _line(lines: list[WagerLine], bet: str, hand: str | None, paytable: str | None,
          edge: Fraction | None) -> WagerLine:
    for w in lines:
        if (w.bet, w.hand, w.paytable, w.house_edge) == (bet, hand, paytable, edge):
            return w
    w = WagerLine(bet, hand, paytable, edge)
    lines.append(w)
    return w


async def today_by_table(db: Database, gaming_day: GamingDay,
                         now: datetime | None = None) -> dict[str, Figures]:
    """Each table's figures for the current gaming day (the floor page)."""
    today = gaming_day.of(now or datetime.now(UTC))
    return {dt.table: dt.totals for dt in await build_report(db, gaming_day, today)}


# --------------------------------------------------------------------------------------------- rendering


def money(minor: int, digits: int) -> str:
    """``minor`` units as an exact decimal with ``digits`` places, e.g. ``money(-1250, 2) == "-12.50"``."""
    sign = "-" if minor < 0 else ""
    units, rest = divmod(abs(minor), 10**digits)
    return f"{sign}{units}.{rest:0{digits}d}" if digits else f"{sign}{units}"


def decimal_text(x: Fraction, places: int) -> str:
    """``x`` rounded half to even to ``places`` decimals (exact arithmetic), e.g. ``"12.35"``.

    ``x`` is a plain number (a percentage, a ratio); for an amount in minor units use :func:`money_exact`.
    """
    q = round(x * 10**places)
    return money(q, places)


def money_exact(minor: Fraction, digits: int) -> str:
    """An exact amount in minor units (e.g. a theoretical win: handle in minor units x house edge) as
    currency text in major units with ``digits`` places, rounded half to even to the minor unit:
    ``money_exact(Fraction(21158, 10), 2) == "21.16"`` (2115.8 cents)."""
    return money(round(minor), digits)


def _pct(x: Fraction | None, places: int = 2) -> str | None:
    return None if x is None else decimal_text(x * 100, places)


def _figures_dict(f: Figures, digits: int) -> dict[str, Any]:
    return {
        "rounds": f.rounds, "wagers": f.wagers, "handle": money(f.handle, digits),
        "player_net": money(f.player_net, digits), "house_win": money(f.house_win, digits),
        "commission": money(f.commission, digits), "hold_pct": _pct(f.hold, 4),
        "theo_win": money_exact(f.theo, digits) if f.theo_handle else None,
        "theo_win_exact_minor": f"{f.theo.numerator}/{f.theo.denominator}" if f.theo_handle else None,
        "theo_hold_pct": _pct(f.theo_hold, 4),
        "void_rounds": f.void_rounds, "void_wagers": f.void_wagers, "void_stake": money(f.void_stake, digits),
    }


def _wager_dict(w: WagerLine, digits: int) -> dict[str, Any]:
    return {"bet": w.bet, "hand": w.hand, "paytable": w.paytable,
            "house_edge_pct": _pct(w.house_edge, 4),
            "house_edge_exact": (f"{w.house_edge.numerator}/{w.house_edge.denominator}"
                                 if w.house_edge else None),
            **_figures_dict(w.figures, digits)}


def render_json(report: Iterable[DayTable]) -> str:
    """The report as JSON: a list of ``{day, table, game, currency, totals, wagers, shoes}``; money as exact
    decimal strings, percentages to 4 places, the exact theoretical win in minor units as a fraction."""
    out = []
    for dt in report:
        d = dt.minor_unit
        out.append({"day": dt.day.isoformat(), "table": dt.table, "game": dt.game, "currency": dt.currency,
                    "totals": _figures_dict(dt.totals, d),
                    "wagers": [_wager_dict(w, d) for w in dt.wagers],
                    "shoes": [{"shoe": b.shoe, "totals": _figures_dict(b.totals, d),
                               "wagers": [_wager_dict(w, d) for w in b.wagers]} for b in dt.shoes]})
    return json.dumps(out, indent=2)


CSV_COLUMNS = ("day", "table", "level", "shoe", "bet", "hand", "paytable", "house_edge_pct", "rounds",
               "wagers",
               "handle", "player_net", "house_win", "commission", "hold_pct", "theo_win", "theo_hold_pct",
               "void_rounds", "void_wagers", "void_stake", "currency")
"""Columns of :func:`render_csv` (``level``: ``table``, ``wager``, ``shoe`` or ``shoe_wager``)."""


def render_csv(report: Iterable[DayTable]) -> str:
    """The report as CSV (:data:`CSV_COLUMNS`), one row per table total, wager, shoe and shoe wager."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)

    def row(dt: DayTable, level: str, shoe: int | None, wl: WagerLine | None, f: Figures) -> None:
        fd = _figures_dict(f, dt.minor_unit)
        w.writerow([dt.day.isoformat(), dt.table, level, "" if shoe is None else shoe,
                    wl.bet if wl else "", (wl.hand or "") if wl else "", (wl.paytable or "") if wl else "",
                    (_pct(wl.house_edge, 4) or "") if wl else "", fd["rounds"], fd["wagers"], fd["handle"],
                    fd["player_net"], fd["house_win"], fd["commission"], fd["hold_pct"] or "",
                    fd["theo_win"] or "", fd["theo_hold_pct"] or "", fd["void_rounds"], fd["void_wagers"],
                    fd["void_stake"], dt.currency or ""])

    for dt in report:
        row(dt, "table", None, None, dt.totals)
        for wl in dt.wagers:
            row(dt, "wager", None, wl, wl.figures)
        for b in dt.shoes:
            row(dt, "shoe", b.shoe, None, b.totals)
            for wl in b.wagers:
                row(dt, "shoe_wager", b.shoe, wl, wl.figures)
    return buf.getvalue()


def render_table(report: list[DayTable], console: Any = None) -> None:
    """Print the report as rich tables: one per gaming day and table (wagers, then shoes)."""
    import sys

    from rich.table import Table

    from tablesense.daemon.terminal import PipeConsole

    # piped: wide enough that no figure is ever cut or wrapped (money must be read whole)
    console = console or (PipeConsole() if sys.stdout.isatty() else PipeConsole(width=220))
    if not report:
        console.print("no settled wagers in the floor database for that selection")
        return
    for dt in report:
        d = dt.minor_unit
        t = Table(title=f"gaming day {dt.day.isoformat()} — table {dt.table} ({dt.game or '?'}, "
                        f"{dt.currency or '?'})", title_justify="left")
        for col in ("shoe", "wager", "rounds", "handle", "player net", "house win", "commission", "hold %",
                    "theo win", "theo %", "void rounds / stake"):
            t.add_column(col, justify="left" if col in ("shoe", "wager") else "right")

        def add(shoe: str, name: str, f: Figures, style: str | None = None, t: Any = t, d: int = d) -> None:
            t.add_row(shoe, name, str(f.rounds), money(f.handle, d), money(f.player_net, d),
                      money(f.house_win, d), money(f.commission, d), _pct(f.hold) or "—",
                      money_exact(f.theo, d) if f.theo_handle else "—", _pct(f.theo_hold) or "—",
                      f"{f.void_rounds} / {money(f.void_stake, d)}", style=style)

        add("all", "total", dt.totals, "bold")
        for wl in dt.wagers:
            add("all", _wager_name(wl), wl.figures)
        for b in dt.shoes:
            add(str(b.shoe), "shoe total", b.totals, "bold")
            for wl in b.wagers:
                add(str(b.shoe), _wager_name(wl), wl.figures)
        console.print(t)


def _wager_name(w: WagerLine) -> str:
    return w.bet + (f" ({w.hand})" if w.hand else "") + (f" [{w.paytable}]" if w.paytable else "")
