"""The baccarat scoreboard: the five roads and the shoe statistics, from the round results of one shoe.

Pure: no I/O, no clock. The daemon feeds it one :class:`RoundOutcome` per completed (not void) round and
publishes :meth:`Scoreboard.snapshot` retained on ``{prefix}/{table}/scoreboard`` so every display draws
the same roads, and one that starts late is complete at once.

Rules implemented (docs/rules.md §5.2, from the OG roadmap rules, the Sikwin five-road
rules, the Gamicorp bead-plate rules, 138qiu's Big Road description and toewailin/baccarat-roadmap):

* **Bead plate**: one cell per round including ties, in strict order, 6 rows high, filled top to
  bottom and then the next column to the right; Player pair, Banker pair and natural markers.
* **Big Road**: Banker/Player cells only. The same winner as the previous non-tie result goes one row
  down in the same column; a change of winner starts the top row of a new column. Ties take no cell:
  they are counted on the most recent cell. Ties before the first non-tie result (rules.md leaves this
  to the implementation) are recorded in :attr:`Roads.leading_ties` and counted on the first cell
  once it exists. A streak longer than the free rows turns right ("dragon tail").
* **Derived roads** (Big Eye Boy k=1, Small Road k=2, Cockroach Pig k=3): one mark per Big Road cell from
  the road's start cell on, computed from the Big Road's *logical* columns (streak lengths L₁, L₂, …),
  never from the drawn grid. For a new cell in row r of logical column c: r = 1 → red if
  L(c−1) = L(c−1−k) else blue; r ≥ 2 → red if L(c−k) ≥ r, blue if L(c−k) = r−1, red if
  L(c−k) ≤ r−2 (the "straight drop"). The first mark therefore falls at Big Road column k+1 row 2, or, if
  that cell never exists, column k+2 row 1. Red/blue mean "regular"/"irregular", not Banker/Player.
  Marks are laid out like the Big Road (same colour → down, change → new column, dragon tail).

Coordinates in the snapshot are the *drawn* grid: ``col`` from 0 (leftmost) to the right without bound
(a display shows the last columns that fit), ``row`` 0 (top) to 5 (bottom).

The message models (:class:`Roads`, its cells, :class:`ScoreboardMessage`) are defined with every other
published message in :mod:`daemon.messages` (one definition, one generated JSON Schema) and re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from tablesense.daemon.messages import (
    GRID_ROWS,
    SCOREBOARD_SCHEMA,
    BeadCell,
    BigRoadCell,
    DerivedCell,
    MarkColour,
    Roads,
    RoundResults,
    ScoreboardMessage,
    ShoeStats,
    Winner,
)

__all__ = [
    "DERIVED_ROADS",
    "GRID_ROWS",
    "SCOREBOARD_SCHEMA",
    "BeadCell",
    "BigRoadCell",
    "DerivedCell",
    "MarkColour",
    "Roads",
    "RoundOutcome",
    "Scoreboard",
    "ScoreboardMessage",
    "ShoeStats",
    "Winner",
    "derived_colour",
]

DERIVED_ROADS: dict[str, int] = {"big_eye_boy": 1, "small_road": 2, "cockroach_pig": 3}
"""Derived road name -> offset k (rules.md §5.2: Big Eye Boy k=1, Small Road k=2, Cockroach Pig k=3)."""


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    """What the scoreboard needs from one baccarat round's results.

    Attributes:
        winner: Banker, Player or Tie.
        player_pair / banker_pair: the hand's first two cards are of identical rank (58 Pa. Code
            § 631a.8(a)(7)(i)); any grade of pair counts.
        natural: either hand has a natural (point count 8 or 9 on its first two cards, § 631a.11).
        player_total / banker_total: final point counts (0-9), if known; shown on the bead plate.
        shoe: the shoe id; a different shoe id from the one on the board resets the board first.
        round: the round number within the shoe; an outcome whose (shoe, round) was already added is
            ignored, so a replayed results message cannot count twice.
        void: a void round (misdeal etc.) never appears on any road and is ignored.
        cards_remaining: cards left in the shoe after the round, if the daemon knows it.
    """

    winner: Winner
    player_pair: bool = False
    banker_pair: bool = False
    natural: bool = False
    player_total: int | None = None
    banker_total: int | None = None
    shoe: int | None = None
    round: int | None = None
    void: bool = False
    cards_remaining: int | None = None

    @classmethod
    def from_results(cls, results: RoundResults) -> RoundOutcome | None:
        """The outcome in a ``tablesense.results`` message, or ``None`` when it has no baccarat coup
        (another game, or a round void before the coup was known). A void round gives ``void=True``."""
        bac = results.baccarat
        if bac is None:
            return cls(winner=Winner.TIE, shoe=results.shoe, round=results.round, void=True) \
                if results.void else None
        return cls(winner=Winner(bac.winner), player_pair=bac.player_pair, banker_pair=bac.banker_pair,
                   natural=bac.player_natural or bac.banker_natural, player_total=bac.player_total,
                   banker_total=bac.banker_total, shoe=results.shoe, round=results.round,
                   void=results.void)


def derived_colour(lengths: list[int], streak: int, depth: int, k: int) -> MarkColour | None:
    """The mark a derived road with offset ``k`` adds for the Big Road cell at (``streak``, ``depth``).

    ``lengths`` are the logical streak lengths L₁… (``lengths[0]`` = L₁), including the current streak.
    Returns ``None`` when the reference columns do not exist yet (before the road's start cell).
    Implements rules.md §5.2 "Derived roads" exactly, including the straight-drop rule.
    """
    if depth == 1:
        if streak - 1 - k < 1:
            return None
        return MarkColour.RED if lengths[streak - 2] == lengths[streak - 2 - k] else MarkColour.BLUE
    if streak - k < 1:
        return None
    ref = lengths[streak - k - 1]
    if ref >= depth:
        return MarkColour.RED
    if ref == depth - 1:
        return MarkColour.BLUE
    return MarkColour.RED  # straight drop: the reference column ended two or more rows above


@dataclass(slots=True)
class _Grid:
    """Big-Road-style placement: same key → down, new key → new column, dragon tail to the right."""

    rows: int = GRID_ROWS
    occupied: set[tuple[int, int]] = field(default_factory=set)
    last: tuple[int, int] | None = None
    last_key: str | None = None
    top_col: int = -1  # rightmost column whose top cell is taken
    tailing: bool = False  # the current streak has turned right; it stays on its row

    def place(self, key: str) -> tuple[int, int]:
        if self.last is None or self.last_key is None:
            pos = (0, 0)
        elif key == self.last_key:
            col, row = self.last
            if not self.tailing and row + 1 < self.rows and (col, row + 1) not in self.occupied:
                pos = (col, row + 1)
            else:  # dragon tail: turn right and keep to this row
                self.tailing = True
                col += 1
                while (col, row) in self.occupied:
                    col += 1
                pos = (col, row)
        else:
            self.tailing = False
            pos = (self.top_col + 1, 0)
        self.occupied.add(pos)
        if pos[1] == 0:
            self.top_col = max(self.top_col, pos[0])
        self.last, self.last_key = pos, key
        return pos


class Scoreboard:
    """The roads and statistics of the current shoe, updated one round at a time.

    Usage: ``board.add(outcome)`` after each round's results; ``board.snapshot()`` (a :class:`Roads`)
    or ``board.to_dict()`` (plain JSON-ready dict) to publish. A new shoe id resets the board; so does
    :meth:`reset` (call it on the shoe's "new shoe" event).
    """

    def __init__(self, rows: int = GRID_ROWS) -> None:
        if rows < 1:
            raise ValueError(f"rows must be at least 1, not {rows}")
        self._rows = rows
        self.reset()

    def reset(self, shoe: int | None = None) -> None:
        """Clear every road and statistic and start shoe ``shoe``."""
        self._shoe = shoe
        self._seen: set[tuple[int | None, int]] = set()
        self._bead: list[BeadCell] = []
        self._big: list[BigRoadCell] = []
        self._big_grid = _Grid(self._rows)
        self._lengths: list[int] = []
        self._derived: dict[str, list[DerivedCell]] = {name: [] for name in DERIVED_ROADS}
        self._derived_grid = {name: _Grid(self._rows) for name in DERIVED_ROADS}
        self._leading_ties = 0
        self._counts = {"banker": 0, "player": 0, "tie": 0, "player_pair": 0, "banker_pair": 0,
                        "naturals": 0}
        self._cards_remaining: int | None = None
        self._last_round: int | None = None

    @property
    def shoe(self) -> int | None:
        """The shoe id the board shows (``None`` until one is known)."""
        return self._shoe

    @property
    def last_round(self) -> int | None:
        """Round number of the last outcome added, if it had one."""
        return self._last_round

    def add(self, outcome: RoundOutcome) -> bool:
        """Record one round. Returns ``True`` if the board changed.

        A void round, or a (shoe, round) already recorded, is ignored (returns ``False``). An outcome of
        another shoe than the board's resets the board first.
        """
        if outcome.void:
            return False
        if outcome.shoe is not None and outcome.shoe != self._shoe:
            self.reset(outcome.shoe)
        if outcome.round is not None:
            key = (outcome.shoe, outcome.round)
            if key in self._seen:
                return False
            self._seen.add(key)
            self._last_round = outcome.round
        winner = Winner(outcome.winner)
        self._count(outcome, winner)
        self._add_bead(outcome, winner)
        if winner is Winner.TIE:
            self._add_tie()
        else:
            self._add_big(outcome, winner)
        return True

    def add_results(self, results: RoundResults) -> bool:
        """Record a ``tablesense.results`` message (see :meth:`RoundOutcome.from_results`); returns
        ``True`` if the board changed. Messages of other games and void rounds change nothing."""
        outcome = RoundOutcome.from_results(results)
        return outcome is not None and self.add(outcome)

    def set_cards_remaining(self, cards: int | None) -> None:
        """Update the cards-remaining statistic (e.g. from the public round state between rounds)."""
        self._cards_remaining = cards

    def _count(self, o: RoundOutcome, winner: Winner) -> None:
        self._counts[winner.value] += 1
        self._counts["player_pair"] += o.player_pair
        self._counts["banker_pair"] += o.banker_pair
        self._counts["naturals"] += o.natural
        if o.cards_remaining is not None:
            self._cards_remaining = o.cards_remaining

    def _add_bead(self, o: RoundOutcome, winner: Winner) -> None:
        i = len(self._bead)
        total = o.player_total if winner is Winner.PLAYER else o.banker_total
        self._bead.append(BeadCell(col=i // self._rows, row=i % self._rows, result=winner,
                                   player_pair=o.player_pair, banker_pair=o.banker_pair,
                                   natural=o.natural, total=total, round=o.round))

    def _add_tie(self) -> None:
        if not self._big:
            self._leading_ties += 1
            return
        last = self._big[-1]
        self._big[-1] = msgspec.structs.replace(last, ties=last.ties + 1)

    def _add_big(self, o: RoundOutcome, winner: Winner) -> None:
        if self._big and self._big[-1].winner is winner:
            self._lengths[-1] += 1
        else:
            self._lengths.append(1)
        streak, depth = len(self._lengths), self._lengths[-1]
        col, row = self._big_grid.place(winner.value)
        ties = self._leading_ties if not self._big else 0
        self._big.append(BigRoadCell(col=col, row=row, winner=winner, streak=streak, depth=depth,
                                     ties=ties, player_pair=o.player_pair, banker_pair=o.banker_pair,
                                     natural=o.natural, round=o.round))
        for name, k in DERIVED_ROADS.items():
            colour = derived_colour(self._lengths, streak, depth, k)
            if colour is None:
                continue
            dcol, drow = self._derived_grid[name].place(colour.value)
            self._derived[name].append(DerivedCell(col=dcol, row=drow, colour=colour,
                                                   big_road_streak=streak, big_road_depth=depth))

    def stats(self) -> ShoeStats:
        """The shoe statistics so far."""
        c = self._counts
        return ShoeStats(rounds=c["banker"] + c["player"] + c["tie"], banker=c["banker"],
                         player=c["player"], tie=c["tie"], player_pair=c["player_pair"],
                         banker_pair=c["banker_pair"], naturals=c["naturals"],
                         cards_remaining=self._cards_remaining)

    def snapshot(self) -> Roads:
        """An immutable copy of the whole board (msgspec Struct, encodable with ``msgspec.json``)."""
        return Roads(shoe=self._shoe, rows=self._rows, bead_plate=list(self._bead),
                     big_road=list(self._big), big_eye_boy=list(self._derived["big_eye_boy"]),
                     small_road=list(self._derived["small_road"]),
                     cockroach_pig=list(self._derived["cockroach_pig"]),
                     leading_ties=self._leading_ties, stats=self.stats())

    def to_dict(self) -> dict[str, Any]:
        """The board as plain JSON-ready builtins (the shape of :class:`Roads`)."""
        result: dict[str, Any] = msgspec.to_builtins(self.snapshot())
        return result

    def message(self, table: str, *, ts: str, seq: int = 0, msg_id: str = "") -> ScoreboardMessage:
        """A :class:`ScoreboardMessage` for ``table`` carrying the current board; envelope values
        (``ts`` of the results that caused it, ``seq``, ``msg_id``) come from the caller, since this module
        reads no clock (the journal assigns ``seq``/``msg_id`` like for every other message)."""
        return ScoreboardMessage(table=table, seq=seq, msg_id=msg_id, ts=ts, shoe=self._shoe,
                                 round=self._last_round, roads=self.snapshot())
