"""``tablesense simulate``: run a virtual shoe or bet pads on a pseudo-terminal or a TCP port, or a
whole simulated table.

    tablesense simulate shoe|pads [--decks N] [--seed S] [--cards FILE|LIST] [--pace SECONDS]
                                  [--via pty|tcp] [--port P] [--link PATH] [--fault NAME ...]
                                  [--rounds N] [--spots A,B,...] [--presence-only] [--heartbeat S]
                                  [--start-now] [--verbose]

The first line on stdout (flushed at once) is what to point tablesense at: the pty's stable symlink
path (``--via pty``, the default; ``--link``'s directory is created, mode 0700, if missing) or
``socket://127.0.0.1:PORT`` (``--via tcp``). It then runs until
Ctrl-C or SIGTERM (exit status 0). Log lines go to stderr.

The device speaks the tablesense reference protocol (docs/protocol.md) through the same codec module
the daemon decodes with. By default it waits for a host before dealing (its status request on a pty,
its connection on TCP), so the daemon sees the shoe from its first frame; ``--start-now`` deals at
once (e.g. for ``tablesense capture``, which only listens). ``--fault`` names are listed in
``--help`` (:data:`simulators.runner.FAULTS`). USB exposure needs the simulator in the daemon's own
process (a pyusb backend in Python), so it is available to tests, not here.

    tablesense simulate table --config FILE [--rounds N] [--seed S] [--pace SECONDS] [--cards FILE|LIST]
                              [--heartbeat S] [--verbose]

A shoe and bet pads dealt in step, as ``tablesense demo`` deals them (:class:`simulators.dealer.SimTable`):
ptys at the config's ``[devices.*] url`` paths (first stdout line ``shoe PATH pads PATH``), then, once
``tablesense run --config FILE`` has opened both, rounds of the config's game with random wagers within
its limits, each step waiting for the daemon's acknowledgement, so bets are locked before the first card
and the last card is in before round end (no ``PAST_POSTING`` or ``UNEXPECTED_BUTTON`` from two
unsynchronised simulators). ``--pace`` is seconds per card. ``--cards`` deals that exact sequence (no
burn, no cut card; a baccarat sequence must be whole coups) and stops once it is dealt (UTH: a fresh deck
every round, so the cards are each round's deck order). Exit 0 after ``--rounds``, the ``--cards``, or
Ctrl-C/SIGTERM. The table's devices are ptys at the config's paths in the config's deck count, so
``--fault``, ``--via tcp``, ``--port``, ``--link``, ``--spots``, ``--presence-only``, ``--start-now`` and a
``--decks`` other than the config's are refused in one line naming the option, never ignored; so are
options that do not apply to ``simulate shoe`` or ``pads`` (``--spots`` for the shoe, ``--decks`` for the
pads, ``--port`` with a pty, ``--link`` with TCP).

Every simulated device behaves as docs/protocol.md §3 asks of a real one: it keeps the frames no
acknowledgement covers and resends them when none came for a second, and before answering a status
request. So the simulators survive a daemon crash: ``simulate table`` waits (a line on stderr every
30 s) while the daemon is down, and the restarted daemon takes the resent frames and drops those it had
already journaled.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import random
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tablesense.daemon.bounded import InputTooLarge, read_bounded
from tablesense.daemon.cli import UsageError
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.topics import TABLE_ID

if TYPE_CHECKING:
    from tablesense.simulators.dealer import SimTable
    from tablesense.simulators.runner import SimulatorRunner, Step

__all__ = ["DEFAULT_SPOTS", "build_runner", "build_table", "register", "run"]

DEFAULT_SPOTS = "P1,P2,P3,P4,P5,P6,P7"
"""The betting spots of ``simulate pads`` without ``--spots``."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``simulate`` sub-command."""
    from tablesense.simulators.runner import FAULTS

    p = subparsers.add_parser(
        "simulate", help="run a virtual shoe or bet pads on a pty or TCP port",
        description="Run a virtual card-reading shoe or bet-sensor pads speaking the tablesense reference "
                    "protocol. Prints the device path or URL (first line of stdout), then runs until "
                    "Ctrl-C / SIGTERM.",
        epilog="faults: " + "; ".join(f"{k}: {v}" for k, v in FAULTS.items()))
    p.add_argument("device", metavar="shoe|pads|table",
                   help="which device to simulate; table: shoe and pads dealt in step with the daemon")
    p.add_argument("--config", metavar="FILE",
                   help="table: the table config the daemon runs with (devices.*.url say where the ptys go)")
    p.add_argument("--decks", metavar="N",
                   help="decks in the shoe, 1 to 8 (default 8; table: the config's, which it must match)")
    p.add_argument("--seed", default=None, metavar="S", help="shuffle and fault seed (integer)")
    p.add_argument("--cards", metavar="FILE|LIST",
                   help="exact card sequence instead of a shuffle: a file or a list like 'QH,9D,AS' "
                        "(table: dealt in order, then it stops; uth: every round's deck, from the top)")
    p.add_argument("--pace", default="0.5", metavar="SECONDS", help="seconds between cards (default 0.5)")
    p.add_argument("--via", metavar="pty|tcp", help="exposure: pty (default) or tcp (table: pty only)")
    p.add_argument("--port", metavar="P", help="TCP port for --via tcp (default: a free one)")
    p.add_argument("--link", metavar="PATH", help="pty symlink path (default: a fresh temp dir)/<device>")
    p.add_argument("--fault", action="append", default=[], metavar="NAME",
                   help="inject a fault (repeatable; shoe and pads only)")
    p.add_argument("--rounds", metavar="N", help="stop dealing after N rounds (default: shoe after shoe)")
    p.add_argument("--spots", metavar="A,B,...",
                   help="betting spots of the pads (default P1..P7; table: the config's [spots])")
    p.add_argument("--presence-only", action="store_true",
                   help="pads that cannot read chip values (pads only)")
    p.add_argument("--heartbeat", metavar="S",
                   help="heartbeat after S quiet seconds (0: off; default 1, table: 2)")
    p.add_argument("--start-now", action="store_true",
                   help="deal at once instead of waiting for a host (shoe and pads only)")
    p.add_argument("--verbose", action="store_true", help="log simulator events (stderr)")
    p.set_defaults(func=run)


def _number(text: str, what: str, kind: type[int] | type[float], low: float,
            high: float | None = None) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise UsageError(f"simulate: {what} must be a number, got {text[:40]!r}") from None
    if not math.isfinite(value):  # float("nan") compares false with every bound
        raise UsageError(f"simulate: {what} must be a finite number, got {text[:40]!r}")
    if value < low or (high is not None and value > high):
        bound = f"{low:g} to {high:g}" if high is not None else f">= {low:g}"
        raise UsageError(f"simulate: {what} must be {bound}, got {text!r}")
    return value


def _cards(spec: str) -> list[str]:
    if not spec.strip():
        raise UsageError("simulate: --cards: no cards given (an empty list)")
    path = Path(spec)
    text = spec
    if path.is_file():
        try:
            text = read_bounded(path, 1 << 20, f"--cards {spec}").decode("utf-8")
        except InputTooLarge as exc:
            raise UsageError(f"simulate: {exc}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"simulate: --cards {spec}: cannot read: {exc}") from None
        text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    elif "/" in spec or spec.endswith(".txt"):
        raise UsageError(f"simulate: --cards {spec}: no such file")
    items = [t for t in re.split(r"[\s,;]+", text) if t]
    if not items:
        raise UsageError(f"simulate: --cards {spec}: no cards given")
    return items


def build_runner(args: argparse.Namespace) -> SimulatorRunner:
    """Validate the arguments and build the :class:`simulators.runner.SimulatorRunner`.

    Raises:
        UsageError: any bad option (one line naming it).
    """
    from tablesense.daemon.rules.cards import CardNotInShoe, InvalidCard
    from tablesense.simulators.exposure import Exposure, PtyExposure, TcpExposure
    from tablesense.simulators.pads import VirtualPads
    from tablesense.simulators.runner import FAULTS, SimulatorRunner, pads_program, shoe_program
    from tablesense.simulators.shoe import VirtualShoe

    if args.device not in ("shoe", "pads"):
        raise UsageError(f"simulate: unknown device {args.device!r}; choose shoe, pads or table")
    decks = int(_number("8" if args.decks is None else args.decks, "--decks", int, 1, 8))
    seed = None if args.seed is None else int(_number(args.seed, "--seed", int, 0))
    pace = _number(args.pace, "--pace", float, 0)
    heartbeat = _number("1.0" if args.heartbeat is None else args.heartbeat, "--heartbeat", float, 0)
    rounds = None if args.rounds is None else int(_number(args.rounds, "--rounds", int, 1))
    port = int(_number("0" if args.port is None else args.port, "--port", int, 0, 65535))
    unknown = [f for f in args.fault if f not in FAULTS]
    if unknown:
        raise UsageError(f"simulate: unknown fault {unknown[0]!r}; known: {', '.join(FAULTS)}")
    via = "pty" if args.via is None else args.via
    if via not in ("pty", "tcp"):
        raise UsageError(f"simulate: --via {via!r}: choose pty or tcp (usb only works in-process)")
    if args.device == "pads" and args.cards is not None:
        raise UsageError("simulate: --cards is for the shoe, not the pads")
    if args.device == "pads" and args.decks is not None:
        raise UsageError("simulate: --decks is for the shoe, not the pads")
    if args.device == "shoe" and args.spots is not None:
        raise UsageError("simulate: --spots is for the pads, not the shoe")
    if args.device == "shoe" and args.presence_only:
        raise UsageError("simulate: --presence-only is for the pads, not the shoe")
    if via == "pty" and args.port is not None:
        raise UsageError("simulate: --port is for --via tcp (a pty has no port)")
    if via == "tcp" and args.link is not None:
        raise UsageError("simulate: --link is for --via pty (the pty's symlink path)")

    program: Iterator[Step]
    device: VirtualShoe | VirtualPads
    if args.device == "shoe":
        try:
            shoe = (VirtualShoe(decks, seed=seed, cards=_cards(args.cards)) if args.cards is not None
                    else VirtualShoe(decks, seed=seed))
        except (InvalidCard, CardNotInShoe) as exc:
            raise UsageError(f"simulate: --cards: {exc}") from None
        device = shoe
        program = shoe_program(shoe, rounds=rounds, loop_shoes=args.cards is None)
    else:
        spots = [s.strip() for s in (args.spots if args.spots is not None else DEFAULT_SPOTS).split(",")]
        for spot in spots:
            if not TABLE_ID.fullmatch(spot):
                raise UsageError(f"simulate: --spots: spot id {spot[:40]!r} must be 1-64 letters, digits, "
                                 "'_', '-' or '.' (as in the table config)")
        try:
            pads = VirtualPads(spots, rfid=not args.presence_only)
        except ValueError as exc:
            raise UsageError(f"simulate: --spots: {exc}") from None
        device = pads
        program = pads_program(pads, random.Random(seed), rounds=rounds)
    exposure: Exposure
    if via == "pty":
        if args.link:
            link = Path(args.link)
            try:
                link.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"simulate: --link {args.link}: cannot create directory {link.parent}: "
                                 f"{exc.strerror or exc}") from None
            if not link.parent.is_dir():
                raise UsageError(f"simulate: --link {args.link}: {link.parent} is not a directory")
            exposure = PtyExposure(link.name, link.parent)
        else:
            exposure = PtyExposure(args.device)
    else:
        exposure = TcpExposure(port=port)

    return SimulatorRunner(device, exposure, program, pace=pace, faults=args.fault, seed=seed or 0,
                           heartbeat=heartbeat or None, start_on_host=not args.start_now)



async def _serve(runner: SimulatorRunner) -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.create_task(runner.run())
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    address_printed = False
    waiter = asyncio.create_task(stop.wait())
    try:
        while not address_printed:
            if task.done():
                task.result()
            if runner.exposure.plugged and runner.exposure.address:
                print(runner.exposure.address, flush=True)
                address_printed = True
                break
            await asyncio.sleep(0.01)
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
    finally:
        waiter.cancel()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def build_table(args: argparse.Namespace) -> tuple[SimTable, int | None]:
    """Validate ``simulate table`` arguments: the :class:`simulators.dealer.SimTable` for the table
    config's game, with its ptys at the config's ``[devices.*] url`` paths, and the rounds to deal
    (``None``: until stopped, or until the ``--cards`` are dealt).

    ``--cards`` deals that exact sequence (no burn, no cut card) and stops when it is dealt; a baccarat
    sequence must be whole coups by the drawing rules; UTH deals a fresh deck every round, so the cards
    are every round's deck order. ``--heartbeat`` sets both devices' heartbeat. ``--decks`` and ``--via``
    are taken when they agree with what the table is (the config's decks; ptys).

    Raises:
        UsageError: no or a bad ``--config``, a device url that is not a path, no shoe or no pads, a
            ``[burn] mode`` other than ``shoe`` (the simulated shoe reports its burn), a bad option, or
            an option ``simulate table`` cannot honour (``--fault``, ``--via tcp``, ``--port``,
            ``--link``, ``--spots``, ``--presence-only``, ``--start-now``, ``--decks`` other than the
            config's): one line naming it.
    """
    from tablesense.daemon.config import ConfigError, load_config
    from tablesense.daemon.rules.cards import CardNotInShoe, InvalidCard
    from tablesense.simulators.dealer import SimTable, baccarat_rounds_of

    if not args.config:
        raise UsageError("simulate table: --config FILE is required (the table config the daemon runs with)")
    _refuse_table_options(args)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        raise UsageError(f"simulate table: {exc}") from None
    links: dict[str, str] = {}
    for name, dev in cfg.devices.items():
        if "://" in dev.url or dev.url.startswith("usb:"):
            raise UsageError(f"simulate table: devices.{name}.url {dev.url!r} is not a path; the simulated "
                             f"table makes pseudo-terminals, e.g. url = \"/tmp/ts/{dev.role}\"")
        if dev.role in links:
            raise UsageError(f"simulate table: two devices with role {dev.role!r}")
        links[dev.role] = dev.url
    for role in ("shoe", "pads"):
        if role not in links:
            raise UsageError(f"simulate table: the config has no device with role = \"{role}\"")
    if cfg.burn.mode != "shoe":
        raise UsageError(f"simulate table: [burn] mode is {cfg.burn.mode!r}; the simulated shoe reports its "
                         "own burn: set mode = \"shoe\" in the config the daemon runs with")
    if args.decks is not None:
        decks = int(_number(args.decks, "--decks", int, 1, 8))
        if decks != cfg.shoe_decks:
            raise UsageError(f"simulate table: --decks {decks}: the table config deals from "
                             f"{cfg.shoe_decks} deck(s) ({args.config}); the simulated shoe holds what the "
                             "daemon expects (leave --decks out, or change decks in the config)")
    seed = 1 if args.seed is None else int(_number(args.seed, "--seed", int, 0))
    pace = _number(args.pace, "--pace", float, 0)
    rounds = None if args.rounds is None else int(_number(args.rounds, "--rounds", int, 1))
    heartbeat = 2.0 if args.heartbeat is None else _number(args.heartbeat, "--heartbeat", float, 0)
    cards: list[str] | None = None
    if args.cards is not None:
        cards = _cards(args.cards)
        try:
            parsed = [Card.parse(c) for c in cards]
        except InvalidCard as exc:
            raise UsageError(f"simulate table: --cards: {exc}") from None
        if cfg.game in ("baccarat", "ez-baccarat"):
            coups = baccarat_rounds_of(parsed)
            left = len(parsed) - sum(len(c) for c in coups)
            if left:
                raise UsageError(f"simulate table: --cards: the last {left} card(s) do not complete a coup "
                                 f"(after {len(coups)} complete coup(s) by the drawing rules)")
    try:
        sim = SimTable(cfg, Path(links["shoe"]).parent, seed=seed, pace=pace, links=links, ack_timeout=None,
                       on_wait=_waiting, cards=cards, heartbeat=heartbeat or None)
    except (InvalidCard, CardNotInShoe) as exc:
        raise UsageError(f"simulate table: --cards: {exc} ({cfg.shoe_decks} deck(s) in the config)") from None
    return sim, rounds


_TABLE_REFUSED = {
    "fault": "--fault is for simulate shoe|pads: the table deals in step with the daemon (inject faults "
             "with simulate shoe or pads)",
    "port": "--port is for --via tcp of simulate shoe|pads: the table's devices are ptys at the config's "
            "[devices.*] url paths",
    "link": "--link is for simulate shoe|pads: the table's ptys go where the config's [devices.*] url "
            "paths say",
    "spots": "--spots is for simulate pads: the table bets on the config's [spots]",
    "presence_only": "--presence-only is for simulate pads: the table's pads read chip values (a spot's "
                     "nominal_stake in the config stands for a presence-only one)",
    "start_now": "--start-now is for simulate shoe|pads: the table waits until the daemon has opened "
                 "both devices",
}


def _refuse_table_options(args: argparse.Namespace) -> None:
    """One line naming the first option given that ``simulate table`` cannot honour."""
    for name, why in _TABLE_REFUSED.items():
        value = getattr(args, name, None)
        if value:  # None, False or [] when not given
            raise UsageError(f"simulate table: {why}")
    if args.via is not None and args.via != "pty":
        raise UsageError(f"simulate table: --via {args.via[:20]}: the table's devices are ptys at the "
                         "config's [devices.*] url paths (--via tcp is for simulate shoe|pads)")


def _waiting(device: str, seq: int, seconds: float) -> None:
    print(f"simulate table: {device} frame {seq} not acknowledged for {seconds:.0f} s; resending until "
          "the daemon takes it (is `tablesense run` running with this config?)", file=sys.stderr, flush=True)


async def _deal_table(sim: SimTable, rounds: int | None) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    async def deal() -> None:
        await sim.start()
        print(f"shoe {sim.urls['shoe']} pads {sim.urls['pads']}", flush=True)
        await sim.wait_host(timeout=365 * 86400.0)  # until the daemon opens both devices
        n = 0
        while rounds is None or n < rounds:
            if sim.script_mode and n and sim.shoe.remaining == 0 and sim.config.game != "uth":
                break  # the --cards are dealt
            try:
                await sim.play_round()
            except TimeoutError:
                raise UsageError(f"simulate table: the daemon did not acknowledge a frame within "
                                 f"{sim.ack_timeout:g} s (is `tablesense run` running with this config?)"
                                 ) from None
            except EOFError:
                raise UsageError(f"simulate table: --cards: the cards ran out in round {n + 1} (after {n} "
                                 "complete round(s)); give enough cards for the seats bet") from None
            n += 1

    task = asyncio.create_task(deal())
    waiter = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
    finally:
        waiter.cancel()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await sim.close()


def run(args: argparse.Namespace) -> int:
    """Entry point of ``tablesense simulate``; returns 0 after Ctrl-C / SIGTERM (``table``: also after
    ``--rounds``)."""
    from tablesense.daemon.logging import configure

    if args.device == "table":
        sim, rounds = build_table(args)
        configure("info" if args.verbose else "warning", stream=sys.stderr)
        try:
            asyncio.run(_deal_table(sim, rounds))
        except OSError as exc:
            raise UsageError(f"simulate table: {exc}") from None
        return 0
    if args.config:
        raise UsageError("simulate: --config is for simulate table")
    runner = build_runner(args)
    configure("info" if args.verbose else "warning", stream=sys.stderr)
    try:
        asyncio.run(_serve(runner))
    except OSError as exc:
        raise UsageError(f"simulate: {exc}") from None
    return 0
