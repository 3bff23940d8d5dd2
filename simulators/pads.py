"""Virtual bet-sensor pads: one sensor per betting spot plus the dealer's buttons.

Pure model (no I/O, no clock). RFID pads report each spot's amount in minor units; presence-only pads
report only that chips are there (amount ``?`` on the wire, ``None`` in events), so a change of amount
on an occupied spot is invisible to them (docs/protocol.md).

Round flow: bets are placed (``$SP ... PLACED``), the dealer presses no more bets (``$BT NO_MORE_BETS``,
then each occupied spot reports ``LOCKED``), cards are dealt, the dealer presses round end
(``$BT ROUND_END``), chips are paid or collected (spots report ``EMPTY``). A bet changed after no more
bets is past-posting (§2.3): the pad still reports it (``PLACED`` with the new amount), and it is the
daemon's job to flag it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from tablesense.drivers.events import Button, DealerButton, SpotChanged, SpotState
from tablesense.simulators.device_model import VirtualDevice

__all__ = ["VirtualPads"]


class VirtualPads(VirtualDevice):
    """Bet-sensor pads for the spots ``spots`` (names such as ``"P1"``, ``"banker"``; 1-16 of
    A-Z a-z 0-9 _ . -).

    Args:
        spots: the spot names, in reporting order.
        rfid: ``True`` for chip-reading pads (amounts in minor units), ``False`` for presence-only pads.
        device, vendor, model, firmware, serial, start_seq, session: see :class:`VirtualDevice`.

    Raises:
        ValueError: no spots, a duplicate spot name.

    Attributes:
        bets: the true amount on each spot in minor units (0 when empty), including what a presence-only
            pad cannot see.
        locked: ``True`` between no more bets and the end of the round.
    """

    def __init__(self, spots: Sequence[str], rfid: bool = True, *, device: str = "pads",
                 vendor: str = "tablesense", model: str = "virtual-pads", firmware: str = "1.0",
                 serial: str = "VP-0001", start_seq: int = 0,
                 session: str | None = None) -> None:
        super().__init__(device=device, vendor=vendor, model=model, firmware=firmware, serial=serial,
                         start_seq=start_seq, session=session)
        if not spots:
            raise ValueError("pads need at least one spot")
        if len(set(spots)) != len(spots):
            raise ValueError(f"duplicate spot names in {list(spots)}")
        self.spots = list(spots)
        self.rfid = rfid
        self.bets: dict[str, int] = dict.fromkeys(self.spots, 0)
        self.state: dict[str, SpotState] = dict.fromkeys(self.spots, SpotState.EMPTY)
        self.locked = False

    def _spot(self, spot: str) -> str:
        if spot not in self.bets:
            raise ValueError(f"no spot {spot!r} on these pads (spots: {', '.join(self.spots)})")
        return spot

    def _report(self, spot: str, state: SpotState) -> bytes:
        self.state[spot] = state
        amount = self.bets[spot] if self.rfid else None
        return self.emit(lambda s: SpotChanged(self.device, s, spot, state, amount))

    def place(self, spot: str, amount: int) -> bytes:
        """Set the bet on ``spot`` to ``amount`` minor units (> 0); ``$SP,<seq>,spot,PLACED,amount``.

        A presence-only pad sends nothing when the spot was already occupied (it cannot see the amount
        change). After no more bets this is a past-post and is reported all the same.

        Raises:
            ValueError: unknown spot, or an amount that is not a positive integer.
        """
        self._spot(spot)
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise ValueError(f"bet amount must be a positive integer of minor units, got {amount!r}")
        was = self.bets[spot]
        self.bets[spot] = amount
        if not self.rfid and was > 0 and self.state[spot] is SpotState.PLACED:
            return b""
        if self.rfid and was == amount and self.state[spot] is SpotState.PLACED:
            return b""
        return self._report(spot, SpotState.PLACED)

    def remove(self, spot: str) -> bytes:
        """Take the chips off ``spot``: ``$SP,<seq>,spot,EMPTY,0`` (``?`` on presence-only pads).
        Nothing is sent if the spot was already empty."""
        self._spot(spot)
        if self.bets[spot] == 0 and self.state[spot] is SpotState.EMPTY:
            return b""
        self.bets[spot] = 0
        return self._report(spot, SpotState.EMPTY)

    def press(self, button: Button) -> bytes:
        """The dealer presses ``button``: ``$BT,<seq>,<BUTTON>``."""
        return self.emit(lambda s: DealerButton(self.device, s, button))

    def no_more_bets(self) -> bytes:
        """No more bets: the button frame, then ``LOCKED`` for each occupied spot."""
        out = self.press(Button.NO_MORE_BETS)
        self.locked = True
        for spot in self.spots:
            if self.bets[spot] > 0:
                out += self._report(spot, SpotState.LOCKED)
        return out

    def past_post(self, spot: str, amount: int) -> bytes:
        """A bet changed after no more bets (past-posting): ``amount`` > 0 sets the spot to that amount,
        0 removes the chips. Raises ``ValueError`` before no more bets (it would just be a bet)."""
        if not self.locked:
            raise ValueError("past-posting needs the spots locked (press no more bets first)")
        return self.place(spot, amount) if amount else self.remove(spot)

    def round_end(self) -> bytes:
        """Reveal / round end button."""
        return self.press(Button.ROUND_END)

    def void_round(self) -> bytes:
        """Void round button."""
        return self.press(Button.VOID_ROUND)

    def clear(self) -> bytes:
        """Chips paid or collected: every occupied spot reports ``EMPTY``; the spots unlock."""
        out = b""
        for spot in self.spots:
            out += self.remove(spot)
        self.locked = False
        return out

    def open_round(self, wagers: Mapping[str, int]) -> bytes:
        """Place the scripted ``wagers`` (spot -> minor units), in the mapping's order."""
        return b"".join(self.place(spot, amount) for spot, amount in wagers.items())

    def round_phases(self, wagers: Mapping[str, int], past_post: Mapping[str, int] | None = None,
                     void: bool = False) -> Iterator[tuple[str, bytes]]:
        """A whole scripted round as named phases ``(phase, frames)``, each made (and its frames
        numbered) only when the iterator is advanced: ``"bets"``, ``"no_more_bets"``, optionally
        ``"past_post"`` (changes after the lock), then ``"round_end"`` (or ``"void_round"``) and
        ``"clear"``. A sender that writes each phase as it is made keeps the wire in sequence order even
        when it sends other frames (heartbeats, status answers) between phases."""
        yield "bets", self.open_round(wagers)
        yield "no_more_bets", self.no_more_bets()
        if past_post:
            yield "past_post", b"".join(self.past_post(s, a) for s, a in past_post.items())
        yield ("void_round", self.void_round()) if void else ("round_end", self.round_end())
        yield "clear", self.clear()

    def play_round(self, wagers: Mapping[str, int], past_post: Mapping[str, int] | None = None,
                   void: bool = False) -> list[tuple[str, bytes]]:
        """All of :meth:`round_phases` at once, ``[(phase, frames), ...]``, numbered up front: only for
        a caller that sends nothing else between the phases (e.g. writing a capture file); a live
        device wrapper must use :meth:`round_phases` (or one heartbeat between phases would carry a
        higher sequence number than frames still to be written: a sequence gap at the host)."""
        return list(self.round_phases(wagers, past_post, void))

    def state_frames(self) -> bytes:
        """After the identity in a status answer: one ``$SP`` frame for every spot (empty ones too)."""
        return b"".join(self._report(spot, self.state[spot]) for spot in self.spots)
