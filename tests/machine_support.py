"""Helpers for the round state machine tests: small configs and a driver that stamps inputs.

The driver numbers each device's events (``seq``) and stamps inputs with increasing ISO-8601 times, so
tests read as a dealer's actions. No mocks: the real machine, config parser and rules core run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import msgspec

from tablesense.daemon.config import TableConfig, parse_config
from tablesense.daemon.messages import (
    AlarmMessage,
    FloorRound,
    Message,
    RoundResults,
    RoundState,
    SettlementMessage,
)
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.table import Channel, Command, CommandReply, Emit, TableMachine, TimedInput
from tablesense.daemon.table.inputs import PUBLIC_CHANNELS
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    CardUnreadable,
    DealerButton,
    DeviceState,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)

SHOE = "shoe"
PADS = "pads"

_DEVICES = """
[devices.shoe]
url = "/dev/null"
role = "shoe"
[devices.pads]
url = "/dev/null"
role = "pads"
"""


def baccarat_config(*, decks: int = 8, burn: str = 'mode = "shoe"', start: str = "card",
                    game: str = "baccarat", extra: str = "") -> TableConfig:
    """Seats 1-2; spots ``1P`` player, ``1B`` banker, ``1T`` tie, ``1PP``/``1BP`` perfect pairs,
    ``1HM`` house money, ``2P`` player, ``2PP`` perfect pairs (presence-only, nominal 500)."""
    commission = '[commission]\nrate = "5%"\n' if game == "baccarat" else ""
    return parse_config(f"""
table = "t1"
game = "{game}"
decks = {decks}
currency = "EUR"
seats = ["1", "2"]
{commission}
[wagers.player]
min = 100
max = 100000
[wagers.banker]
min = 100
max = 100000
[wagers.tie]
[wagers.perfect_pairs]
paytable = "A"
min = 100
max = 5000
[wagers.house_money]
[spots]
"1P" = {{ seat = "1", bet = "player" }}
"1B" = {{ seat = "1", bet = "banker" }}
"1T" = {{ seat = "1", bet = "tie" }}
"1PP" = {{ seat = "1", bet = "perfect_pairs", hand = "player" }}
"1BP" = {{ seat = "1", bet = "perfect_pairs", hand = "banker" }}
"1HM" = {{ seat = "1", bet = "house_money" }}
"2P" = {{ seat = "2", bet = "player" }}
"2PP" = {{ seat = "2", bet = "perfect_pairs", hand = "player", nominal_stake = 500 }}
{_DEVICES}
[burn]
{burn}
[round]
start = "{start}"
{extra}
""")


def blackjack_config(*, hole_card: bool = True, decks: int = 6, start: str = "button") -> TableConfig:
    """Boxes 1-5, each with ``B{n}`` (blackjack) and ``PP{n}`` (perfect pairs) spots."""
    spots = "\n".join(f'"B{n}" = {{ seat = "{n}", bet = "blackjack" }}\n'
                      f'"PP{n}" = {{ seat = "{n}", bet = "perfect_pairs" }}' for n in range(1, 6))
    return parse_config(f"""
table = "bj"
game = "blackjack"
decks = {decks}
seats = ["1", "2", "3", "4", "5"]
[wagers.blackjack]
min = 100
max = 100000
[wagers.perfect_pairs]
paytable = "25-12-6"
min = 100
max = 10000
[spots]
{spots}
{_DEVICES}
[blackjack]
hole_card = {"true" if hole_card else "false"}
[round]
start = "{start}"
""")


def uth_config(*, deal: str = "card_by_card", board: str = "after", burns: int = 0,
               paytable: str = "F") -> TableConfig:
    """Seats 1-3, each with ``A{n}`` (ante) and ``U{n}`` (ultimate pairs) spots."""
    spots = "\n".join(f'"A{n}" = {{ seat = "{n}", bet = "ante" }}\n'
                      f'"U{n}" = {{ seat = "{n}", bet = "ultimate_pairs" }}' for n in range(1, 4))
    return parse_config(f"""
table = "uth"
game = "uth"
seats = ["1", "2", "3"]
[wagers.ante]
min = 100
max = 100000
[wagers.ultimate_pairs]
paytable = "{paytable}"
min = 100
max = 10000
[spots]
{spots}
{_DEVICES}
[uth]
deal = "{deal}"
board = "{board}"
burn_before_board = {burns}
[round]
start = "button"
""")


class Driver:
    """Feeds a :class:`TableMachine` and keeps every emit and input."""

    def __init__(self, config: TableConfig, shoe: int = 1) -> None:
        self.machine = TableMachine(config, shoe=shoe)
        self.config = config
        self.inputs: list[TimedInput] = []
        self.emits: list[Emit] = []
        self.replies: list[CommandReply] = []
        self._seq: dict[str, int] = {}
        self._clock = 0

    def _ts(self) -> str:
        self._clock += 1
        h, rest = divmod(self._clock, 3600)
        return f"2026-11-29T{h % 24:02d}:{rest // 60:02d}:{rest % 60:02d}Z"

    def seq(self, device: str, skip: int = 0) -> int:
        """The device's next sequence number (``skip`` numbers left out: a gap)."""
        self._seq[device] = self._seq.get(device, 0) + 1 + skip
        return self._seq[device]

    def feed(self, event: Any) -> list[Emit]:
        """Hand one event (device event, device state or command) to the machine."""
        inp = TimedInput(self._ts(), event)
        self.inputs.append(inp)
        if isinstance(event, Command):
            reply, out = self.machine.handle_command(inp)
            self.replies.append(reply)
        else:
            out = self.machine.handle(inp)
        self.emits += out
        return out

    def card(self, text: str, skip: int = 0) -> list[Emit]:
        """A card out of the shoe."""
        return self.feed(CardDrawn(SHOE, self.seq(SHOE, skip), Card.parse(text)))

    def cards(self, texts: Iterable[str]) -> list[Emit]:
        """Several cards, one input each."""
        out: list[Emit] = []
        for t in texts.split() if isinstance(texts, str) else texts:
            out += self.card(t)
        return out

    def unreadable(self) -> list[Emit]:
        """A card out of the shoe that could not be read."""
        return self.feed(CardUnreadable(SHOE, self.seq(SHOE)))

    def status(self, kind: ShoeStatusKind, card: str | None = None) -> list[Emit]:
        """A shoe status frame."""
        return self.feed(ShoeStatus(SHOE, self.seq(SHOE), kind, Card.parse(card) if card else None))

    def bet(self, spot: str, amount: int | None, state: SpotState = SpotState.PLACED) -> list[Emit]:
        """A spot change on the pads (``amount=None``: presence-only)."""
        return self.feed(SpotChanged(PADS, self.seq(PADS), spot, state, amount))

    def remove(self, spot: str) -> list[Emit]:
        """A spot emptied."""
        return self.feed(SpotChanged(PADS, self.seq(PADS), spot, SpotState.EMPTY, None))

    def button(self, button: Button) -> list[Emit]:
        """A dealer button."""
        return self.feed(DealerButton(PADS, self.seq(PADS), button))

    def link(self, device: str, state: LinkState) -> list[Emit]:
        """A driver's link state."""
        return self.feed(DeviceState(device, state))

    def command(self, name: str, operator: str = "supervisor-7", **args: str) -> CommandReply:
        """An operator command; returns the reply."""
        self.feed(Command(name, args, operator))
        return self.replies[-1]

    # --- reading the emits -------------------------------------------------------------------------

    def messages(self, channel: Channel, emits: list[Emit] | None = None) -> list[Any]:
        """Messages emitted on ``channel`` (all so far, or in ``emits``)."""
        return [e.message for e in (self.emits if emits is None else emits) if e.channel is channel]

    def settlements(self, emits: list[Emit] | None = None) -> list[SettlementMessage]:
        """Settlement messages."""
        return self.messages(Channel.SETTLEMENTS, emits)

    def alarms(self, emits: list[Emit] | None = None) -> list[AlarmMessage]:
        """Alarm messages."""
        return self.messages(Channel.ALARMS, emits)

    def codes(self, emits: list[Emit] | None = None) -> list[str]:
        """Codes of raised alarms."""
        return [a.code for a in self.alarms(emits) if a.state == "raised"]

    def results(self) -> list[RoundResults]:
        """Results messages."""
        return self.messages(Channel.RESULTS)

    def floor(self) -> list[FloorRound]:
        """Floor round records."""
        return self.messages(Channel.FLOOR_ROUNDS)

    @property
    def state(self) -> RoundState:
        """The machine's public round state."""
        return self.machine.public_state

    def public_cards(self) -> list[str]:
        """The cards in the public round state."""
        return [c.card for c in self.state.cards]


def public_payloads(emits: Iterable[Emit]) -> list[bytes]:
    """The JSON of every message on a public channel (for information-barrier scans)."""
    return [msgspec.json.encode(e.message) for e in emits if e.channel in PUBLIC_CHANNELS]


def card_tokens(payload: bytes) -> set[str]:
    """Every JSON string in ``payload`` that reads as a card (e.g. ``"AS"``)."""
    found: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, str):
            with contextlib.suppress(ValueError):
                found.add(str(Card.parse(v)))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(msgspec.json.decode(payload))
    return found


def encode_all(emits: Iterable[Emit]) -> list[tuple[str, str | None, bool, int, bytes]]:
    """Emits as comparable tuples (channel, device, retain, qos, JSON)."""
    return [(e.channel.value, e.device, e.retain, e.qos, msgspec.json.encode(e.message)) for e in emits]


__all__ = ["PADS", "SHOE", "Driver", "Message", "baccarat_config", "blackjack_config", "card_tokens",
           "encode_all", "public_payloads", "uth_config"]


def blackjack_locked() -> Driver:
    """A new blackjack shoe, box 1 with its blackjack (1000) and Perfect Pairs (500) wagers, no more bets
    pressed: the start of the held-round tests (tests/test_adversarial_*_held*.py)."""
    d = Driver(blackjack_config())
    d.status(ShoeStatusKind.NEW_SHOE)
    d.bet("B1", 1000)
    d.bet("PP1", 500)
    d.button(Button.NO_MORE_BETS)
    return d


def leaked(d: Driver, *cards: str) -> list[bytes]:
    """The public payloads among ``d``'s emits that name any of ``cards`` (face-down cards: must be none)."""
    return [p for p in public_payloads(d.emits) if card_tokens(p) & set(cards)]


def raised_alarm(d: Driver, code: str) -> str:
    """The id of the last raised alarm of ``code`` (for ``ack_alarm``)."""
    return [a.alarm_id for a in d.alarms() if a.code == code and a.state == "raised"][-1]
