"""A whole simulated table: a virtual shoe and bet pads on pseudo-terminals, and a dealer that plays
rounds of any game through them, in step with the daemon.

Used by ``tablesense demo``, the end-to-end tests and ``benchmarks/bench_latency.py``. The devices are
the simulators' own (:class:`~simulators.shoe.VirtualShoe`, :class:`~simulators.pads.VirtualPads`,
:class:`~simulators.runner.SimulatorRunner` over :class:`~simulators.exposure.PtyExposure`), so the
daemon reads them through pyserial exactly as it reads hardware.

Pacing: with ``pace=0`` the dealer waits, after each step, until the daemon has acknowledged the step's
last frame (``$AK``: the daemon acknowledges a frame only once its event is journaled), so the shoe and
the pads (two independent serial links) never race each other: the bets are in before the first card,
the last card before the round-end button. With ``pace > 0`` it also sleeps that many seconds per card.
Pipelined (``pipeline=True``), it waits only where the two links' order matters and otherwise lets the
devices keep up to 64 unacknowledged frames each, as the protocol allows (the throughput benchmark).

:class:`TableScript` records what the dealer did in every round (cards to each position, wagers per
spot), which the tests settle independently with ``tablesense settle`` to check the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tablesense.daemon.config import TableConfig
from tablesense.daemon.resources import data_path
from tablesense.daemon.rules.baccarat import next_card_hand
from tablesense.daemon.rules.cards import Card
from tablesense.simulators.exposure import PtyExposure
from tablesense.simulators.pads import VirtualPads
from tablesense.simulators.runner import SimulatorRunner
from tablesense.simulators.shoe import VirtualShoe

__all__ = ["DealtRound", "SimTable", "choose_wagers", "deal_positions"]


@dataclass
class DealtRound:
    """What the dealer did in one round: ``wagers`` spot -> minor units, ``cards`` in draw order with the
    position each went to (``player``/``banker``, a box/seat, ``dealer``, ``board``, ``play``), and the
    device sequence number of each card frame."""

    number: int
    wagers: dict[str, int]
    cards: list[tuple[str, Card]] = field(default_factory=list)
    card_seqs: list[int] = field(default_factory=list)

    def hands(self) -> dict[str, list[Card]]:
        """Position -> cards, in draw order (``play`` cards excluded)."""
        out: dict[str, list[Card]] = {}
        for pos, card in self.cards:
            if pos != "play":
                out.setdefault(pos, []).append(card)
        return out


def choose_wagers(config: TableConfig, rng: random.Random) -> dict[str, int]:
    """A random set of bets for one round (spot -> minor units), each within its wager's min and max.

    Eligibility is respected the way players play: a blackjack Perfect Pairs bet comes with the box's
    blackjack bet, a UTH Ultimate Pairs bet with the seat's Ante, a baccarat Dragon Bonus/Perfect Pair
    stands alone. Presence-only spots (``nominal_stake``) get their nominal stake.
    """
    spots = list(config.spots.items())
    chosen = rng.sample(spots, rng.randint(1, max(1, len(spots) // 2)))
    bets: dict[str, int] = {}
    for spot, sc in chosen:
        bets[spot] = _amount(config, spot, rng)
        partner = {"perfect_pairs": "blackjack", "ultimate_pairs": "ante"}.get(sc.bet) \
            if config.game in ("blackjack", "uth") else None
        if partner is not None:
            main = config.spot_for(sc.seat, partner)
            if main is not None and main not in bets:
                bets[main] = _amount(config, main, rng)
    if config.game == "uth" and not any(config.spots[s].bet == "ante" for s in bets):
        seat = config.spots[next(iter(bets))].seat
        ante = config.spot_for(seat, "ante")
        if ante is not None:
            bets[ante] = _amount(config, ante, rng)
    return bets


def _amount(config: TableConfig, spot: str, rng: random.Random) -> int:
    sc = config.spots[spot]
    if sc.nominal_stake is not None:
        return sc.nominal_stake
    w = config.wagers[sc.bet]
    options = [a for a in (w.min, 2 * w.min, 5 * w.min, 10 * w.min) if a <= w.max] or [w.min]
    return rng.choice(options)


def deal_positions(config: TableConfig, wagers: Mapping[str, int]) -> list[str]:
    """The positions of the initial deal of a blackjack or UTH round, in draw order (rules.md §2, §3;
    the table config's dealing order), for the seats holding ``wagers``."""
    seats_bet = {config.spots[s].seat for s in wagers}
    if config.game == "blackjack":
        main = {config.spots[s].seat for s in wagers if config.spots[s].bet == "blackjack"}
        boxes = [s for s in config.seats if s in (main or seats_bet)]
        order = [*boxes, "dealer", *boxes]
        if config.blackjack.hole_card:
            order.append("dealer")
        return order
    if config.game == "uth":
        ante = {config.spots[s].seat for s in wagers if config.spots[s].bet == "ante"}
        seats = [s for s in config.seats if s in (ante or seats_bet)]
        players = [*seats, "dealer"]
        hands = [p for p in players for _ in range(2)] if config.uth.deal == "stacks" else players * 2
        board = ["burn"] * config.uth.burn_before_board + ["board"] * 5
        return board + hands if config.uth.board == "before" else hands + board
    raise ValueError(f"deal_positions is for blackjack and uth, not {config.game}")


class SimTable:
    """A simulated shoe and bet pads for ``config`` on ptys in ``directory`` (symlinks ``shoe``, ``pads``).

    ``seed``: shuffles and wagers. ``cards``: a scripted card sequence instead of shuffled shoes (no burn,
    no cut card). ``pace``: seconds per card (0: as fast as the daemon acknowledges). ``betting``: seconds
    the betting stays open before no-more-bets (the demo's players read the last round's results on the
    table display meanwhile; 0: none). ``ack_timeout``: seconds to wait for the daemon's acknowledgement
    before raising ``TimeoutError`` (``None``: wait for ever; the devices resend unacknowledged frames
    every second, so a daemon that crashed and was restarted takes them). ``on_wait(device, seq,
    seconds)``: called every 30 s of waiting.
    ``on_card(seq, t)``: called after each card frame is written (``t``: ``loop.time()``), for latency.
    ``links``: role (``shoe``, ``pads``) -> pty symlink path, instead of ``directory/<role>`` (used by
    ``tablesense simulate table``, which puts the devices where the table config's urls point).
    ``heartbeat``: seconds of quiet after which each device sends a heartbeat frame (``None``: none).
    ``pipeline``: at pace 0, do not wait for each step's acknowledgement; the devices keep their
    unacknowledged frames (at most 64 each, protocol §3) and the dealer waits only where the order of
    the two links matters (before the first card, the bets must be acknowledged; before the chips are
    cleared, the last card), as a dealer at a real table never outruns the sensors; :meth:`flush` waits
    for the rest.
    """

    def __init__(self, config: TableConfig, directory: str | Path, *, seed: int = 1,
                 cards: Iterable[Card | str] | None = None, pace: float = 0.0,
                 ack_timeout: float | None = 30.0, cut_card_at: int | None = None, on_card: Any = None,
                 links: Mapping[str, str | Path] | None = None, on_wait: Any = None,
                 betting: float = 0.0, heartbeat: float | None = 2.0, pipeline: bool = False) -> None:
        self.config = config
        self.pipeline = pipeline
        self._unacked_last: dict[int, int] = {}
        self.betting = betting
        self.directory = Path(directory)
        self.rng = random.Random(seed)
        self.pace = pace
        self.ack_timeout = ack_timeout
        self.on_card = on_card
        self.on_wait = on_wait
        self.wait_notice = 30.0
        """Seconds of waiting for an acknowledgement between two :attr:`on_wait` calls."""
        scripted = cards is not None
        if scripted:
            self.shoe = VirtualShoe(config.shoe_decks, cards=cards, burn=None, cut_card_at=None)
        else:
            self.shoe = VirtualShoe(config.shoe_decks, seed=seed, burn="rule" if config.game != "uth" else 0,
                                    cut_card_at=cut_card_at if cut_card_at is not None else "default")
        self.pads = VirtualPads(list(config.spots), rfid=True)
        paths = {role: Path((links or {}).get(role, self.directory / role)) for role in ("shoe", "pads")}
        self.shoe_exposure = PtyExposure(paths["shoe"].name, paths["shoe"].parent)
        self.pads_exposure = PtyExposure(paths["pads"].name, paths["pads"].parent)
        self._link_dirs = {p.parent for p in paths.values()}
        self.shoe_runner = SimulatorRunner(self.shoe, self.shoe_exposure, [], pace=0, heartbeat=heartbeat)
        self.pads_runner = SimulatorRunner(self.pads, self.pads_exposure, [], pace=0, heartbeat=heartbeat)
        self.rounds: list[DealtRound] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._shoe_started = False
        self._rounds_left: int | None = None
        self.script_mode = scripted

    @property
    def urls(self) -> dict[str, str]:
        """Device name (role) -> the pty symlink path the daemon opens."""
        return {"shoe": str(self.shoe_exposure.link), "pads": str(self.pads_exposure.link)}

    async def start(self) -> None:
        """Create the ptys and start answering the host (status requests, acknowledgements)."""
        for d in self._link_dirs:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        for runner in (self.shoe_runner, self.pads_runner):
            self._tasks.append(asyncio.create_task(runner.run()))
        for _ in range(500):
            if self.shoe_exposure.plugged and self.pads_exposure.plugged:
                return
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        """Stop the devices and remove the ptys."""
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    async def wait_host(self, timeout: float = 30.0) -> None:
        """Wait until the daemon has opened both devices (its status requests arrived)."""
        async with asyncio.timeout(timeout):
            await self.shoe_runner.host_seen.wait()
            await self.pads_runner.host_seen.wait()

    async def _send(self, runner: SimulatorRunner, device: Any, frames: bytes) -> None:
        if not frames:
            return
        last = (device.next_seq - 1) % 100_000
        await self._write(runner, frames, last)
        if not self.pipeline:
            await self._wait_acked(runner, last)

    async def _write(self, runner: SimulatorRunner, frames: bytes, last: int) -> None:
        """Write ``frames`` (the last numbered ``last``) to ``runner``'s device. Pipelined, the other
        device's frames sent so far must be acknowledged first (so the daemon takes the two links' frames
        in the order the dealer made them: the bets before the first card, the last card before the
        chips are cleared), and the device's window of unacknowledged frames must have room."""
        if self.pipeline:
            other = self.pads_runner if runner is self.shoe_runner else self.shoe_runner
            other_last = self._unacked_last.pop(id(other), None)
            if other_last is not None:
                await self._wait_acked(other, other_last)
            async with asyncio.timeout(self.ack_timeout):  # the window frees only as the daemon acks
                await runner.wait_room(frames.count(b"$"))
            self._unacked_last[id(runner)] = last
        await runner.send(frames)

    async def flush(self) -> None:
        """Wait until the daemon has acknowledged every frame sent (pipelined dealing; a no-op otherwise)."""
        for runner in (self.shoe_runner, self.pads_runner):
            last = self._unacked_last.pop(id(runner), None)
            if last is not None:
                await self._wait_acked(runner, last)

    async def _wait_acked(self, runner: SimulatorRunner, seq: int) -> None:
        """Wait until an acknowledgement covers frame ``seq`` (the devices resend meanwhile, so a daemon
        that crashed and restarted gets it again), woken by each acknowledgement the device reads.
        ``TimeoutError`` after :attr:`ack_timeout` seconds; with ``ack_timeout=None`` it waits for ever,
        calling :attr:`on_wait` every :attr:`wait_notice` seconds of waiting (acknowledgements of
        earlier frames meanwhile do not put it off)."""
        loop = asyncio.get_running_loop()
        start = warned = loop.time()
        async with asyncio.timeout(self.ack_timeout):
            while not runner.acked(seq):
                runner.ack_arrived.clear()
                if runner.acked(seq):
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, warned + self.wait_notice - loop.time())):
                        await runner.ack_arrived.wait()
                if loop.time() - warned >= self.wait_notice:
                    warned = loop.time()
                    if self.on_wait is not None:
                        self.on_wait(runner.device.device, seq, warned - start)

    async def shoe_frames(self, frames: bytes) -> None:
        """Send shoe frames and wait for the daemon's acknowledgement of the last."""
        await self._send(self.shoe_runner, self.shoe, frames)

    async def pads_frames(self, frames: bytes) -> None:
        """Send pad frames and wait for the daemon's acknowledgement of the last."""
        await self._send(self.pads_runner, self.pads, frames)

    async def power_cycle(self, role: str, session: str | None = None) -> None:
        """Restart the ``shoe`` or the ``pads`` (a power cut): a new session, numbering from 0, the
        frames it had not had acknowledged lost; it sends its power-up identity frame."""
        runner = {"shoe": self.shoe_runner, "pads": self.pads_runner}[role]
        await runner.power_cycle(session)

    async def start_shoe(self) -> None:
        """Identity (first time), a new shoe and its burn."""
        first = b"" if self._shoe_started else self.shoe.identity()
        await self.shoe_frames(first + self.shoe.start_shoe())
        self._shoe_started = True
        self._rounds_left = None

    async def _card(self, rnd: DealtRound, position: str) -> bool:
        card = self.shoe.next_card
        if card is None:
            return False
        frames = self.shoe.draw()
        seq = (self.shoe.next_seq - 1) % 100_000
        if self.shoe.remaining == 0:
            seq = (seq - 1) % 100_000  # the EMPTY frame follows the last card
        loop = asyncio.get_running_loop()
        last = (self.shoe.next_seq - 1) % 100_000
        await self._write(self.shoe_runner, frames, last)
        if self.on_card is not None:
            self.on_card(seq, loop.time())
        if not self.pipeline:
            await self._wait_acked(self.shoe_runner, last)
        rnd.cards.append((position, card))
        rnd.card_seqs.append(seq)
        if self.pace:
            await asyncio.sleep(self.pace)
        return True

    async def play_round(self, wagers: Mapping[str, int] | None = None, *,
                         hits: int | None = None) -> DealtRound:
        """Play one round: bets, no more bets, the game's cards, round end, chips cleared.

        A new shoe is started first when none is loaded or the last one is over (:attr:`shoe_over`);
        UTH is dealt from a freshly shuffled deck every round. ``wagers``: spot -> minor units (default:
        :func:`choose_wagers`). ``hits``: blackjack cards after the initial deal (default: random 0-4).
        Returns the round as dealt. Raises ``EOFError`` when the shoe cannot complete the round.
        """
        if not self._shoe_started or self.shoe_over:
            await self.start_shoe()
        was_cut = self.shoe.cut_card_out
        bets = dict(wagers) if wagers is not None else choose_wagers(self.config, self.rng)
        rnd = DealtRound(len(self.rounds) + 1, bets)
        await self.pads_frames(self.pads.open_round(bets))
        if self.betting:
            await asyncio.sleep(self.betting)
        await self.pads_frames(self.pads.no_more_bets())
        game = self.config.game
        if game in ("baccarat", "ez-baccarat"):
            while (hand := next_card_hand([c for _, c in rnd.cards])) is not None:
                if not await self._card(rnd, hand.value):
                    raise EOFError("the shoe ran out mid-round")
        else:
            for pos in deal_positions(self.config, bets):
                if not await self._card(rnd, pos):
                    raise EOFError("the shoe ran out mid-round")
            if game == "blackjack":
                n = self.rng.randint(0, 4) if hits is None else hits
                for _ in range(min(n, max(self.shoe.remaining - 1, 0))):
                    await self._card(rnd, "play")
        # Every game's dealer presses round-end; a baccarat round is already complete with its last card,
        # and the button on a completed round (also the shoe's last, after the cut card) raises no alarm.
        await self.pads_frames(self.pads.round_end())
        await self.pads_frames(self.pads.clear())
        self.rounds.append(rnd)
        if self._rounds_left is not None:
            self._rounds_left -= 1
        elif self.shoe.cut_card_out and not was_cut:
            self._rounds_left = 1  # the cut card's round is done: one more, then the shoe ends
        return rnd

    @property
    def shoe_over(self) -> bool:
        """The shoe in play is finished: the round after the cut card's round was dealt (rules.md §1.3),
        it cannot hold another round, or (UTH) every round gets a fresh deck."""
        if self.config.game == "uth":
            return True
        if self.script_mode:
            return self.shoe.remaining == 0
        return (self._rounds_left is not None and self._rounds_left <= 0) or self.shoe.remaining < 12

    async def play_shoe(self, max_rounds: int | None = None) -> list[DealtRound]:
        """Rounds until the shoe in play (or a new one) is over (:attr:`shoe_over`) or ``max_rounds``."""
        played: list[DealtRound] = []
        while max_rounds is None or len(played) < max_rounds:
            played.append(await self.play_round())
            if self.shoe_over:
                break
        return played

    def settle_request(self, rnd: DealtRound) -> dict[str, Any]:
        """The ``tablesense settle`` request for a dealt round (cards and wagers as the dealer knows them)."""
        cfg = self.config
        req: dict[str, Any] = {"game": cfg.game, "paytables": cfg.paytables()}
        if cfg.decks is not None:
            req["decks"] = cfg.decks
        if cfg.commission is not None:
            req["commission"] = {"rate": cfg.commission.rate, "unit": cfg.commission.unit,
                                 "rounding": cfg.commission.rounding}
        wagers = []
        for spot, stake in rnd.wagers.items():
            sc = cfg.spots[spot]
            position = sc.seat
            wagers.append({"spot": spot if cfg.game in ("baccarat", "ez-baccarat") else position,
                           "bet": sc.bet, "hand": sc.hand, "stake": stake})
        req["wagers"] = wagers
        if cfg.game in ("baccarat", "ez-baccarat"):
            req["cards"] = [str(c) for _, c in rnd.cards]
        else:
            req["hands"] = {pos: [str(c) for c in cards] for pos, cards in rnd.hands().items()
                            if pos not in ("burn", "board")}
        return req


def baccarat_rounds_of(cards: Sequence[Card]) -> list[list[Card]]:
    """Split a baccarat card sequence into rounds by the drawing rules."""
    rounds: list[list[Card]] = []
    cur: list[Card] = []
    for c in cards:
        cur.append(c)
        if next_card_hand(cur) is None:
            rounds.append(cur)
            cur = []
    return rounds


EXAMPLES = data_path("deploy", "examples")
"""The example table configs the simulated tables start from (package data: deploy/examples/)."""


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _toml_key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() and not k[:1].isdigit() else _toml_value(k)


def dump_toml(doc: Mapping[str, Any]) -> str:
    """A small TOML writer for config documents (tables of scalars, lists and inline tables)."""
    lines: list[str] = []

    def table(prefix: str, d: Mapping[str, Any]) -> None:
        scalars = {k: v for k, v in d.items() if not isinstance(v, dict) or prefix.endswith("spots")}
        subs = {k: v for k, v in d.items() if k not in scalars}
        if prefix:
            lines.append(f"[{prefix}]")
        lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars.items())
        for k, v in subs.items():
            table(f"{prefix}.{_toml_key(k)}" if prefix else _toml_key(k), v)

    table("", doc)
    return "\n".join(lines) + "\n"


def sim_config_toml(game: str, *, urls: Mapping[str, str], host: str, port: int, journal: str | Path,
                    prefix: str = "tablesense", table: str | None = None, protocol: str = "5",
                    spots: int | None = None) -> str:
    """The example config of ``game`` (deploy/examples/) rewired for a simulated table: devices on the
    ptys ``urls`` (role -> path), the broker at ``host:port`` without TLS or credentials, the journal in
    ``journal``, the start-of-shoe burn reported by the shoe. ``spots``: keep only the first N spots."""
    import tomllib

    name = {"ez-baccarat": "ez-baccarat"}.get(game, game)
    doc: dict[str, Any] = tomllib.loads((EXAMPLES / f"{name}.toml").read_text(encoding="utf-8"))
    if table is not None:
        doc["table"] = table
    doc["devices"] = {role: {"url": url, "role": role, "protocol": "tsref", "baud": 115200}
                      for role, url in urls.items()}
    doc["mqtt"] = {"host": host, "port": port, "topic_prefix": prefix, "protocol": protocol,
                   "client_id": f"tablesense-{doc['table']}-{abs(hash(str(journal))) % 10**8}"}
    doc["journal"] = {"directory": str(journal)}
    doc["burn"] = {"mode": "shoe"}
    if spots is not None:
        doc["spots"] = dict(list(doc["spots"].items())[:spots])
    return dump_toml(doc)
