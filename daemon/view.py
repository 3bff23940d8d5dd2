"""The live table view shared by ``tablesense demo`` and ``tablesense monitor``.

It is built only from what a signage subscriber may read (the public topics: status, round, results,
settlements, alarms, devices/+; never ``floor/``), so it shows exactly what the information barrier lets
out. :class:`TableView` folds decoded messages into display state (pure, no I/O; duplicates dropped by
``msg_id``); :func:`render` draws it with rich; :func:`plain_line` gives the one-line text of a
message for ``--no-ui``; :func:`watch` subscribes to a broker and drives either output.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import aiomqtt
import msgspec
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tablesense.daemon.broker_auth import BrokerAuth
from tablesense.daemon.messages import (
    AlarmMessage,
    DeviceStatus,
    Message,
    RoundResults,
    RoundState,
    SettlementMessage,
    TableStatus,
    decode_message,
)
from tablesense.daemon.mqtt import NODELAY
from tablesense.drivers.waits import wait_at_most

__all__ = ["BetTally", "TableView", "plain_line", "public_filters", "render", "summary_lines", "watch"]

_SUIT_GLYPH = {"S": "♠", "H": "♥", "D": "♦", "C": "♣"}


def _card(text: str) -> Text:
    """A card string such as ``"QH"`` as rich text (red for hearts and diamonds)."""
    if not text:
        return Text("??")
    rank, suit = text[:-1], text[-1:]
    return Text(f"{rank}{_SUIT_GLYPH.get(suit, suit)}", style="bold red" if suit in "HD" else "bold")


def _money(minor: int, minor_unit: int = 2, signed: bool = True) -> str:
    """Minor units as a decimal string, signed (``+``/``-``) unless ``signed`` is false (integer
    arithmetic only, no floats)."""
    sign = ("-" if minor < 0 else "+" if minor > 0 else " ") if signed else ("-" if minor < 0 else "")
    whole, frac = divmod(abs(minor), 10 ** minor_unit)
    return f"{sign}{whole}.{frac:0{minor_unit}d}" if minor_unit else f"{sign}{whole}"


@dataclass(slots=True)
class BetTally:
    """Running figures of one wager (bet name) from the players' side: counts and net minor units."""

    wagers: int = 0
    wins: int = 0
    losses: int = 0
    pushes: int = 0
    voids: int = 0
    staked: int = 0
    net: int = 0
    commission: int = 0


@dataclass(slots=True)
class TableView:
    """Display state of one table, folded from its public messages.

    ``apply(message)`` returns ``True`` when the message was new (not a duplicate ``msg_id``).
    Figures: ``tallies`` per bet name, ``rounds`` completed (void rounds counted apart in ``voided``),
    ``pair_hits`` (settlements won on a pair category with their odds), ``winners`` (baccarat).
    """

    table: str
    minor_unit: int = 2
    status: str = "unknown"
    game: str = ""
    phase: str = ""
    shoe: int | None = None
    round: int | None = None
    cards_remaining: int = 0
    held: bool = False
    hold_codes: tuple[str, ...] = ()
    cards: list[tuple[str, str]] = field(default_factory=list)
    last_result: RoundResults | None = None
    rounds: int = 0
    voided: int = 0
    winners: dict[str, int] = field(default_factory=dict)
    tallies: dict[str, BetTally] = field(default_factory=dict)
    pair_hits: deque[str] = field(default_factory=lambda: deque(maxlen=8))
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=10))
    alarms: deque[str] = field(default_factory=lambda: deque(maxlen=6))
    devices: dict[str, str] = field(default_factory=dict)
    settlements: int = 0
    duplicates: int = 0
    _seen: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def apply(self, message: Message) -> bool:
        """Fold one message in; ``False`` (and nothing changes) for an already-seen ``msg_id``."""
        if message.msg_id:
            if message.msg_id in self._seen:
                self.duplicates += 1
                return False
            self._seen[message.msg_id] = None
            if len(self._seen) > 200_000:
                self._seen.popitem(last=False)
        if isinstance(message, TableStatus):
            self.status = message.state
        elif isinstance(message, RoundState):
            self.game, self.phase = message.game, message.phase
            self.shoe, self.round = message.shoe, message.round
            self.cards_remaining = message.cards_remaining
            self.held, self.hold_codes = message.held, message.hold_codes
            self.cards = [(c.position, c.card) for c in message.cards]
        elif isinstance(message, RoundResults):
            self.last_result = message
            self.game = message.game or self.game
            if message.void:
                self.voided += 1
            else:
                self.rounds += 1
                if message.baccarat is not None:
                    w = message.baccarat.winner
                    self.winners[w] = self.winners.get(w, 0) + 1
        elif isinstance(message, SettlementMessage):
            self._settle(message)
        elif isinstance(message, AlarmMessage):
            self.alarms.append(f"#{message.alarm_id} {message.code} ({message.severity}, {message.state}): "
                               f"{message.text}")
        elif isinstance(message, DeviceStatus):
            self.devices[message.name] = message.state
        return True

    def _settle(self, m: SettlementMessage) -> None:
        self.settlements += 1
        t = self.tallies.setdefault(m.bet, BetTally())
        t.wagers += 1
        t.staked += m.stake
        t.net += m.net
        t.commission += m.commission
        if m.outcome == "win":
            t.wins += 1
        elif m.outcome == "lose":
            t.losses += 1
        elif m.outcome == "push":
            t.pushes += 1
        else:
            t.voids += 1
        where = f"seat {m.seat}" + (f" {m.hand}" if m.hand else "")
        odds = f" at {m.odds}" if m.odds else ""
        line = (f"r{m.round} {where} {m.bet} {_money(m.stake, self.minor_unit, False)} -> {m.outcome}"
                f"{_category(m)}{odds} net {_money(m.net, self.minor_unit)}")
        self.recent.append(line)
        if m.outcome == "win" and "pair" in m.bet:
            self.pair_hits.append(f"r{m.round} {where}: {m.category} pays {m.odds} "
                                  f"({_money(m.net, self.minor_unit)})")


def _category(m: SettlementMessage) -> str:
    """`` <category>`` when it says more than the outcome (``win player_pair``), else nothing (``lose``)."""
    return f" {m.category}" if m.category and m.category != m.outcome else ""


def public_filters(prefix: str, table: str | None) -> list[str]:
    """Subscription filters for the public topics of ``table`` (``+``: every table under ``prefix``)."""
    base = f"{prefix.rstrip('/')}/{table or '+'}"
    return [f"{base}/{s}" for s in ("status", "round", "results", "settlements", "alarms", "devices/+")]


def _cards_text(cards: list[tuple[str, str]]) -> Text:
    out = Text()
    by_pos: dict[str, list[str]] = {}
    for pos, card in cards:
        by_pos.setdefault(pos, []).append(card)
    for i, (pos, cs) in enumerate(by_pos.items()):
        if i:
            out.append("  ")
        out.append(f"{pos}: ", style="cyan")
        for j, c in enumerate(cs):
            if j:
                out.append(" ")
            out.append_text(_card(c))
    return out if cards else Text("(no cards yet)", style="dim")


def _result_text(r: RoundResults | None) -> Text:
    """The last round in one or two lines: the coup (baccarat), else every box with its pair result."""
    if r is None:
        return Text("(no round complete yet)", style="dim")
    if r.void:
        return Text(f"round {r.round}: VOID (every wager returned)", style="bold yellow")
    t = Text(f"round {r.round}: ")
    b = r.baccarat
    if b is not None:
        t.append("P ")
        for c in b.player:
            t.append_text(_card(c)).append(" ")
        t.append(f"= {b.player_total}  B ")
        for c in b.banker:
            t.append_text(_card(c)).append(" ")
        t.append(f"= {b.banker_total}  ")
        t.append(f"{b.winner.upper()} wins" if b.winner != "tie" else "TIE", style="bold green")
        flags = [n for n, on in (("natural P", b.player_natural), ("natural B", b.banker_natural),
                                 ("Player pair", b.player_pair), ("Banker pair", b.banker_pair),
                                 ("Dragon 7", b.dragon_7), ("Panda 8", b.panda_8)) if on]
        if flags:
            t.append("  " + ", ".join(flags), style="magenta")
    for i, box in enumerate(r.boxes):
        t.append("  " if i else "")
        t.append(f"{box.position}:", style="cyan")
        for c in box.cards:
            t.append_text(_card(c))
        if box.pair and "no_pair" not in box.pair:
            t.append(f" {box.pair}", style="magenta")
    if r.dealer:
        t.append("  dealer:", style="cyan")
        for c in r.dealer:
            t.append_text(_card(c))
    if r.board:
        t.append("  board:", style="cyan")
        for c in r.board:
            t.append_text(_card(c))
    return t


def _tally_table(view: TableView) -> Table:
    """Running win/loss per wager, players' side: no column is ever cut (names and amounts wrap, never
    end in an ellipsis), narrow enough for 80 columns."""
    tally = Table(title="win/loss per wager (players' side)", title_justify="left", box=None,
                  padding=(0, 1), pad_edge=False, show_edge=False, header_style="bold")
    names = [*view.tallies, "all"]
    tally.add_column("wager", justify="left", no_wrap=True, min_width=max(len(n) for n in names))
    for col in ("bets", "won", "lost", "push"):
        tally.add_column(col, justify="right", no_wrap=True)
    for col in ("staked", "net"):
        tally.add_column(col, justify="right", overflow="fold")
    total = BetTally()
    for bet, t in sorted(view.tallies.items()):
        tally.add_row(bet, str(t.wagers), str(t.wins), str(t.losses), str(t.pushes),
                      _money(t.staked, view.minor_unit, False), _money(t.net, view.minor_unit))
        total.wagers += t.wagers
        total.staked += t.staked
        total.net += t.net
        total.commission += t.commission
    if view.tallies:
        tally.add_row("all", str(total.wagers), "", "", "", _money(total.staked, view.minor_unit, False),
                      _money(total.net, view.minor_unit), style="bold")
    if total.commission:
        tally.caption = f"commission taken: {_money(total.commission, view.minor_unit, False)}"
        tally.caption_justify = "left"
    return tally


def _section(title: str, lines: list[str], room: int, style: str = "") -> Text | None:
    """``title`` and the last ``room - 1`` of ``lines``, each cut to one line; ``None`` without room."""
    if room < 2:
        return None
    shown = lines[-(room - 1):] if lines else ["(none yet)"]
    return Text(f"{title}\n  " + "\n  ".join(shown), style=style, no_wrap=True, overflow="ellipsis")


def render(view: TableView, *, width: int | None = None, height: int | None = None) -> Panel:
    """A rich panel for one table: status, current cards, last result, running totals per wager, then as
    many recent alarms, pair hits and settlements as the room allows.

    ``width``/``height``: the room the panel gets on screen (columns and lines, borders included); with
    ``height`` the panel never grows taller (sections are shortened, then left out), so a live view at
    80x24 shows the whole panel, its border included. Without them the panel is laid out for 80 columns
    and shows everything.
    """
    width = width or 80
    inner = max(20, width - 4)
    head = Text()
    head.append(f"{view.table}  ", style="bold")
    head.append(f"{view.game or '?'}  ")
    head.append(view.status, style="green" if view.status == "online" else "red")
    head.append(f"  shoe {view.shoe if view.shoe is not None else '-'} round "
                f"{view.round if view.round is not None else '-'}  {view.phase or '-'}"
                f"  cards left {view.cards_remaining}")
    head.append(f"\nrounds {view.rounds} (void {view.voided})")
    if view.devices:
        head.append("  " + " ".join(f"{n}:{s}" for n, s in sorted(view.devices.items())), style="dim")
    if view.held:
        head.append(f"  HELD {','.join(view.hold_codes)}", style="bold red")
    fixed: list[Any] = [
        head,
        Text.assemble(("cards: ", "bold"), _cards_text(view.cards)),
        Text.assemble(("last: ", "bold"), _result_text(view.last_result)),
        _tally_table(view),
    ]
    sections = [("alarms:", list(view.alarms), "yellow"), ("pair hits:", list(view.pair_hits), "magenta"),
                ("settlements:", list(view.recent)[-6:], "")]
    if height is None:
        room = {title: len(lines) + 1 for title, lines, _ in sections}
        limit = None
    else:
        measure = Console(width=inner, file=io.StringIO(), color_system=None)
        left = height - 2 - sum(len(measure.render_lines(p, measure.options, pad=False)) for p in fixed)
        room = {}
        for title, lines, _ in sections:  # in order of importance: alarms, pair hits, settlements
            wanted = len(lines) + 1 if lines or title != "alarms:" else 0
            room[title] = min(wanted, left) if left >= 2 else 0
            left -= room[title]
        limit = height if left < 0 else None  # even the fixed part is too tall: crop inside the border
    parts = fixed + [sec for title, lines, style in sections
                     if (sec := _section(title, lines, room[title], style)) is not None]
    return Panel(Group(*parts), title="tablesense", border_style="blue", width=width, height=limit)


class _Screen:
    """The live view's renderable: every table's panel, sharing the terminal's height."""

    def __init__(self, views: dict[str, TableView]) -> None:
        self.views = views

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.views:
            yield Text("waiting for a table...")
            return
        height = options.height or console.size.height
        each = max(8, height // len(self.views))
        for v in self.views.values():
            yield render(v, width=options.max_width, height=each)


def plain_line(message: Message, minor_unit: int = 2) -> str | None:
    """One plain-text line for ``--no-ui`` output, or ``None`` for messages not worth a line."""
    if isinstance(message, TableStatus):
        return f"[{message.table}] status {message.state}"
    if isinstance(message, RoundResults):
        r = message
        if r.void:
            return f"[{r.table}] round {r.shoe}/{r.round} VOID"
        if r.baccarat is not None:
            b = r.baccarat
            flags = ((" player-pair", b.player_pair), (" banker-pair", b.banker_pair))
            pairs = "".join(p for p, on in flags if on)
            return (f"[{r.table}] round {r.shoe}/{r.round} P {' '.join(b.player)} ={b.player_total} "
                    f"B {' '.join(b.banker)} ={b.banker_total} -> {b.winner}{pairs}")
        boxes = " ".join(f"{x.position}:{''.join(x.cards)}:{x.pair or '-'}" for x in r.boxes)
        return f"[{r.table}] round {r.shoe}/{r.round} {boxes} dealer {' '.join(r.dealer)}"
    if isinstance(message, SettlementMessage):
        m = message
        odds = f" at {m.odds}" if m.odds else ""
        stake = _money(m.stake, minor_unit, False)
        return (f"[{m.table}] settle r{m.round} seat {m.seat} {m.bet} stake {stake}"
                f" {m.outcome}{_category(m)}{odds} net {_money(m.net, minor_unit)}")
    if isinstance(message, AlarmMessage):
        a = message
        return f"[{a.table}] ALARM #{a.alarm_id} {a.code} {a.severity}: {a.text}"
    if isinstance(message, DeviceStatus):
        return f"[{message.table}] device {message.name} {message.state} {message.detail}".rstrip()
    return None


def summary_lines(view: TableView) -> list[str]:
    """The end-of-session summary: rounds, winners, and per wager the counts, stake and net; every line
    fits 80 columns for amounts up to 10 digits (a wide figure widens its column, never wraps a number)."""
    head = f"table {view.table} ({view.game}): {view.rounds} rounds settled, {view.voided} void,"
    counts = f"{view.settlements} settlements"
    dropped = f"{view.duplicates} duplicate messages dropped"
    lines = ([f"{head} {counts}", f"  {dropped}"] if len(head) + len(counts) < 80
             else [head, f"  {counts}, {dropped}"])
    if view.winners:
        lines.append("  winners: " + ", ".join(f"{k} {v}" for k, v in sorted(view.winners.items())))
    rows = [(bet, t, _money(t.staked, view.minor_unit, False), _money(t.net, view.minor_unit))
            for bet, t in sorted(view.tallies.items())]
    if rows:
        name_w = max(14, *(len(bet) for bet, *_ in rows))
        staked_w = max(12, *(len(st) for _, _, st, _ in rows))
        net_w = max(12, *(len(n) for *_, n in rows))
        lines.append(f"  {'wager':<{name_w}} {'bets':>5} {'won':>5} {'lost':>5} {'push':>4} "
                     f"{'staked':>{staked_w}} {'net':>{net_w}}")
        for bet, t, staked, net in rows:
            lines.append(f"  {bet:<{name_w}} {t.wagers:>5} {t.wins:>5} {t.losses:>5} {t.pushes:>4} "
                         f"{staked:>{staked_w}} {net:>{net_w}}")
        total = sum(t.net for _, t, *_ in rows)
        lines.append(f"  players' net over all wagers: {_money(total, view.minor_unit)} "
                     f"(house: {_money(-total, view.minor_unit)})")
    return lines


_FINAL_QUIET = 0.3
"""Seconds without a message after ``until`` is met before :func:`watch` returns (the final state)."""
_FINAL_MAX = 2.0
"""At most this many seconds of further messages are taken after ``until`` is met."""


async def watch(host: str, port: int, *, prefix: str = "tablesense", table: str | None = None,
                ui: bool = True, out: TextIO | None = None, minor_unit: int = 2,
                until: Callable[[dict[str, TableView]], bool] | None = None,
                on_message: Callable[[str, Message], None] | None = None,
                ready: asyncio.Event | None = None, console: Console | None = None,
                views: dict[str, TableView] | None = None,
                auth: BrokerAuth | None = None) -> dict[str, TableView]:
    """Subscribe to the public topics and show them until ``until(views)`` is true (or cancelled), then
    take the messages that follow at once (until 0.3 s pass without one, at most 2 s), so the last
    frame shows the final state, not the one the condition was met in.

    ``ui``: a rich live view; else one plain line per message on ``out`` (default stdout).
    Connects with MQTT 3.1.1 (works with every broker; no v5 feature is needed to read), reconnecting
    on loss. ``ready`` is set once subscribed. Returns the views by table id (``views``: a dict to fill,
    so a caller that cancels still has them). ``auth``: TLS and user name/password for the broker
    (:class:`daemon.broker_auth.BrokerAuth`; default plain TCP, anonymous).
    Raises ``aiomqtt.MqttError`` only if the first connection fails.
    """
    if views is None:
        views = {}
    con = console or Console(file=out)
    live = Live(console=con, refresh_per_second=8, transient=False, vertical_overflow="crop") if ui else None
    stream = out

    screen = _Screen(views)

    def show() -> None:
        if live is not None:
            live.update(screen, refresh=False)

    connected_once = False
    loop = asyncio.get_running_loop()
    with live if live is not None else contextlib.nullcontext():
        show()
        while True:
            try:
                async with aiomqtt.Client(host, port, protocol=aiomqtt.ProtocolVersion.V311,
                                          keepalive=15, socket_options=NODELAY,
                                          **(auth or BrokerAuth()).client_kwargs()) as client:
                    connected_once = True
                    for f in public_filters(prefix, table):
                        await client.subscribe(f, qos=1)
                    if ready is not None:
                        ready.set()
                    messages = client.messages
                    finishing_since: float | None = None
                    while True:
                        if finishing_since is None:
                            m = await anext(messages)
                        else:
                            # ``until`` is met: take what the daemon publishes right after (the round
                            # state with the last card, the results) so the last frame is the final state.
                            left = finishing_since + _FINAL_MAX - loop.time()
                            try:
                                m = await wait_at_most(anext(messages), min(_FINAL_QUIET, max(left, 0)))
                            except TimeoutError:
                                show()
                                return views
                        payload = m.payload if isinstance(m.payload, bytes | bytearray) else b""
                        try:
                            msg = decode_message(bytes(payload))
                        except (msgspec.DecodeError, msgspec.ValidationError):
                            continue
                        v = views.get(msg.table)
                        if v is None:
                            v = views[msg.table] = TableView(msg.table, minor_unit=minor_unit)
                        if not v.apply(msg):
                            continue
                        if on_message is not None:
                            on_message(str(m.topic), msg)
                        if live is None:
                            line = plain_line(msg, minor_unit)
                            if line is not None:
                                print(line, file=stream, flush=True)
                        else:
                            show()
                        if finishing_since is None and until is not None and until(views):
                            finishing_since = loop.time()
            except aiomqtt.MqttError:
                if not connected_once:
                    raise
                await asyncio.sleep(0.5)
