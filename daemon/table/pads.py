"""The bet pads as sensed: each spot's state and amount, and the wagers locked from a snapshot.

Past-posting: a change of a spot after lock is "a bet placed, removed, or its amount changed";
a pad going from ``placed`` to ``locked`` with the same amount is not a change. Presence-only pads
report no amount: the spot's configured ``nominal_stake`` (default: the wager's table minimum) is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from tablesense.daemon.config import TableConfig
from tablesense.daemon.rules.settlement import Bet, Hand
from tablesense.daemon.table.game import LockedWager
from tablesense.drivers.events import SpotChanged, SpotState

__all__ = ["PadState", "Pads"]


@dataclass(frozen=True, slots=True)
class PadState:
    """What a spot holds: ``present`` and the sensed ``amount`` (``None`` on presence-only pads)."""

    present: bool
    amount: int | None

    @property
    def key(self) -> tuple[bool, int | None]:
        """Comparable form (``placed`` and ``locked`` with the same amount are the same bet)."""
        return (self.present, self.amount if self.present else None)


_EMPTY = PadState(False, None)


class Pads:
    """Every spot's last sensed state."""

    def __init__(self) -> None:
        self._spots: dict[str, PadState] = {}
        self._terms: tuple[TableConfig, dict[str, tuple[Bet, Hand | None]]] | None = None
        """Each spot's bet and hand as the rules name them, for the config last locked with."""

    def get(self, spot: str) -> PadState:
        """The spot's state (empty when never reported)."""
        return self._spots.get(spot, _EMPTY)

    def update(self, ev: SpotChanged) -> tuple[PadState, PadState]:
        """Apply a spot change; return ``(before, after)``."""
        before = self.get(ev.spot)
        present = ev.state in (SpotState.PLACED, SpotState.LOCKED) and (ev.amount is None or ev.amount > 0)
        after = PadState(present, ev.amount if present else None)
        self._spots[ev.spot] = after
        return before, after

    def stake(self, config: TableConfig, spot: str) -> tuple[int, bool] | None:
        """The stake the spot holds and whether it is presence-only, or ``None`` when empty."""
        st = self.get(spot)
        conf = config.spots.get(spot)
        if not st.present or conf is None:
            return None
        if st.amount is not None:
            return st.amount, False
        nominal = conf.nominal_stake or config.wagers[conf.bet].min
        return nominal, True

    def lock(self, config: TableConfig) -> list[LockedWager]:
        """The wagers on the configured spots now, in config order (the bet-pad snapshot at lock)."""
        if self._terms is None or self._terms[0] is not config:
            self._terms = config, {spot: (Bet(conf.bet), Hand(conf.hand) if conf.hand else None)
                                   for spot, conf in config.spots.items()}
        terms = self._terms[1]
        out = []
        for spot, conf in config.spots.items():
            held = self.stake(config, spot)
            if held is None:
                continue
            bet, hand = terms[spot]
            out.append(LockedWager(spot, conf.seat, bet, hand, held[0], held[1]))
        return out

    def snapshot(self) -> dict[str, tuple[bool, int | None]]:
        """Every reported spot, sorted (for tests and recall)."""
        return {k: self._spots[k].key for k in sorted(self._spots)}
