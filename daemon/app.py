"""The daemon's wiring: devices -> state machine -> journal -> relay -> broker (bytes -> events -> round
-> settlements -> journal -> MQTT).

One asyncio loop, independent tasks, data flowing one way:

* one :class:`~drivers.link.DeviceLink` task per configured device puts decoded events and link states
  on a bounded queue (a full queue slows reading; nothing is dropped);
* the input task takes each item, stamps it with the arrival time (ISO 8601 UTC), runs it through
  :class:`~daemon.table.TableMachine` and appends the input and every emitted message to the journal in
  ONE transaction *before* anything is published (the transactional outbox, docs/journal.md), then
  acknowledges the frame to the device; items that queued up while the previous commit ran are taken
  together and committed in one transaction (group commit, :meth:`App._process_devices`), none of them
  acknowledged before it; the group's append (with its fsync) runs on the event loop while the disk is
  quick and the journal's lock free, else in a worker thread (:meth:`App._commit`), and the committed rows
  are handed to the relay (:meth:`Relay.notify`), which is woken only when there is something to
  publish (docs/performance.md);
* commands from the broker (``cmd/{name}``) are machine inputs too, handled the same way and answered
  with the machine's :class:`~daemon.table.CommandReply`; one lock around "machine, then journal" keeps
  device events and commands in the same order in both;
* the :class:`~daemon.mqtt.Relay` task publishes the outbox in order and never blocks the inputs:
  startup waits on neither the broker nor any device.

At every start the input task first journals a :class:`~daemon.table.inputs.TableStart` input, for
which the machine emits the retained table info (``info``: wagers, paytables, limits, seats) from the
current config; the baccarat scoreboard is emitted by the machine after every round and at a new shoe.

Crash recovery: at start the journal's inputs since the previous shoe began are replayed through a fresh
machine (their emits are already in the outbox and are discarded), which rebuilds the shoe and the open
round. An input that cannot be replayed (its application raises) does not stop the service: the app runs
refusing to settle, as for a damaged journal, with one line naming the input.

Intake (docs/protocol.md §3-5, docs/reliability.md "Card intake"): a device frame is applied and
journaled, then acknowledged (``AK``): nothing is acknowledged before it is journaled. A frame the
machine already applied in the device's current session (same number, same content:
:meth:`TableMachine.is_resend`) is a resend: dropped, and the last number applied is acknowledged again.
A frame numbered ahead of the next one due (a frame was lost on the line, or its journaling failed) is
held back, not applied and not acknowledged, for :data:`RESEND_WAIT` seconds: a device that resends
fills the gap in order, and the frames held back follow; a device that does not is applied with the
gap (``SEQUENCE_GAP``, the round held), and only then acknowledged, the journal recording the loss.
An identity frame with a new session is a device restart (``DEVICE_RESTARTED``): numbered afresh.

An exception while the machine applies an input leaves the machine equal to the replay of its journal
(it is rebuilt) and the input is journaled in full as a :class:`~daemon.table.inputs.RejectedInput`,
which raises a critical, holding ``INPUT_REJECTED`` alarm: never silently lost. The deal watchdog (``[round]
stall_seconds``) is a journaled :class:`~daemon.table.inputs.Tick` the app adds when the machine says one
is due, so the pure machine raises ``DEAL_STALLED`` from replayable time.

Retention: every :data:`PRUNE_EVERY_ROUNDS` completed rounds (a floor record journaled) the input task
starts the journal's maintenance (:meth:`App._maintain`: :meth:`Journal.maintenance` a step at a time on
the event loop, device inputs first), after acknowledging the input that completed the round;
the journal keeps the config's ``journal.retention_rounds`` (at least the current round and the 9
before it for recall) and ``journal.retention_days``, every undelivered row and what replay needs.

A journal that fails its integrity check at start (:class:`JournalDamaged`: a damaged journal
raises a critical alarm and tablesense refuses to settle rather than guess) does not stop the service:
:meth:`App.open` switches to a *refusing* mode. No machine is built and no device is opened (no input is
applied or acknowledged, so the devices keep their unacknowledged frames), and the relay publishes,
from memory and not through the journal, one critical ``JOURNAL_DAMAGED`` alarm on ``alarms`` and the
retained status ``{"state": "refusing", "detail": "journal damaged: settling refused: ..."}`` (the will
and a clean stop still publish ``offline``); commands are answered with the same refusal. SIGTERM exits
0. The journal file is never modified (docs/journal.md, "Integrity").

If the journal cannot be written, the input is not applied (the machine is rebuilt from the journal, so
its state never runs ahead of what is durable) nor acknowledged (the device resends it, and it is taken
again), nothing unjournaled is published, and the failure is logged as critical and shown in the retained
status (``detail``), republished at once when connected (:meth:`Relay.republish_status`) and again when
an append succeeds; one critical ``INTERNAL_ERROR`` alarm per failing spell is published from memory
(``seq`` 0, not in the journal, which just failed), and once the journal can be written again the spell
is journaled (:class:`~daemon.table.inputs.JournalOutage`), so the journal holds it too.

SIGTERM/SIGINT: the current input finishes (a transaction is never cut), links close, ``offline`` is
published when connected, and :meth:`App.run` returns 0 within about 4 s, also while the relay is backing
off. Under systemd: ``READY=1`` once the journal is open and replayed, ``WATCHDOG=1`` from the loop while
every task is alive, ``STOPPING=1`` on shutdown (:mod:`daemon.sdnotify`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import signal
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec

from tablesense.daemon import metrics, sdnotify
from tablesense.daemon.bounded import read_bounded
from tablesense.daemon.config import MAX_CONFIG_BYTES, TableConfig
from tablesense.daemon.journal import (
    Journal,
    JournalDamaged,
    JournalKeyError,
    JournalUnwritable,
    OutboxRow,
    load_key,
)
from tablesense.daemon.journal.codec import encode_event
from tablesense.daemon.journal.store import OFF_LOOP, ROUND_COMPLETE_SCHEMAS, message_schema
from tablesense.daemon.logging import bind_round, bind_table, get_logger
from tablesense.daemon.messages import AlarmMessage, TableStatus, encode_message
from tablesense.daemon.mqtt import (
    CommandRequest,
    DuplicateInstance,
    MqttSettings,
    Relay,
    load_credentials,
    tls_context,
)
from tablesense.daemon.table.alarms import ALARMS, AlarmCode
from tablesense.daemon.table.inputs import (
    Channel,
    Command,
    Emit,
    InstanceConflict,
    JournalOutage,
    RejectedInput,
    TableStart,
    Tick,
    TimedInput,
)
from tablesense.daemon.table.machine import RESEND_WINDOW, InputRejected, TableMachine
from tablesense.daemon.version import software_version
from tablesense.drivers.events import DeviceEvent, DeviceIdentity, DeviceState, SpotChanged
from tablesense.drivers.link import DeviceLink
from tablesense.drivers.protocols.tsref import SEQ_MODULUS

__all__ = ["COMMAND_BURST", "COMMAND_RATE", "PRUNE_EVERY_ROUNDS", "RESEND_WAIT", "STOP_SIGNALS", "App",
           "CommandRateLimit", "StartupError", "broker_settings", "journal_key", "mqtt_settings", "now_iso"]

log = get_logger(component="app")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""Signals that stop the daemon cleanly (the current input finishes, ``offline`` is published). SIGHUP
never stops it: ``tablesense run`` reloads the config on SIGHUP (:mod:`daemon.commands.run`)."""

_MAINTENANCE_SLICE = 0.001
"""Seconds of maintenance steps run back to back on the event loop before it looks at the devices again
(:meth:`App._maintain`; a step already started is finished: about 1 ms at most)."""
_MAINTENANCE_WAIT = 0.005
"""The longest maintenance waits for device inputs to go first before its next slice (seconds): under a
flood of inputs it still gets a slice every few milliseconds, about the share a worker thread gets of
the interpreter (whose switch interval is 5 ms)."""
_LOCK_RETRY = 0.0005
"""Seconds between two looks when a maintenance step waits for inputs or for the journal's lock."""
PRUNE_EVERY_ROUNDS = 10
"""Completed rounds between two :meth:`Journal.prune` calls (each deletes whole rounds in one
transaction; pruning every round would only add work)."""

RESEND_WAIT = 3.0
"""Seconds a frame numbered ahead of the next one due is held back, waiting for the device to resend
the missing one (protocol §3: a device resends what no ``AK`` covers within 1 s). Then the frames held
back are applied with the gap (``SEQUENCE_GAP``)."""

_R = TypeVar("_R")

SLOW_COMMIT = 0.25
"""Seconds: a group commit on the event loop that took longer (a slow or failing disk, an fsync that
stalls; far above a quick disk's commit, about 1 ms, and above what the other threads' turns with the
interpreter lock add to it) moves the group commits to a worker thread for a while (from
:data:`SLOW_COMMIT_HOLD_FIRST` up to :data:`SLOW_COMMIT_HOLD` seconds, :meth:`App._check_commit_time`)."""

SLOW_COMMIT_HOLD_FIRST = 10.0
"""Seconds the commits stay in a worker thread after a slow one; then they are tried on the loop again.
Each slow commit on the loop doubles the next hold, up to :data:`SLOW_COMMIT_HOLD`: a disk that stays
slow stalls the loop at most once per hold (10, 20, 40 ... s, then every 10 minutes), while one hiccup
of a good disk costs 10 s of commits in a thread, not 10 minutes (a commit in a worker thread costs
several times its CPU: docs/performance.md)."""

SLOW_COMMIT_HOLD = 600.0
"""The longest hold (seconds). A slow commit after a quiet spell this long (no slow commit on the loop)
starts again at :data:`SLOW_COMMIT_HOLD_FIRST`."""

GROUP_MAX = 256
"""Most device items taken off the queue into one group commit (:meth:`App._process_devices`)."""

_TIMER_STEP = 0.25
"""Seconds between two looks at the resend waits and the deal watchdog."""


COMMAND_RATE = 20.0
"""Default sustained operator commands per second a table accepts (inputs are bounded, docs/security.md
"Bounds")."""

COMMAND_BURST = 50
"""Default number of commands a table accepts at once before :data:`COMMAND_RATE` applies."""

_DEVICE_FIRST_WAIT = 2.0
"""Longest a command waits for queued device inputs to be applied before it takes its turn (seconds)."""

FUTURE_TOLERANCE = 5.0
"""A command whose ``issued_at`` is more than this many seconds ahead of the daemon's clock is refused."""

REPLAY_MAX_BYTES = 8 * 1024 * 1024
"""Most payload bytes one ``replay`` request republishes; the answer says where it stopped."""

_REMEMBERED_REPLAYS = 1024
"""``replay`` command ids whose answers the app keeps (a repeat is answered again, not replayed again)."""


def config_digest(path: str | os.PathLike[str] | None) -> str:
    """SHA-256 (hex) of the config file's bytes (read bounded, like ``load_config``); ``""`` without a
    path or when the file cannot be read any more."""
    if path is None:
        return ""
    try:
        return hashlib.sha256(read_bounded(os.fspath(path), MAX_CONFIG_BYTES, f"{path}: config")).hexdigest()
    except Exception:
        return ""


def _seq_ranges(seqs: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted seqs as inclusive ``(first, last)`` runs."""
    out: list[tuple[int, int]] = []
    for n in seqs:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


class CommandRateLimit:
    """A token bucket: ``rate`` commands per second sustained, ``burst`` at once (``rate`` > 0, ``burst``
    >= 1). :meth:`take` answers whether one more command may go now; ``refused`` counts the others.
    ``clock`` (seconds, monotonic) is injectable for tests."""

    def __init__(self, rate: float = COMMAND_RATE, burst: int = COMMAND_BURST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("command rate must be > 0 and burst >= 1")
        self.rate, self.burst, self._clock = float(rate), int(burst), clock
        self._tokens = float(burst)
        self._last = clock()
        self.refused = 0
        self._refused_run = 0

    def take(self) -> bool:
        """Take one token; ``False`` (and one log line per over-limit stretch) when none is left."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            if self._refused_run:
                log.warning("command_rate_limit_ended", refused=self._refused_run)
                self._refused_run = 0
            return True
        self.refused += 1
        if not self._refused_run:
            log.warning("command_rate_limited", rate=self.rate, burst=self.burst)
        self._refused_run += 1
        return False


class StartupError(Exception):
    """tablesense cannot start (one-line reason: journal damaged or in use, bad credentials or TLS)."""


_second: tuple[int, str] = (-1, "")
"""The last whole second :func:`now_iso` formatted, and its text (most inputs share their second)."""


def _step(steps: Iterator[Any]) -> tuple[bool, Any]:
    """Run one maintenance step: ``(False, what it yielded)``, or ``(True, rows deleted)`` after the last."""
    try:
        return False, next(steps)
    except StopIteration as end:
        return True, end.value


async def _step_beside_the_loop(steps: Iterator[Any]) -> tuple[bool, Any]:
    """:func:`_step` in a worker thread. Cancelled meanwhile, it waits for the step to end before it
    raises, so the steps are never closed while one runs."""
    running = asyncio.ensure_future(asyncio.to_thread(_step, steps))
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        await asyncio.wait({running})
        raise


def _completed(emits: Iterable[Emit]) -> int:
    """How many rounds the messages ``emits`` complete (messages of :data:`ROUND_COMPLETE_SCHEMAS`)."""
    return sum(message_schema(e.message) in ROUND_COMPLETE_SCHEMAS for e in emits)


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds and ``Z`` (the journal's input stamp), e.g.
    ``2026-12-01T16:45:18.123Z``."""
    global _second
    sec, ms = divmod(time.time_ns() // 1_000_000, 1000)
    cached = _second
    if sec != cached[0]:
        cached = _second = (sec, datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{cached[1]}.{ms:03d}Z"


def mqtt_settings(config: TableConfig) -> MqttSettings:
    """:class:`MqttSettings` from the table config, with credentials read and checked.

    Raises :class:`StartupError` (via :class:`~daemon.mqtt.CredentialsError`) when the credentials file
    is missing, malformed, or accessible by other users.
    """
    m = config.mqtt
    user: str | None = None
    password: str | None = None
    if m.credentials_file:
        from tablesense.daemon.mqtt import CredentialsError
        try:
            user, password = load_credentials(m.credentials_file)
        except CredentialsError as exc:
            raise StartupError(str(exc)) from None
    tls = m.tls
    # the production broker binds the client id to the user name (use_username_as_clientid): say so
    client_id = m.client_id or user or config.client_id
    return MqttSettings(
        host=m.host, port=m.port, table=config.table, client_id=client_id, prefix=m.topic_prefix,
        protocol=m.protocol, fallback=m.fallback,
        keepalive=m.keepalive, session_expiry=m.session_expiry, max_message_bytes=m.max_message_bytes,
        ca_file=tls.ca_file if tls else None, cert_file=tls.cert_file if tls else None,
        key_file=tls.key_file if tls else None, credentials_file=m.credentials_file,
        username=user, password=password)


def broker_settings(config: TableConfig) -> tuple[MqttSettings, ssl.SSLContext | None]:
    """:func:`mqtt_settings` and, with ``[mqtt.tls]``, the client TLS context (CA, client certificate).

    The checks ``tablesense run`` makes before starting anything, also used by ``tablesense
    check-config``. Raises :class:`StartupError` (one line naming the file) when the credentials file is
    missing, malformed or accessible by other users, or a TLS file cannot be loaded.
    """
    settings = mqtt_settings(config)
    tls = None
    if settings.ca_file:
        from tablesense.daemon.mqtt import CredentialsError
        try:
            tls = tls_context(settings.ca_file, settings.cert_file, settings.key_file)
        except CredentialsError as exc:
            raise StartupError(str(exc)) from None
    return settings, tls


def journal_key(config: TableConfig) -> bytes:
    """The table's journal sealing key from ``[journal] key_file`` (docs/journal.md "The key").

    Raises :class:`StartupError` (one line naming the file) when it is missing, unreadable, too short or
    accessible by other users, or names a systemd credential outside a service."""
    try:
        return load_key(config.journal.key_file)
    except JournalKeyError as exc:
        raise StartupError(str(exc)) from None


def _ahead(seq: int, due: int) -> int:
    """How far ``seq`` is ahead of ``due`` (modulo the wrap), 0 when it is ``due`` or behind it; never
    more than :data:`RESEND_WINDOW` (a device keeps at most that many frames to resend)."""
    d = (seq - due) % SEQ_MODULUS
    return d if d <= RESEND_WINDOW else 0


class _ReplayFailed(Exception):
    """An input of the journal cannot be replayed; ``str()`` names it (one line)."""


class _Wait:
    """A device's frames held back while the frame due is awaited (see :data:`RESEND_WAIT`)."""

    __slots__ = ("deadline", "held")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.held: dict[int, DeviceEvent] = {}


class _MemoryOutbox:
    """The relay's outbox while refusing (damaged journal): a few rows held in memory, never journaled."""

    def __init__(self, rows: list[OutboxRow]) -> None:
        self._rows = rows
        self._delivered: set[int] = set()

    def pending(self, limit: int, after_row: int) -> list[OutboxRow]:
        return [r for r in self._rows if r.row_id > after_row and r.row_id not in self._delivered][:limit]

    def mark_delivered(self, row_id: int) -> None:
        self._delivered.add(row_id)

    def retained_latest(self) -> list[OutboxRow]:
        return []


class App:
    """One table's daemon. ``App(config)``; ``await app.run()`` until :meth:`stop` or a signal.

    ``install_signals``: handle SIGTERM/SIGINT (:data:`STOP_SIGNALS`) by stopping (the ``run``
    command; tests leave it off
    and call :meth:`stop`). ``links``: extra or replacement links for tests (default: one per
    configured device). Attributes for tests and the demo: ``machine``, ``journal``, ``relay``,
    ``inputs`` (inputs processed), ``dropped_resends``, ``journal_failures``.

    Raises :class:`StartupError` from :meth:`open` when the journal is held by another process or its
    directory is unusable, or when credentials/TLS files are unusable. A damaged journal is no
    StartupError: the app runs refusing to settle (``refusal`` holds the reason, see the module doc).
    """

    def __init__(self, config: TableConfig, *, install_signals: bool = False,
                 queue_size: int = 4096, command_rate: float | None = None,
                 command_burst: int | None = None,
                 config_path: str | os.PathLike[str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.instance = secrets.token_hex(8)
        """This process's instance id (16 hex) in the retained status and the will (docs/mqtt.md)."""
        self.config_digest = config_digest(config_path)
        """SHA-256 of the config file's bytes (``config_path``; ``""`` without one) for the status."""
        self.software = software_version()
        """The ``software`` of the retained status: the package metadata, as ``tablesense --version``."""
        self._replay_answers: OrderedDict[str, tuple[bool, str]] = OrderedDict()
        self._replay_lock = asyncio.Lock()
        self._install_signals = install_signals
        self.queue: asyncio.Queue[DeviceEvent | DeviceState] = asyncio.Queue(maxsize=queue_size)
        self.machine: TableMachine | None = None
        self.journal: Journal | None = None
        self.relay: Relay | None = None
        self.links: dict[str, DeviceLink] = {}
        self._stop = asyncio.Event()
        self._commit_lock = asyncio.Lock()
        self._commits_in_thread_until = 0.0  # time.monotonic(): after a slow commit (App._commit)
        self._slow_hold = SLOW_COMMIT_HOLD_FIRST  # the next hold (seconds), doubled by each slow commit
        self.slow_commits = 0
        """Commits on the event loop that took longer than :data:`SLOW_COMMIT` seconds."""
        self.command_limit = CommandRateLimit(
            config.mqtt.command_rate if command_rate is None else command_rate,
            config.mqtt.command_burst if command_burst is None else command_burst)
        """Operator commands over this rate (``[mqtt] command_rate``/``command_burst`` unless given) are
        answered "rate limited" and not journaled."""
        self._devices_waiting = 0
        self._status_detail = ""
        self._tasks: list[asyncio.Task[None]] = []
        self._side_tasks: set[asyncio.Task[None]] = set()
        self.ready = asyncio.Event()
        self.inputs = 0
        self.dropped_resends = 0
        """Device frames dropped as resends of frames already journaled (acknowledged again)."""
        self.held_back = 0
        """Device frames held back behind a missing one (:data:`RESEND_WAIT`)."""
        self.journal_failures = 0
        self.rejected_inputs = 0
        """Inputs whose application raised, journaled as :class:`RejectedInput`."""
        self.last_ack: dict[str, int] = {}
        """The last sequence number acknowledged to each device (tests, diagnostics)."""
        self.prunes = 0
        """:meth:`Journal.prune` calls made (tests)."""
        self._rounds_since_prune = 0
        self._prune_task: asyncio.Task[None] | None = None
        self._clock = clock
        self._waits: dict[str, _Wait] = {}
        self._failed: dict[str, tuple[DeviceEvent, float]] = {}
        """Per device, a frame whose journaling failed and when: it is the frame due until the device
        resends it (frames after it are held back like frames after a lost one), or, after
        :data:`RESEND_WAIT`, until the app applies it itself (it was received intact)."""
        self._outage: JournalOutage | None = None
        self._staged: list[tuple[TimedInput, list[Emit], bool]] | None = None
        """Inputs applied and waiting for their group's commit (:meth:`_process_devices`), else ``None``."""
        self._group_acks: set[str] | None = None
        self._staged_rounds = 0
        self._group_failed_devices: set[str] = set()
        """Devices whose first frame of the group whose commit just failed is now the one due."""
        self.refusal: str | None = None
        """Why settling is refused (the journal was damaged or cannot be replayed), ``None`` normally."""

    # -- lifecycle ------------------------------------------------------------------------------------
    def open(self) -> None:
        """Open the journal, replay it, and build the relay and links (no I/O to broker or devices)."""
        cfg = self.config
        bind_table(cfg.table)
        settings, tls = broker_settings(cfg)
        key = journal_key(cfg)
        try:
            self.journal = Journal(cfg.journal.directory, cfg.table, key=key,
                                   retention_rounds=cfg.journal.retention_rounds,
                                   retention_days=float(cfg.journal.retention_days) or None,
                                   max_size=cfg.journal.max_size_bytes)
            self.machine = self._rebuilt_machine()
        except JournalUnwritable as exc:
            if self.journal is not None:
                self.journal.close()
                self.journal = None
            raise StartupError(str(exc)) from None
        except (JournalDamaged, _ReplayFailed) as exc:
            if self.journal is not None:
                self.journal.close()
                self.journal = None
            what = "journal damaged" if isinstance(exc, JournalDamaged) else "journal cannot be replayed"
            self._open_refusing(settings, tls, f"{what}: settling refused: {exc}")
            return
        self.relay = Relay(settings, self.journal, self._status_payload, on_command=self._on_command, tls=tls,
                           instance=self.instance, epoch=self.journal.epoch,
                           on_duplicate=self._on_duplicate)
        for name, dev in cfg.devices.items():
            # a link that stays stale is reopened (docs/configuration.md "stale_reconnect"): a half-open
            # socket:// connection never errors, and the table would wait for that device forever
            self.links[name] = DeviceLink(name, dev.url, dev.protocol, baud=dev.baud, queue=self.queue,
                                          stale_reconnect=dev.reopen_stale_after())
        log.info("daemon_opened", game=cfg.game, journal=str(self.journal.path), devices=list(cfg.devices),
                 broker=f"{settings.host}:{settings.port}", pending=self.journal.pending_count())

    def _open_refusing(self, settings: MqttSettings, tls: ssl.SSLContext | None, refusal: str) -> None:
        """Refusing mode (damaged journal, or one that cannot be replayed): a relay over an in-memory
        outbox holding the alarm, no links."""
        self.refusal = refusal
        self._status_detail = self.refusal
        log.critical("journal_damaged_settling_refused", error=refusal,
                     message=f"{self.config.table}: {self.refusal}; no device input is applied until an "
                             "authorised person moves the journal file aside and restarts tablesense")
        table = self.config.table
        alarm = AlarmMessage(
            table=table, ts=now_iso(), msg_id=f"{table}-{secrets.token_hex(4)}-journal-damaged",
            alarm_id="journal", code=AlarmCode.JOURNAL_DAMAGED.value,
            severity=ALARMS[AlarmCode.JOURNAL_DAMAGED].severity.value, text=self.refusal[:400], held=True)
        outbox = _MemoryOutbox([OutboxRow(row_id=1, seq=0, msg_id=alarm.msg_id, channel=Channel.ALARMS.value,
                                          device=None, payload=encode_message(alarm), retain=False, qos=1)])
        self.relay = Relay(settings, outbox, self._status_payload, on_command=self._refuse_command, tls=tls,
                           instance=self.instance)

    async def _refuse_command(self, request: CommandRequest) -> tuple[bool, str]:
        return False, self.refusal or "settling refused"

    def _rebuilt_machine(self) -> TableMachine:
        """A fresh machine rebuilt from the journal alone (emits discarded: already in the outbox).

        The journal's recipe (:meth:`Journal.replay_inputs`): the machine at ``journal.replay_shoe``, its
        bet pads seeded with :meth:`Journal.pads_before_replay` and its devices' facts (sessions, link
        states, sequence numbers, the frames they may resend) with :meth:`Journal.devices_before_replay`,
        then every input since the start of the previous shoe. Raises :class:`_ReplayFailed` (one line
        naming the input) when applying a journaled input raises, :class:`JournalDamaged` when a row
        cannot be read.
        """
        assert self.journal is not None
        shoe = self.journal.replay_shoe
        machine = TableMachine(self.config, shoe=shoe if isinstance(shoe, int) and shoe > 0 else 1)
        machine.seed_pads([inp.event for inp in self.journal.pads_before_replay()
                           if isinstance(inp.event, SpotChanged)])
        machine.seed_devices(self.journal.devices_before_replay())
        replayed = 0
        for inp in self.journal.replay_inputs():
            try:
                if isinstance(inp.event, Command):
                    machine.handle_command(inp)
                else:
                    machine.handle(inp)
            except InputRejected as exc:
                raise _ReplayFailed(f"input {replayed + 1} of the replay ({type(inp.event).__name__} of "
                                    f"{inp.ts[:40]}) raised {exc}") from None
            replayed += 1
        if replayed:
            log.info("journal_replayed", inputs=replayed, shoe=shoe)
        return machine

    async def run(self) -> int:
        """Run until stopped; returns the exit status (0 on a clean stop)."""
        if self.relay is None:
            self.open()
        assert self.relay is not None
        loop = asyncio.get_running_loop()
        if self._install_signals:
            for sig in STOP_SIGNALS:
                loop.add_signal_handler(sig, self.stop)
        relay_task = asyncio.create_task(self.relay.run(), name="relay")
        input_task = asyncio.create_task(self._inputs(), name="inputs")
        timer_task = asyncio.create_task(self._timers(), name="timers")
        link_tasks = [asyncio.create_task(link.run(), name=f"link-{name}")
                      for name, link in self.links.items()]  # none while refusing
        self._tasks = [relay_task, input_task, timer_task, *link_tasks]
        watchdog = asyncio.create_task(self._watchdog(), name="watchdog")
        self.relay.notify()  # rows left undelivered by a previous run
        self.ready.set()
        status = "refusing to settle: journal damaged" if self.refusal else "running"
        sdnotify.notify(f"READY=1\nSTATUS={status}")
        log.info("daemon_ready", refusing=self.refusal is not None)
        try:
            await self._stop.wait()
        finally:
            self._stop.set()  # also when cancelled: nothing new starts (a maintenance due at its end)
            sdnotify.notify("STOPPING=1")
            log.info("daemon_stopping")
            async with self._commit_lock:  # the input being journaled finishes its transaction first
                input_task.cancel()  # and before the links: their final "stopped" is not a device loss
                timer_task.cancel()
                await asyncio.gather(input_task, timer_task, return_exceptions=True)
            for t in link_tasks:
                t.cancel()
            await asyncio.gather(*link_tasks, return_exceptions=True)
            try:  # never skip the rest of the shutdown (Relay.stop logs a dead relay task itself)
                await self.relay.stop(relay_task, stop_timeout=3.0)
            except Exception:
                log.exception("relay_stop_failed")
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)
            if self._prune_task is not None:  # maintenance stops after its current step
                if self.journal is not None:
                    self.journal.stop_maintenance()
                await asyncio.gather(self._prune_task, return_exceptions=True)
            if self._install_signals:
                for sig in STOP_SIGNALS:
                    loop.remove_signal_handler(sig)
            if self.journal is not None:
                self.journal.close()
            log.info("daemon_stopped")
        return 0

    def stop(self) -> None:
        """Ask :meth:`run` to finish (safe from a signal handler)."""
        self._stop.set()

    # -- inputs ---------------------------------------------------------------------------------------
    async def _inputs(self) -> None:
        if self.machine is not None and self.journal is not None:
            await self._announce()
        while True:
            items = [await self.queue.get()]
            while len(items) < GROUP_MAX and not self.queue.empty():
                items.append(self.queue.get_nowait())  # arrived while the last group was committed
            try:
                await self._process_devices(items)
            except Exception:  # a defect must not stop the table: log it, keep reading
                log.exception("input_failed", input=repr(items[0])[:200], group=len(items))
            await self._prune_if_due()

    async def _announce(self) -> None:
        """Journal a :class:`TableStart` input first thing on every start: the machine emits the retained
        table info (wagers, paytables, limits, seats) from this run's config, published like any message.
        Not counted in :attr:`inputs` (no device input or command)."""
        async with self._commit_lock:
            await self._apply(TimedInput(ts=now_iso(), event=TableStart()), counted=False)

    async def _process_device(self, item: DeviceEvent | DeviceState) -> bool:
        """Take one device item through intake (module doc): ``True`` when it (or frames it released) was
        applied and journaled, ``False`` when it was a resend, held back, refused or not journaled. The
        acknowledgements are sent after the commit lock is released."""
        return await self._process_devices([item])

    async def _process_devices(self, items: Sequence[DeviceEvent | DeviceState]) -> bool:
        """Group commit: take ``items`` (in arrival order) through intake under one hold of the commit
        lock, the machine applying each as today, and journal all their inputs in ONE transaction (one
        fsync) before any of them is acknowledged. ``True`` when every item was
        applied and journaled (:meth:`_process_device`'s meaning for one item).

        A commit that fails leaves the journal without any of the group's inputs: the machine is rebuilt
        from the journal, and each device with frames in the group is treated as if its first frame of
        the group had failed alone (:meth:`_group_failed`): nothing of the group is acknowledged, the
        device resends, or the host journals the frame itself after :data:`RESEND_WAIT`. An input the
        machine rejects commits the group so far first (its rebuild reads the journal).
        """
        if self.refusal is not None or self.machine is None:
            return False
        self._devices_waiting += 1
        try:
            await self._commit_lock.acquire()
        finally:
            self._devices_waiting -= 1
        acks: set[str] = set()
        ok = True
        try:
            self._staged, self._group_acks, self._staged_rounds = [], acks, 0
            for item in items:
                try:
                    ok = await self._intake(item, acks) and ok
                except Exception:  # a defect must not stop the table: log it, take the next one
                    ok = False
                    log.exception("input_failed", input=repr(item)[:200])
            ok = await self._flush_staged() and ok
        finally:
            self._staged, self._group_acks = None, None
            self._group_failed_devices = set()
            self._commit_lock.release()
        await self._send_acks(acks)
        return ok

    async def _flush_staged(self) -> bool:
        """Journal the inputs staged so far (group commit) in one transaction; ``False`` when it failed
        (then handled by :meth:`_group_failed`). Staging goes on afterwards."""
        staged = self._staged
        if not staged:
            return True
        assert self.journal is not None and self.relay is not None
        self._staged, self._staged_rounds = [], 0
        self._group_failed_devices = set()
        try:
            if len(staged) == 1:
                inp, emits, _ = staged[0]
                groups = [await self._commit(self.journal.append, inp, emits)]
            else:
                groups = await self._commit(self.journal.append_many,
                                            [(inp, emits) for inp, emits, _ in staged])
        except Exception as exc:  # any failure of the journaling step: none of them was journaled
            self._group_failed(staged, exc)
            return False
        for (inp, emits, counted), rows in zip(staged, groups, strict=True):
            self._journaled(inp, emits, rows, counted)
        if self._outage is not None:
            saved, self._staged = self._staged, None
            try:
                await self._record_outage()
            finally:
                self._staged = saved
        return True

    async def _commit(self, append: Callable[..., _R], *args: Any) -> _R:
        """Run a group commit of device inputs (``append(*args)``: :meth:`Journal.append` or
        :meth:`Journal.append_many`) and return what it returns, raising what it raises; timed into the
        commit metric.

        On the event loop itself when the journal's lock is free (:meth:`Journal.lock_if_free`): a commit
        is an fsync and a few SQLite statements, and in a worker thread it has to take Python's
        interpreter lock back from the busy loop at each statement and at the fsync. Measured on a
        2-core VM (docs/performance.md "Commits on the loop"): with the commits in a worker thread, the
        worker threads spent 13-13.5 ms of CPU a round against 3.7 ms with them on the loop, the daemon
        32-34 ms a round against 28-29 ms. Every device input waits for its commit anyway (journal
        before publish, acknowledgement after commit), so the loop gives up only what it would have done
        beside it. When another thread
        holds the lock (a maintenance step, a recall or replay read) the commit goes to a worker thread
        and waits there, not on the loop. A commit on the loop that takes longer than
        :data:`SLOW_COMMIT` (a slow or failing disk) is logged (``journal_commit_slow``) and sends the
        commits to a worker thread for a while (:meth:`_check_commit_time`); a commit that never returns
        (a hung disk) stops the loop, and with it the systemd watchdog's pings: systemd restarts the
        daemon (docs/reliability.md)."""
        assert self.journal is not None
        timed = metrics.timed(append)
        if time.monotonic() >= self._commits_in_thread_until:
            with self.journal.lock_if_free() as free:
                if free:
                    started = time.monotonic()
                    try:
                        return timed(*args)
                    finally:
                        self._check_commit_time(time.monotonic() - started)
        return await asyncio.to_thread(timed, *args)

    def _check_commit_time(self, took: float) -> None:
        """After a commit on the loop: one slower than :data:`SLOW_COMMIT` sends the commits to a worker
        thread for a hold of :data:`SLOW_COMMIT_HOLD_FIRST` seconds, doubled by each slow commit up to
        :data:`SLOW_COMMIT_HOLD`, and back to the first after that long without one (logged, counted in
        :attr:`slow_commits`)."""
        if took <= SLOW_COMMIT:
            return
        now = time.monotonic()
        if self.slow_commits and now - self._commits_in_thread_until > SLOW_COMMIT_HOLD:
            self._slow_hold = SLOW_COMMIT_HOLD_FIRST  # a quiet spell since the last hold ended
        hold = self._slow_hold
        self._slow_hold = min(hold * 2, SLOW_COMMIT_HOLD)
        self.slow_commits += 1
        self._commits_in_thread_until = now + hold
        log.warning("journal_commit_slow", seconds=round(took, 3), hold_s=hold,
                    message=f"a journal commit took {took * 1000:.0f} ms on the event loop: commits run in a "
                            f"worker thread for the next {hold:.0f} s (slow disk?)")

    def _group_failed(self, staged: list[tuple[TimedInput, list[Emit], bool]], exc: Exception) -> None:
        """A group commit failed: as :meth:`_journal_failed` for its first input (status, one alarm per
        spell, the machine rebuilt from the journal), and every device with a frame in the group waits
        for its first one again, as after a failed write of that frame alone (:meth:`_intake`), with its
        later frames of the group held back behind it (applied after it if the device does not resend,
        as frames that come after a failed write are), and is not acknowledged (its last journaled
        number may belong to a session it has left)."""
        self._journal_failed(staged[0][0], exc)
        self.journal_failures += len(staged) - 1
        now = self._clock()
        for inp, _, _ in staged:
            ev = inp.event
            if isinstance(ev, DeviceEvent):
                if self._group_acks is not None:
                    self._group_acks.discard(ev.device)
                if ev.device not in self._group_failed_devices:  # its first frame of the group
                    self._group_failed_devices.add(ev.device)
                    self._failed[ev.device] = (ev, now)
                    self._keep_held(ev.device, (), now)  # frames held back before the group stay held
                else:  # the later ones: held back behind it, as if they had come after the failure
                    self._keep_held(ev.device, (ev,), now)

    def _fail_frame(self, device: str, ev: DeviceEvent, rest: Sequence[DeviceEvent] = ()) -> None:
        """``ev`` was not journaled: it is the device's frame due until it is resent (or applied by the
        host after :data:`RESEND_WAIT`). The frames held back behind it, and ``rest`` (frames that were
        to follow it, in order), stay held back behind it (:meth:`_keep_held`): received intact, they
        are never dropped and never acknowledged over (docs/protocol.md §3). After a failed group commit
        (:meth:`_group_failed`) the device's first frame of the group is the one due, so ``ev`` and
        ``rest`` are held back behind that one."""
        now = self._clock()
        if device in self._group_failed_devices:
            self._keep_held(device, (ev, *rest), now)
            return
        self._failed[device] = (ev, now)
        self._keep_held(device, rest, now)

    def _keep_held(self, device: str, frames: Iterable[DeviceEvent], now: float) -> None:
        """Keep the frames held back for ``device`` plus ``frames`` (frames received intact and not
        journaled, behind the device's frame due) for another :data:`RESEND_WAIT` from ``now``: the
        device may resend the frame due meanwhile; if not, the host applies them all in order
        (:meth:`_release_held`). The frame due itself (``_failed``) is never held twice."""
        failed = self._failed.get(device)
        wait = self._waits.get(device)
        if wait is None:
            wait = self._waits[device] = _Wait(now + RESEND_WAIT)
        wait.deadline = now + RESEND_WAIT
        for f in frames:
            if failed is None or f != failed[0]:
                wait.held[f.seq] = f
        if not wait.held:
            self._waits.pop(device, None)

    async def _intake(self, item: DeviceEvent | DeviceState, acks: set[str]) -> bool:
        """Under the commit lock: resend, restart, order and hold-back rules, then apply."""
        machine = self.machine
        if machine is None or self.refusal is not None:
            return False
        if isinstance(item, DeviceState):
            return await self._apply(TimedInput(ts=now_iso(), event=item))
        device = item.device
        failed = self._failed.get(device)
        known = machine.session(device)
        # a restart's identity frame that could not be journaled yet: nothing old can be resent any more
        restarting = (failed is not None and isinstance(failed[0], DeviceIdentity) and known is not None
                      and failed[0].session != known)
        if not restarting and machine.is_resend(item):
            self.dropped_resends += 1
            log.info("device_resend_dropped", device=device, seq=item.seq)
            acks.add(device)  # already journaled: AK the last number applied again (protocol §3)
            return False
        restart = isinstance(item, DeviceIdentity) and known is not None and item.session != known
        last = machine.last_seq(device)
        due = failed[0].seq if failed is not None else None if last is None else (last + 1) % SEQ_MODULUS
        wait = self._waits.get(device)
        if not restart and due is not None and _ahead(item.seq, due):
            if wait is None:
                wait = self._waits[device] = _Wait(self._clock() + RESEND_WAIT)
                log.warning("device_frames_held_back", device=device, due=due, got=item.seq,
                            message=f"{device}: frame {due} missing, {item.seq} held back until the device "
                                    f"resends it (at most {RESEND_WAIT:g} s)")
            wait.held[item.seq] = item
            self.held_back += 1
            if len(wait.held) < RESEND_WINDOW:
                return False
            return await self._release_held(device, acks)  # as many as a device can resend: no use waiting
        # the resend of a restart's identity frame that could not be journaled: it goes first, then
        # the frames of its session held behind it (:meth:`_drain`)
        resent_restart = (restarting and failed is not None and isinstance(item, DeviceIdentity)
                          and item.session == getattr(failed[0], "session", None))
        if restart and not resent_restart and (failed is not None or wait is not None):
            # a restarted device resends nothing of its old session (or of a session whose own restart
            # could not be journaled yet): what of it is held back (received intact, kept, never
            # dropped: docs/protocol.md §3) is applied now, before the restart, the first with the gap,
            # as when no resend comes (:meth:`_release_held`)
            await self._release_held(device, acks, "the device restarted (its old session resends nothing)")
            if device in self._failed or device in self._waits:  # not journaled: the restart waits too
                self._keep_held(device, (item,), self._clock())
                return False
            wait = None
        ok = await self._apply(TimedInput(ts=now_iso(), event=item))
        if not ok:
            self._fail_frame(device, item)  # nothing after it goes before it
            return False
        self._failed.pop(device, None)
        acks.add(device)
        if wait is not None:  # after a restart that could not be journaled at once: its new frames
            await self._drain(device, acks)
        return True

    async def _drain(self, device: str, acks: set[str]) -> None:
        """Apply the frames held back for ``device`` that are now due, in order."""
        wait = self._waits.get(device)
        machine = self.machine
        while wait is not None and machine is not None:
            last = machine.last_seq(device)
            nxt = wait.held.pop((last + 1) % SEQ_MODULUS, None) if last is not None else None
            if nxt is None:
                break
            if machine.is_resend(nxt):
                continue
            if not await self._apply(TimedInput(ts=now_iso(), event=nxt)):
                self._fail_frame(device, nxt)
                return
            machine = self.machine
        if wait is not None and not wait.held:
            self._waits.pop(device, None)

    async def _release_held(self, device: str, acks: set[str], why: str = "no resend came") -> bool:
        """The awaited frame did not come (``why``, logged: no resend in time, or the device restarted):
        a frame whose journaling failed is applied first (it was received intact), then what was held
        back, in the order it came; a frame still missing makes the first of them carry the gap
        (``SEQUENCE_GAP``)."""
        failed = self._failed.pop(device, None)
        wait = self._waits.pop(device, None)
        frames = ([failed[0]] if failed is not None else []) + (list(wait.held.values()) if wait else [])
        if not frames or self.machine is None:
            return False
        log.warning("device_frames_released", device=device, frames=len(frames),
                    message=f"{device}: {why}; {len(frames)} frame(s) applied as received"
                            + ("" if failed is not None else ", the first with the gap (SEQUENCE_GAP)"))
        applied = False
        for i, ev in enumerate(frames):  # in the order they came: the device sends in order
            machine = self.machine
            if machine is None or ((failed is None or ev is not failed[0]) and machine.is_resend(ev)):
                continue
            if not await self._apply(TimedInput(ts=now_iso(), event=ev)):
                self._fail_frame(device, ev, frames[i + 1:])  # the rest stays held back behind it
                return applied
            applied = True
            acks.add(device)
        return applied

    async def _send_acks(self, devices: Iterable[str]) -> None:
        """Acknowledge to each device the last frame of it that is journaled (cumulative ``AK``)."""
        for device in devices:
            seq = self.machine.last_seq(device) if self.machine is not None else None
            if seq is None:
                continue
            self.last_ack[device] = seq
            link = self.links.get(device)
            if link is not None:
                await link.ack(seq)

    async def _apply(self, inp: TimedInput, *, counted: bool = True) -> bool:
        """Under the commit lock: apply one input to the machine and journal it with its emits (the
        input's row is encoded first, so a row that cannot be written never changes the machine). When
        the machine raises, the input is journaled as a :class:`RejectedInput` instead. ``True`` when
        journaled (the input or its rejection)."""
        if not self._encodable(inp):
            return False
        assert self.machine is not None
        try:
            emits = self.machine.handle(inp)
        except InputRejected as exc:
            return await self._reject(inp, str(exc))
        return await self._journal(inp, emits, counted=counted)

    async def _reject(self, inp: TimedInput, error: str) -> bool:
        """The machine raised applying ``inp``: rebuild it from the journal (so it equals the journal's
        replay again) and journal the input in full as a :class:`RejectedInput`, whose ``INPUT_REJECTED``
        alarm holds the round. ``True`` when the rejection is journaled."""
        if self._staged is not None and not await self._flush_staged():
            return False  # the group before it failed: the machine is rebuilt, this input is resent
        self.rejected_inputs += 1
        kind, payload = encode_event(inp.event)
        device = getattr(inp.event, "device", None)
        seq = getattr(inp.event, "seq", None)
        log.critical("input_rejected", input=kind, device=device, seq=seq, error=error,
                     message=f"{self.config.table}: applying a {kind} input raised {error}: journaled as "
                             "rejected, round held (INPUT_REJECTED)")
        rejected = TimedInput(ts=inp.ts, event=RejectedInput(
            kind=kind, payload=payload.decode(), error=error[:300],
            device=device if isinstance(device, str) else None,
            seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else None))
        try:
            self.machine = self._rebuilt_machine()
            emits = self.machine.handle(rejected)
        except (_ReplayFailed, InputRejected, JournalDamaged) as exc:
            self._refuse_now(f"the machine cannot be rebuilt from its journal: {exc}")
            return False
        return await self._journal(rejected, emits)

    def _refuse_now(self, reason: str) -> None:
        """The running machine can no longer be trusted to equal its journal: stop applying inputs (none
        is acknowledged, so the devices keep their frames) and refuse to settle, as at start."""
        if self.refusal is not None:
            return
        self.refusal = f"settling refused: {reason}"[:400]
        self._status_detail = self.refusal
        log.critical("settling_refused", error=reason,
                     message=f"{self.config.table}: {self.refusal}; restart tablesense (the journal is kept)")
        if self.relay is not None:
            self.relay.republish_status()
            table = self.config.table
            self.relay.publish_alarm(encode_message(AlarmMessage(
                table=table, ts=now_iso(), msg_id=f"{table}-{secrets.token_hex(4)}-refusing",
                alarm_id="journal", code=AlarmCode.INPUT_REJECTED.value,
                severity=ALARMS[AlarmCode.INPUT_REJECTED].severity.value, text=self.refusal, held=True)))

    def _encodable(self, inp: TimedInput) -> bool:
        """The input's journal row can be encoded (checked BEFORE the machine sees it, so a row that
        cannot be written never changes the machine); logged as critical otherwise."""
        try:
            encode_event(inp.event)
        except Exception as exc:
            log.critical("input_not_journalable", error=f"{type(exc).__name__}: {str(exc)[:160]}",
                         input=type(inp.event).__name__)
            return False
        return True

    # -- timers ---------------------------------------------------------------------------------------
    async def _timers(self) -> None:
        """Every :data:`_TIMER_STEP` seconds: release frames held back too long, and journal a
        :class:`Tick` when the machine's deal watchdog is due (:meth:`TableMachine.stall_due`)."""
        while True:
            await asyncio.sleep(_TIMER_STEP)
            try:
                await self._timer_step()
            except Exception:  # a defect must not stop the timers
                log.exception("timer_failed")

    async def _timer_step(self) -> None:
        """One look at the resend waits and the deal watchdog (also called by tests)."""
        if self.refusal is not None or self.machine is None:
            return
        now = self._clock()
        expired = sorted({d for d, w in self._waits.items() if w.deadline <= now}
                         | {d for d, (_, at) in self._failed.items() if at + RESEND_WAIT <= now})
        due = self.machine.stall_due()
        if not expired and (due is None or now_iso() < due):
            return
        acks: set[str] = set()
        async with self._commit_lock:
            for device in expired:
                await self._release_held(device, acks)
            machine = self.machine
            due = machine.stall_due() if machine is not None and self.refusal is None else None
            if due is not None and now_iso() >= due:
                await self._apply(TimedInput(ts=now_iso(), event=Tick()), counted=False)
        await self._send_acks(acks)

    async def _lock_after_devices(self) -> None:
        """Take ``_commit_lock`` for a command, letting device inputs already queued or waiting for the
        lock go first (settlement inputs from devices take precedence over commands), for at most
        :data:`_DEVICE_FIRST_WAIT` seconds."""
        deadline = time.monotonic() + _DEVICE_FIRST_WAIT
        while True:
            while (self._devices_waiting or not self.queue.empty()) and time.monotonic() < deadline:
                await asyncio.sleep(0.002)
            await self._commit_lock.acquire()
            if not self._devices_waiting or time.monotonic() >= deadline:
                return
            self._commit_lock.release()  # a device input queued behind us meanwhile: it goes first

    async def _on_command(self, request: CommandRequest) -> tuple[bool, str]:
        """Journal and apply one parsed command; ``(ok, one-line reason)``.

        Over :attr:`command_limit` the answer is ``"rate limited"`` and nothing is journaled. ``replay``
        is answered by :meth:`_replay` (it changes nothing, so it is not journaled). Every other command
        goes to the machine as received, with its ``command_id``: a repeated id gets the first answer
        (the machine keeps them, rebuilt from the journal after a restart); one refused here (retained,
        expired, from the future: :meth:`_command_refusal`) is journaled with its refusal and not
        applied. A command whose journal row cannot be encoded or written is not applied (the machine is
        rebuilt from the journal when the failure comes after the machine ran); one whose application
        raises is journaled as rejected (``INPUT_REJECTED``)."""
        if self.refusal is not None:
            return False, self.refusal
        if not self.command_limit.take():
            return False, f"rate limited (at most {self.command_limit.rate:g} commands/s)"
        if request.name == "replay":
            return await self._replay(request)
        args = {str(k): v if isinstance(v, str) else msgspec.json.encode(v).decode()
                for k, v in request.args.items()}
        issued = "" if request.issued_at is None else (
            request.issued_at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"))
        await self._lock_after_devices()
        try:
            if self.refusal is not None:
                return False, self.refusal
            assert self.machine is not None
            seen = self.machine.answer_for(request.command_id) is not None
            refusal = "" if seen else self._command_refusal(request)
            inp = TimedInput(ts=now_iso(), event=Command(request.name, args, request.operator,
                                                         request.command_id, issued, refusal))
            if not self._encodable(inp):
                return False, "command cannot be journaled (not valid text): not applied"
            try:
                reply, emits = self.machine.handle_command(inp)
            except InputRejected as exc:
                if await self._reject(inp, str(exc)):
                    return False, f"internal error: command rejected and journaled, round held ({exc})"[:400]
                return False, "internal error: command not applied"
            if not await self._journal(inp, emits):
                return False, "journal failure: command not applied"
        finally:
            self._commit_lock.release()
        await self._prune_if_due()
        return reply.ok, reply.reason

    def _command_refusal(self, request: CommandRequest) -> str:
        """Why a command is refused before the machine looks at it, else ``""``: published retained (it
        would be delivered again at every reconnect), no ``command_id``, older than ``[mqtt]
        command_max_age`` by its ``issued_at``, more than :data:`FUTURE_TOLERANCE` s in the future, an
        MQTT v5 message expiry longer than the maximum age, or neither ``issued_at`` nor an expiry."""
        max_age = self.config.mqtt.command_max_age
        if request.retained:
            return "retained commands are refused (publish commands with retain false)"
        if not request.command_id:
            return "command needs a command_id"
        if request.message_expiry is not None and request.message_expiry > max_age:
            return (f"message expiry {request.message_expiry} s is longer than [mqtt] command_max_age "
                    f"{max_age} s")
        if request.issued_at is not None:
            age = (datetime.now(UTC) - request.issued_at).total_seconds()
            if age > max_age:
                return f"expired: issued {age:.1f} s ago, more than [mqtt] command_max_age {max_age} s"
            if age < -FUTURE_TOLERANCE:
                return (f"issued_at is {-age:.1f} s in the future (more than {FUTURE_TOLERANCE:g} s): check "
                        "the sender's clock")
        elif request.message_expiry is None:
            return "command needs issued_at (ISO 8601 UTC) or an MQTT v5 message expiry"
        return ""

    async def _replay(self, request: CommandRequest) -> tuple[bool, str]:
        """Answer ``replay {"from_seq", "to_seq"}``: queue the journaled messages in that range for
        :meth:`Relay.replay` (at most :data:`REPLAY_MAX_BYTES` of payload; the answer says where it
        stopped), naming seqs no longer held (pruned), seqs not journaled yet and seqs too large for the
        broker (:meth:`Relay.too_large_for_broker`: skipped). A repeated command id
        gets the first answer and is not replayed again (within this process: replaying twice only
        repeats messages the consumer drops by ``msg_id``). Refused like any command when retained,
        expired or from the future. Not journaled: it changes nothing. Logged with its operator."""
        first = self._replay_answers.get(request.command_id) if request.command_id else None
        if first is not None:
            return first
        refusal = self._command_refusal(request)
        if refusal:
            answer = (False, refusal)
        elif self.journal is None or self.relay is None:
            answer = (False, "no journal to replay from")
        else:
            async with self._replay_lock:  # requests are queued (and so published) in arrival order
                answer = await self._queue_replay(int(request.args["from_seq"]), int(request.args["to_seq"]))
        if request.command_id:
            self._replay_answers[request.command_id] = answer
            while len(self._replay_answers) > _REMEMBERED_REPLAYS:
                self._replay_answers.popitem(last=False)
        log.info("replay_requested", operator=request.operator, command_id=request.command_id,
                 from_seq=request.args.get("from_seq"), to_seq=request.args.get("to_seq"),
                 ok=answer[0], reason=answer[1])
        return answer

    async def _queue_replay(self, from_seq: int, to_seq: int) -> tuple[bool, str]:
        assert self.journal is not None and self.relay is not None
        journal = self.journal

        def read() -> tuple[list[OutboxRow], int, int | None]:
            last = journal.last_seq
            rows: list[OutboxRow] = []
            size = 0
            cursor, top = from_seq, min(to_seq, last)
            while cursor <= top:
                chunk = journal.messages_by_seq(cursor, top, 512)
                if not chunk:
                    break
                for r in chunk:
                    if rows and size + len(r.payload) > REPLAY_MAX_BYTES:
                        return rows, last, r.seq
                    rows.append(r)
                    size += len(r.payload)
                cursor = chunk[-1].seq + 1
            return rows, last, None

        try:
            rows, last, stopped_at = await asyncio.to_thread(read)
        except (JournalUnwritable, JournalDamaged) as exc:
            return False, f"journal cannot be read: {str(exc)[:200]}"
        if from_seq > last:
            return False, f"nothing to replay: seq {from_seq}..{to_seq} not journaled (last seq {last})"
        served_to = stopped_at - 1 if stopped_at is not None else min(to_seq, last)
        held = {r.seq for r in rows}
        gone = _seq_ranges([n for n in range(from_seq, served_to + 1) if n not in held])
        parts = [f"replaying {len(rows)} messages" + (f" seq {rows[0].seq}..{rows[-1].seq}" if rows else "")]
        if gone:
            more = f" and {len(gone) - 3} more" if len(gone) > 3 else ""
            named = ", ".join(f"{a}..{b}" for a, b in gone[:3]) + more
            parts.append(f"seq {named} no longer held (pruned)")
        if stopped_at is not None:
            parts.append(f"stopped before seq {stopped_at} ({REPLAY_MAX_BYTES // 2**20} MiB per request): "
                         "ask again from there")
        if to_seq > last:
            parts.append(f"seq {max(from_seq, last + 1)}..{to_seq} not journaled yet (last seq {last})")
        relay = self.relay
        big = _seq_ranges([r.seq for r in rows if relay.too_large_for_broker(
            r, relay.topics.replay_for(str(getattr(r.channel, "value", r.channel)).lower(), r.device))])
        if big:
            more = f" and {len(big) - 3} more" if len(big) > 3 else ""
            named = ", ".join(f"{a}..{b}" for a, b in big[:3]) + more
            parts.append(f"seq {named} larger than the broker takes: not replayed (kept in the journal)")
        if rows and not self.relay.replay(rows):
            return False, ("replay refused: not connected, or too many messages waiting to be replayed; "
                           "ask again")
        return True, "; ".join(parts)

    def _on_duplicate(self, info: DuplicateInstance) -> None:
        """The relay found another live instance for this table that stepped back: raise
        ``DUPLICATE_INSTANCE`` through the journal (an :class:`InstanceConflict` input)."""
        task = asyncio.create_task(self._raise_duplicate(info), name="duplicate-instance")
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    async def _raise_duplicate(self, info: DuplicateInstance) -> None:
        if self.machine is None or self.journal is None:
            return
        async with self._commit_lock:
            conflict = InstanceConflict(info.other, info.client_id, info.text()[:400])
            inp = TimedInput(ts=now_iso(), event=conflict)
            await self._journal(inp, self.machine.handle(inp), counted=False)

    @property
    def maintenance_idle(self) -> bool:
        """No prune is running or due (tests measure what the journal keeps once it is idle)."""
        return not self._pruning() and self._rounds_since_prune < PRUNE_EVERY_ROUNDS

    async def _prune_if_due(self) -> None:
        """Start the journal's maintenance (archive, retention, space) in the background once
        :data:`PRUNE_EVERY_ROUNDS` rounds completed, never awaited by the inputs: a step at a time on the
        event loop, device inputs going first, or in a worker thread while commits are sent there after
        a slow one (a slow disk): :meth:`_maintain`."""
        if self._rounds_since_prune >= PRUNE_EVERY_ROUNDS:
            self._start_prune()

    def _pruning(self) -> bool:
        """The journal's maintenance is running (:meth:`_start_prune`)."""
        return self._prune_task is not None and not self._prune_task.done()

    def _start_prune(self) -> None:
        """Start :meth:`_prune` unless it is running (the due rounds wait for its end) or no journal."""
        if self.journal is None or self._pruning():
            return
        self._rounds_since_prune %= PRUNE_EVERY_ROUNDS  # keeps the phase: due every 10th round
        self._prune_task = asyncio.create_task(self._prune(self.journal), name="journal-prune")
        self._prune_task.add_done_callback(self._prune_ended)

    def _prune_ended(self, task: asyncio.Task[None]) -> None:
        """Rounds completed while the prune ran (a group commit can complete many): start the next one
        now rather than at the next completed round."""
        if task.cancelled() or self._stop.is_set():
            return
        if self._rounds_since_prune >= PRUNE_EVERY_ROUNDS:
            self._start_prune()

    async def _prune(self, journal: Journal) -> None:
        try:
            deleted = await self._maintain(journal)
        except (JournalUnwritable, JournalDamaged) as exc:
            log.error("journal_prune_failed", error=str(exc))
            return
        except Exception:  # never let maintenance take the table down
            log.exception("journal_prune_failed")
            return
        self.prunes += 1
        log.info("journal_pruned", rows=deleted)

    async def _maintain(self, journal: Journal) -> int:
        """Run the journal's maintenance (:meth:`Journal.maintenance`) on the event loop, a step at a time,
        device inputs first; then its WAL checkpoint (an fsync) in a worker thread. Returns the rows
        retention deleted.

        Why on the loop: in a worker thread, maintenance gives the interpreter lock up at every SQLite
        statement and takes it back from the busy loop each time; measured on a 2-core VM
        (docs/performance.md "A fifth VM"), the daemon's worker threads spent 0.85-1.05 ms of CPU a round
        where the same maintenance costs about 0.6 ms in a process of its own; stepped on the loop, the
        daemon's CPU a round fell 4% and its rounds a second rose 4-6%. A step is short (one block
        verified, one archive unit compressed, one transaction of page-cache writes without an fsync:
        about 1 ms at most); before each slice of them, the loop lets
        device inputs that arrived go first (:meth:`_maintenance_turn`). A step that would wait for the
        journal's lock (another thread reading or committing) waits off the loop instead, so the loop
        never blocks on it. Steps run back to back for :data:`_MAINTENANCE_SLICE` seconds at a time; a step
        the journal announces as long (:data:`~daemon.journal.store.OFF_LOOP`: many messages awaiting the
        broker, an unusually large archive unit) runs in a worker thread, as does every step while a slow
        commit sends the commits there (:meth:`_check_commit_time`)."""
        with journal.maintenance() as steps:
            if steps is None:  # one is running already
                return 0
            said: str | None = None
            while True:
                if said == OFF_LOOP or time.monotonic() < self._commits_in_thread_until:
                    # the step may take long, or the disk is slow (commits go to a worker thread too)
                    done, said = await _step_beside_the_loop(steps)
                else:
                    await self._maintenance_turn()
                    with journal.lock_if_free() as free:
                        if free:
                            until = time.perf_counter() + _MAINTENANCE_SLICE
                            done, said = _step(steps)
                            while not done and said != OFF_LOOP and time.perf_counter() < until:
                                done, said = _step(steps)
                    if not free:
                        await asyncio.sleep(_LOCK_RETRY)  # a reader or a command's commit holds it
                        continue
                if done:
                    break
        deleted = int(said or 0)
        if not self._stop.is_set():
            await asyncio.to_thread(journal.checkpoint)
        return deleted

    async def _maintenance_turn(self) -> None:
        """Before a maintenance step: let the loop take what the devices sent meanwhile (twice round the
        loop: its reads, then the input task they wake), then wait while device inputs are queued or
        being journaled, at most :data:`_MAINTENANCE_WAIT` seconds (so a flood of inputs cannot
        postpone maintenance for ever)."""
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        deadline = time.monotonic() + _MAINTENANCE_WAIT
        while ((not self.queue.empty() or self._commit_lock.locked() or self._devices_waiting)
               and time.monotonic() < deadline):
            await asyncio.sleep(_LOCK_RETRY)

    async def _journal(self, inp: TimedInput, emits: Iterable[Emit], *, counted: bool = True) -> bool:
        """Append ``inp`` and its messages in one transaction, staged for the group commit of device
        inputs (:meth:`_flush_staged`), else (a command, a tick, an input after a failed write) in a
        worker thread, so the loop keeps reading devices meanwhile: a card that arrives during a flood of
        commands still goes before the flood's tail (:meth:`_lock_after_devices`); callers hold
        ``_commit_lock``, so inputs reach the machine and the journal in the same order."""
        assert self.journal is not None and self.relay is not None
        emits = list(emits)
        if self._staged is not None and self._outage is None:
            # group commit: journaled (or failed) together, before any ack; after a failed write each
            # input goes alone again, so the spell (JournalOutage) is journaled right after the first
            # that is written
            self._staged.append((inp, emits, counted))
            if emits:  # most inputs (chips) emit nothing
                self._staged_rounds += _completed(emits)
            if (self._rounds_since_prune + self._staged_rounds >= PRUNE_EVERY_ROUNDS
                    and not self._pruning()):
                # maintenance starts after the round it is due at; while one runs, nothing would start
                # (the next starts when it ends): the group goes on, not one commit per input
                return await self._flush_staged()
            return True
        try:
            rows = await asyncio.to_thread(metrics.timed(self.journal.append), inp, emits)
        except Exception as exc:  # any failure of the journaling step: the input was not journaled
            self._journal_failed(inp, exc)
            return False
        self._journaled(inp, emits, rows, counted)
        if self._outage is not None and not isinstance(inp.event, JournalOutage):
            await self._record_outage()
        return True

    def _journaled(self, inp: TimedInput, emits: list[Emit], rows: list[OutboxRow], counted: bool) -> None:
        assert self.relay is not None
        if self._status_detail and self.refusal is None:
            self._status_detail = ""
            log.warning("journal_writable_again")
            self.relay.republish_status()
        self.inputs += counted
        metrics.journaled(inp, emits, rows)  # inputs, settlements, alarms, holds (daemon/metrics.py)
        if not emits:  # most inputs (chips): nothing completed, no round to bind, no rows
            return
        completed = _completed(emits)
        if completed:
            self._rounds_since_prune += completed
            if self._rounds_since_prune >= PRUNE_EVERY_ROUNDS:  # starts a background task, awaits nothing
                self._start_prune()
        for e in emits:
            shoe, rnd = getattr(e.message, "shoe", None), getattr(e.message, "round", None)
            if rnd is not None:
                bind_round(shoe, rnd)
                break
        if rows:  # most inputs (chips) emit nothing: the relay is not woken for them
            self.relay.notify(rows)  # published from memory, not read back from the journal

    def _journal_failed(self, inp: TimedInput, exc: Exception) -> None:
        """An append failed: log it, show it in the status, tell the floor once per failing spell, and
        rebuild the machine from the journal (it never runs ahead of what is durable)."""
        assert self.relay is not None
        self.journal_failures += 1
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
        if isinstance(exc, JournalUnwritable | JournalDamaged):
            error = str(exc)
        log.critical("journal_append_failed", error=error, input=type(inp.event).__name__)
        detail = f"journal failure, settling stopped: {error}"
        if detail != self._status_detail and self.refusal is None:
            self._status_detail = detail
            self.relay.republish_status()  # the floor learns it now, not at the next reconnect
        if self._outage is None:
            self._outage = JournalOutage(since=inp.ts, failures=1, error=error[:300])
            self._publish_journal_alarm(inp, error)
        else:
            self._outage = JournalOutage(self._outage.since, self._outage.failures + 1, self._outage.error)
        try:  # never let the machine run ahead of what is durable
            self.machine = self._rebuilt_machine()
        except Exception as exc2:
            log.critical("journal_replay_failed", error=f"{type(exc2).__name__}: {exc2}")
            self._refuse_now(f"the machine cannot be rebuilt from its journal: {exc2}")

    async def _record_outage(self) -> None:
        """The journal works again after a failing spell: journal the spell (``INTERNAL_ERROR``, holding
        nothing), so the journal itself holds what the floor was told from memory."""
        outage, self._outage = self._outage, None
        if outage is None or self.machine is None:
            return
        inp = TimedInput(ts=now_iso(), event=outage)
        try:
            emits = self.machine.handle(inp)
        except InputRejected as exc:
            await self._reject(inp, str(exc))
            return
        if not await self._journal(inp, emits, counted=False):
            self._outage = outage  # still failing: keep it for the next success

    def _publish_journal_alarm(self, inp: TimedInput, error: str) -> None:
        """A critical ``INTERNAL_ERROR`` alarm, published from memory (it cannot go through the journal
        that just failed): the input was not applied and the machine is rebuilt from the journal. Once
        per failing spell; the spell is journaled when the journal works again (:class:`JournalOutage`)."""
        assert self.relay is not None
        table = self.config.table
        alarm = AlarmMessage(
            table=table, ts=now_iso(), msg_id=f"{table}-{secrets.token_hex(4)}-journal-step",
            alarm_id="journal", code=AlarmCode.INTERNAL_ERROR.value,
            severity=ALARMS[AlarmCode.INTERNAL_ERROR].severity.value,
            text=f"{type(inp.event).__name__} input not journaled, so not applied: {error}"[:400], held=True)
        self.relay.publish_alarm(encode_message(alarm))

    # -- status and watchdog ----------------------------------------------------------------------------
    def _status_payload(self, state: str) -> bytes:
        """The retained status / birth message (and, with ``offline``, the will): state, detail, software
        version, instance id, config digest, journal epoch, last seq and chain head (docs/mqtt.md)."""
        if self.refusal is not None and state == "online":
            state = "refusing"  # up and connected, but settling nothing (damaged journal)
        detail = self._status_detail
        if state == "standby" and self.relay is not None and self.relay.standby:
            detail = self.relay.standby
        epoch, last_seq, chain_seq, chain_head = "", 0, 0, ""
        if self.journal is not None:
            epoch, last_seq = self.journal.epoch, self.journal.last_seq
            try:
                chain_seq, chain_head = self.journal.chain_head()
            except Exception as exc:  # the status must go out even so (the journal's own error shows)
                log.error("chain_head_unreadable", error=f"{type(exc).__name__}: {str(exc)[:160]}")
        return encode_message(TableStatus(
            table=self.config.table, ts=now_iso(), state=state, detail=detail[:400], software=self.software,
            instance=self.instance, config_digest=self.config_digest, epoch=epoch, last_seq=last_seq,
            chain_seq=chain_seq, chain_head=chain_head))

    async def _watchdog(self) -> None:
        interval = sdnotify.watchdog_interval()
        if interval is None:
            return
        while True:
            await asyncio.sleep(interval)
            dead = [t.get_name() for t in self._tasks if t.done()]
            if dead:
                log.critical("task_died", tasks=dead)
                continue  # no WATCHDOG=1: systemd restarts us
            sdnotify.notify("WATCHDOG=1")
