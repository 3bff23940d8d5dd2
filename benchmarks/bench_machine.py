#!/usr/bin/env python3
"""CPU of the round state machine per input, in process, beside floors measured in the same run (not a test).

The bench table of ``benchmarks/bench_latency.py``: the baccarat example config (deploy/examples, 17 spots)
rewired for a simulated table (:func:`~simulators.dealer.sim_config_toml`), every spot bet at its wager's
minimum. The device inputs are made as ``tablesense run`` gets them: the simulators' own shoe and pads
(:class:`~simulators.shoe.VirtualShoe`, :class:`~simulators.pads.VirtualPads`) write their frames, the
drivers' tsref codec decodes them, and each event is stamped the way the daemon stamps it; the steps of a
round are those of :meth:`simulators.dealer.SimTable.play_round` (bets, no more bets and the ``LOCKED``
reports, the cards, round end, chips cleared; a new shoe and its burn when one is over). About 58 inputs
per round at 17 spots.

Timed (``time.perf_counter``; ``time.process_time`` over the whole run as a check; the inputs, made up
front, are frozen out of the garbage collector's passes, ``gc.freeze``):

* ``TableMachine.handle`` per round and per input kind, over the measured rounds (after a warm-up);
* floors, same run: the empty loop (a call of a no-op per input) and ``msgspec.json.encode`` of every
  message the machine emitted for the round (what the daemon does with each at the least); the
  machine's time is printed as a ratio to the encode floor.

    .venv/bin/python benchmarks/bench_machine.py [--rounds 2000] [--warmup 100] [--seed 7]
        [--game baccarat] [--random-wagers] [--profile] [--repeat 3]

``--profile`` prints a cProfile top-30 (by own time) of ``handle`` over the measured rounds instead.
The machine is pure: the same arguments give the same inputs and the same emits (``--digest`` prints the
SHA-256 of every emit's encoding, the golden value of tests/test_machine_golden.py).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import pstats
import random
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from tablesense.daemon.config import TableConfig, parse_config  # noqa: E402
from tablesense.daemon.rules.baccarat import next_card_hand  # noqa: E402
from tablesense.daemon.rules.cards import Card  # noqa: E402
from tablesense.daemon.table import Emit, TableMachine, TimedInput  # noqa: E402
from tablesense.daemon.table.inputs import TableStart  # noqa: E402
from tablesense.drivers.events import DeviceState, LinkState  # noqa: E402
from tablesense.drivers.protocols.tsref import TsrefCodec  # noqa: E402
from tablesense.simulators.dealer import choose_wagers, deal_positions, sim_config_toml  # noqa: E402
from tablesense.simulators.pads import VirtualPads  # noqa: E402
from tablesense.simulators.shoe import VirtualShoe  # noqa: E402

START = datetime(2026, 1, 5, 18, 0, tzinfo=UTC)
STEP = timedelta(milliseconds=3)
"""Inputs are stamped ``STEP`` apart from ``START`` (the daemon's stamp: UTC, milliseconds, ``Z``)."""


def bench_config(game: str = "baccarat") -> TableConfig:
    """The bench table of ``game``: its example config rewired for simulated devices (no files used)."""
    urls = {"shoe": "/run/tablesense-bench/shoe", "pads": "/run/tablesense-bench/pads"}
    return parse_config(sim_config_toml(game, urls=urls, host="127.0.0.1", port=1883,
                                        journal="/run/tablesense-bench/journal"))


@dataclass
class BenchRound:
    """The inputs of one round (a new shoe's inputs go with the round that follows them)."""

    number: int
    inputs: list[TimedInput] = field(default_factory=list)


class _Table:
    """The simulated shoe and pads, decoded by the drivers' codec, stamped as the daemon stamps inputs."""

    def __init__(self, config: TableConfig, seed: int) -> None:
        self.config = config
        self.rng = random.Random(seed)
        uth = config.game == "uth"
        self.shoe = VirtualShoe(config.shoe_decks, seed=seed, burn=0 if uth else "rule",
                                cut_card_at="default", session="5ee0a001")
        self.pads = VirtualPads(list(config.spots), rfid=True, session="5ee0a002")
        self.codecs = {"shoe": TsrefCodec("shoe"), "pads": TsrefCodec("pads")}
        self.n = 0
        self.started = False
        self.rounds_left: int | None = None
        self.out: list[TimedInput] = []

    def stamp(self) -> str:
        moment = START + self.n * STEP
        self.n += 1
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def put(self, event: object) -> None:
        self.out.append(TimedInput(ts=self.stamp(), event=event))  # type: ignore[arg-type]

    def frames(self, device: str, data: bytes) -> None:
        codec = self.codecs[device]
        events = codec.feed(data)
        for ev in events:
            self.put(ev)
        if events:
            codec.ack(events[-1].seq)  # journaled, acknowledged

    def connect(self) -> None:
        """``tablesense run`` starting: the table start, both links up, each device's status answer."""
        self.put(TableStart())
        for device, model in (("shoe", self.shoe), ("pads", self.pads)):
            self.put(DeviceState(device, LinkState.ONLINE))
            self.frames(device, model.status())

    @property
    def shoe_over(self) -> bool:
        if self.config.game == "uth":
            return True
        return (self.rounds_left is not None and self.rounds_left <= 0) or self.shoe.remaining < 12

    def card(self) -> Card:
        card = self.shoe.next_card
        if card is None:
            raise EOFError("the shoe ran out mid-round")
        self.frames("shoe", self.shoe.draw())
        return card

    def play_round(self, wagers: dict[str, int]) -> None:
        """:meth:`simulators.dealer.SimTable.play_round`, frames decoded instead of written to a pty."""
        if not self.started or self.shoe_over:
            self.frames("shoe", self.shoe.start_shoe())
            self.started = True
            self.rounds_left = None
        was_cut = self.shoe.cut_card_out
        self.frames("pads", self.pads.open_round(wagers))
        self.frames("pads", self.pads.no_more_bets())
        game = self.config.game
        if game in ("baccarat", "ez-baccarat"):
            cards: list[Card] = []
            while next_card_hand(cards) is not None:
                cards.append(self.card())
        else:
            for _ in deal_positions(self.config, wagers):
                self.card()
            if game == "blackjack":
                for _ in range(min(self.rng.randint(0, 4), max(self.shoe.remaining - 1, 0))):
                    self.card()
        self.frames("pads", self.pads.round_end())
        self.frames("pads", self.pads.clear())
        if self.rounds_left is not None:
            self.rounds_left -= 1
        elif self.shoe.cut_card_out and not was_cut:
            self.rounds_left = 1


def bench_rounds(config: TableConfig, rounds: int, *, seed: int = 7,
                 random_wagers: bool = False) -> list[BenchRound]:
    """``rounds`` rounds of inputs at ``config``'s table; the first also holds the daemon's start-up
    inputs. Every spot bet at its wager's minimum, or (``random_wagers``) the simulator's random bets."""
    table = _Table(config, seed)
    every = {spot: config.wagers[sc.bet].min for spot, sc in config.spots.items()}
    out: list[BenchRound] = []
    table.connect()
    for n in range(1, rounds + 1):
        table.play_round(choose_wagers(config, table.rng) if random_wagers else every)
        out.append(BenchRound(n, table.out))
        table.out = []
    return out


def encode_emit(e: Emit) -> bytes:
    """One emit as bytes: its routing (channel, device, retain, qos) and the message's JSON."""
    return b"%s|%s|%d|%d|%s" % (e.channel.value.encode(), (e.device or "").encode(), e.retain, e.qos,
                                msgspec.json.encode(e.message))


def emits_digest(config: TableConfig, rounds: list[BenchRound]) -> tuple[str, int, TableMachine]:
    """SHA-256 of every emit of a fresh machine fed ``rounds``, the number of emits, and the machine
    (for its final state)."""
    machine = TableMachine(config)
    h = hashlib.sha256()
    n = 0
    for r in rounds:
        for inp in r.inputs:
            for e in machine.handle(inp):
                h.update(encode_emit(e))
                h.update(b"\n")
                n += 1
    return h.hexdigest(), n, machine


def kind_of(inp: TimedInput) -> str:
    """The input's kind for the per-kind table (``SpotChanged:PLACED``, ``DealerButton:ROUND_END``, ...)."""
    ev = inp.event
    name = type(ev).__name__
    detail = getattr(ev, "state", None) or getattr(ev, "button", None) or getattr(ev, "kind", None)
    return f"{name}:{detail.name}" if detail is not None and hasattr(detail, "name") else name


def _noop(inp: TimedInput) -> None:
    return None


@dataclass
class Run:
    machine_us: list[float]
    empty_us: list[float]
    encode_us: list[float]
    per_kind: dict[str, list[float]]
    cpu_s: float
    wall_s: float


def measure(config: TableConfig, rounds: list[BenchRound], warmup: int) -> Run:
    """Feed every round to a fresh machine, timing the rounds after ``warmup``."""
    machine = TableMachine(config)
    clock = time.perf_counter
    machine_us: list[float] = []
    empty_us: list[float] = []
    encode_us: list[float] = []
    per_kind: dict[str, list[float]] = {}
    encode = msgspec.json.encode
    cpu0, wall0 = time.process_time(), clock()
    for r in rounds:
        emitted: list[Emit] = []
        total = 0.0
        times: list[tuple[str, float]] = []
        for inp in r.inputs:
            t0 = clock()
            out = machine.handle(inp)
            dt = clock() - t0
            total += dt
            emitted += out
            times.append((kind_of(inp), dt))
        t0 = clock()
        for inp in r.inputs:
            _noop(inp)
        empty = clock() - t0
        t0 = clock()
        for e in emitted:
            encode(e.message)
        enc = clock() - t0
        if r.number > warmup:
            machine_us.append(total * 1e6)
            empty_us.append(empty * 1e6)
            encode_us.append(enc * 1e6)
            for k, dt in times:
                per_kind.setdefault(k, []).append(dt * 1e6)
    return Run(machine_us, empty_us, encode_us, per_kind, time.process_time() - cpu0, clock() - wall0)


def profile(config: TableConfig, rounds: list[BenchRound], warmup: int, top: int = 30) -> None:
    machine = TableMachine(config)
    for r in rounds[:warmup]:
        for inp in r.inputs:
            machine.handle(inp)
    prof = cProfile.Profile()
    prof.enable()
    for r in rounds[warmup:]:
        for inp in r.inputs:
            machine.handle(inp)
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def _rows(run: Run) -> Iterator[str]:
    n_inputs = sum(len(v) for v in run.per_kind.values())
    n_rounds = len(run.machine_us)
    per_round = statistics.fmean(run.machine_us)
    enc = statistics.fmean(run.encode_us)
    empty = statistics.fmean(run.empty_us)
    yield (f"rounds {n_rounds}, inputs {n_inputs} ({n_inputs / n_rounds:.1f}/round); "
           f"process CPU {run.cpu_s:.2f} s for {run.wall_s:.2f} s wall (whole run, floors included)")
    yield (f"handle per round: mean {per_round:8.1f} µs  median {statistics.median(run.machine_us):8.1f} µs"
           f"  ({per_round / (n_inputs / n_rounds):.1f} µs/input)")
    yield (f"floor encode    : mean {enc:8.1f} µs  (msgspec.json.encode of the round's emitted messages)"
           f"  ratio handle/encode {per_round / enc:.1f}x")
    yield f"floor empty loop: mean {empty:8.1f} µs  ratio handle/empty {per_round / empty:.0f}x"
    yield "per input kind (µs: mean, median, count per round, share of handle):"
    total = sum(sum(v) for v in run.per_kind.values())
    for k, v in sorted(run.per_kind.items(), key=lambda kv: -sum(kv[1])):
        yield (f"  {k:28s} {statistics.fmean(v):7.1f} {statistics.median(v):7.1f} "
               f"{len(v) / n_rounds:6.2f} {100 * sum(v) / total:5.1f}%")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--game", default="baccarat")
    parser.add_argument("--random-wagers", action="store_true", help="the simulator's random bets")
    parser.add_argument("--repeat", type=int, default=1, help="runs (each on a fresh machine)")
    parser.add_argument("--profile", action="store_true", help="cProfile top-30 instead of timing")
    parser.add_argument("--digest", action="store_true", help="print the SHA-256 of every emit")
    args = parser.parse_args(argv)
    config = bench_config(args.game)
    rounds = bench_rounds(config, args.rounds, seed=args.seed, random_wagers=args.random_wagers)
    # The inputs made up front (~60 objects a round) are no part of the daemon's heap: out of the
    # collector's sight, so its full passes cost what they would in the daemon, not a bench artefact.
    gc.collect()
    gc.freeze()
    if args.digest:
        digest, n, _ = emits_digest(config, rounds)
        print(f"{digest} ({n} emits, {sum(len(r.inputs) for r in rounds)} inputs)")
        return 0
    if args.profile:
        profile(config, rounds, args.warmup)
        return 0
    for i in range(args.repeat):
        print(f"--- run {i + 1} ({config.game}, {len(config.spots)} spots, seed={args.seed})")
        for line in _rows(measure(config, rounds, args.warmup)):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
