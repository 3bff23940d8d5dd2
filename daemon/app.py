"""The daemon's wiring: devices -> state machine -> journal -> relay -> broker (bytes -> events -> round
-> settlements -> journal -> MQTT).

One asyncio loop, independent tasks, data flowing one way:

* one :class:`~drivers.link.DeviceLink` task per configured device puts decoded events and link states
  on a bounded queue (a full queue slows reading; nothing is dropped);
* the input task takes each item, stamps it with the arrival time (ISO 8601 UTC), runs it through
  :class:`~daemon.table.TableMachine` and appends the input and every emitted message to the journal in
  ONE transaction *before* anything is published (the transactional outbox, docs/journal.md), then
  acknowledges the frame to the device;
  the append (with its fsync) runs in a worker thread so the relay keeps publishing meanwhile;
* commands from the broker (``cmd/{name}``) are machine inputs too, handled the same way and answered
  with the machine's :class:`~daemon.table.CommandReply`; one lock around "machine, then journal" keeps
  device events and commands in the same order in both;
* the :class:`~daemon.mqtt.Relay` task publishes the outbox in order and never blocks the inputs:
  startup waits on neither the broker nor any device.

At every start the input task first journals a :class:`~daemon.table.inputs.TableStart` input, for
which the machine emits the retained table info (``info``: wagers, paytables, limits, seats) from the
current config; the baccarat scoreboard is emitted by the machine after every round and at a new shoe.

Crash recovery: at start the journal's inputs since the current shoe began are replayed through a fresh
machine (their emits are already in the outbox and are discarded), which rebuilds the shoe and the open
round. Frames a device resends after the restart that the journal already holds (sequence number not
after :meth:`Journal.last_device_seq`, within a resend window) are dropped; anything else goes to the
machine, which raises ``SEQUENCE_GAP`` and holds the round when the device's numbers skipped (cards
dealt while tablesense was down).

Retention: every :data:`PRUNE_EVERY_ROUNDS` completed rounds (a floor record journaled) the input task
calls :meth:`Journal.prune` in a worker thread, after acknowledging the input that completed the round;
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
its state never runs ahead of what is durable), nothing unjournaled is published, and the failure is
logged as critical and shown in the retained status (``detail``), republished at once when connected
(:meth:`Relay.republish_status`) and again when an append succeeds; the next input tries again.

SIGTERM/SIGINT: the current input finishes (a transaction is never cut), links close, ``offline`` is
published when connected, and :meth:`App.run` returns 0 within about 4 s, also while the relay is backing
off. Under systemd: ``READY=1`` once the journal is open and replayed, ``WATCHDOG=1`` from the loop while
every task is alive, ``STOPPING=1`` on shutdown (:mod:`daemon.sdnotify`).
"""

from __future__ import annotations

import asyncio
import secrets
import signal
import ssl
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import msgspec

from tablesense.daemon import metrics, sdnotify
from tablesense.daemon.config import TableConfig
from tablesense.daemon.journal import Journal, JournalDamaged, JournalUnwritable, OutboxRow
from tablesense.daemon.journal.codec import encode_event
from tablesense.daemon.journal.store import ROUND_COMPLETE_SCHEMAS, message_schema
from tablesense.daemon.logging import bind_round, bind_table, get_logger
from tablesense.daemon.messages import AlarmMessage, TableStatus, encode_message
from tablesense.daemon.mqtt import CommandRequest, MqttSettings, Relay, load_credentials, tls_context
from tablesense.daemon.table.alarms import ALARMS, AlarmCode
from tablesense.daemon.table.inputs import Channel, Command, Emit, TableStart, TimedInput
from tablesense.daemon.table.machine import TableMachine
from tablesense.drivers.events import DeviceEvent, DeviceState, SpotChanged
from tablesense.drivers.link import DeviceLink
from tablesense.drivers.protocols.tsref import SEQ_MODULUS

__all__ = ["COMMAND_BURST", "COMMAND_RATE", "PRUNE_EVERY_ROUNDS", "STOP_SIGNALS", "App", "CommandRateLimit",
           "StartupError", "broker_settings", "mqtt_settings", "now_iso"]

log = get_logger(component="app")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""Signals that stop the daemon cleanly (the current input finishes, ``offline`` is published). SIGHUP
never stops it: ``tablesense run`` reloads the config on SIGHUP (:mod:`daemon.commands.run`)."""

PRUNE_EVERY_ROUNDS = 10
"""Completed rounds between two :meth:`Journal.prune` calls (each deletes whole rounds in one
transaction; pruning every round would only add work)."""

RESEND_WINDOW = 64
"""After a restart, a device's first frames numbered at or before the journal's last sequence number for
it (at most this far behind) are resends of frames already journaled and are dropped, until the first
frame that is ahead. Any other jump goes to the machine (``SEQUENCE_GAP``)."""


COMMAND_RATE = 20.0
"""Default sustained operator commands per second a table accepts (inputs are bounded, docs/security.md
"Bounds")."""

COMMAND_BURST = 50
"""Default number of commands a table accepts at once before :data:`COMMAND_RATE` applies."""

_DEVICE_FIRST_WAIT = 2.0
"""Longest a command waits for queued device inputs to be applied before it takes its turn (seconds)."""


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


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds and ``Z`` (the journal's input stamp)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def mqtt_settings(config: TableConfig) -> MqttSettings:
    """:class:`MqttSettings` from the table config, with credentials read and checked.

    Raises :class:`StartupError` (via :class:`~daemon.mqtt.CredentialsError`) when the credentials file
    is missing, malformed, or accessible by other users.
    """
    m = config.mqtt
    user = password = None
    if m.credentials_file:
        from tablesense.daemon.mqtt import CredentialsError
        try:
            user, password = load_credentials(m.credentials_file)
        except CredentialsError as exc:
            raise StartupError(str(exc)) from None
    tls = m.tls
    return MqttSettings(
        host=m.host, port=m.port, table=config.table, client_id=config.client_id, prefix=m.topic_prefix,
        protocol=m.protocol, fallback=m.fallback,
        keepalive=m.keepalive, session_expiry=m.session_expiry,
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


def _seq_behind(seq: int, last: int) -> bool:
    """``seq`` is ``last`` or up to :data:`RESEND_WINDOW` frames before it (modulo the wrap)."""
    return (last - seq) % SEQ_MODULUS < RESEND_WINDOW


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
                 command_burst: int | None = None) -> None:
        self.config = config
        self._install_signals = install_signals
        self.queue: asyncio.Queue[DeviceEvent | DeviceState] = asyncio.Queue(maxsize=queue_size)
        self.machine: TableMachine | None = None
        self.journal: Journal | None = None
        self.relay: Relay | None = None
        self.links: dict[str, DeviceLink] = {}
        self._stop = asyncio.Event()
        self._resend_filter: dict[str, int] = {}
        self._commit_lock = asyncio.Lock()
        self.command_limit = CommandRateLimit(
            config.mqtt.command_rate if command_rate is None else command_rate,
            config.mqtt.command_burst if command_burst is None else command_burst)
        """Operator commands over this rate (``[mqtt] command_rate``/``command_burst`` unless given) are
        answered "rate limited" and not journaled."""
        self._devices_waiting = 0
        self._status_detail = ""
        self._tasks: list[asyncio.Task[None]] = []
        self.ready = asyncio.Event()
        self.inputs = 0
        self.dropped_resends = 0
        self.journal_failures = 0
        self.prunes = 0
        """:meth:`Journal.prune` calls made (tests)."""
        self._rounds_since_prune = 0
        self.refusal: str | None = None
        """Why settling is refused (the journal was damaged at start), ``None`` when running normally."""

    # -- lifecycle ------------------------------------------------------------------------------------
    def open(self) -> None:
        """Open the journal, replay it, and build the relay and links (no I/O to broker or devices)."""
        cfg = self.config
        bind_table(cfg.table)
        settings, tls = broker_settings(cfg)
        try:
            self.journal = Journal(cfg.journal.directory, cfg.table,
                                   retention_rounds=cfg.journal.retention_rounds,
                                   retention_days=float(cfg.journal.retention_days))
            self.machine = self._rebuilt_machine()
        except JournalUnwritable as exc:
            if self.journal is not None:
                self.journal.close()
                self.journal = None
            raise StartupError(str(exc)) from None
        except JournalDamaged as exc:
            if self.journal is not None:
                self.journal.close()
                self.journal = None
            self._open_refusing(settings, tls, str(exc))
            return
        for name in cfg.devices:
            last = self.journal.last_device_seq(name)
            if last is not None:
                self._resend_filter[name] = last
        self.relay = Relay(settings, self.journal, self._status_payload, on_command=self._on_command, tls=tls)
        for name, dev in cfg.devices.items():
            self.links[name] = DeviceLink(name, dev.url, dev.protocol, baud=dev.baud, queue=self.queue)
        log.info("daemon_opened", game=cfg.game, journal=str(self.journal.path), devices=list(cfg.devices),
                 broker=f"{settings.host}:{settings.port}", pending=self.journal.pending_count())

    def _open_refusing(self, settings: MqttSettings, tls: ssl.SSLContext | None, reason: str) -> None:
        """Refusing mode (damaged journal): a relay over an in-memory outbox holding the alarm, no links."""
        self.refusal = f"journal damaged: settling refused: {reason}"
        self._status_detail = self.refusal
        log.critical("journal_damaged_settling_refused", error=reason,
                     message=f"{self.config.table}: {self.refusal}; no device input is applied until an "
                             "authorised person moves the journal file aside and restarts tablesense")
        table = self.config.table
        alarm = AlarmMessage(
            table=table, ts=now_iso(), msg_id=f"{table}-{secrets.token_hex(4)}-journal-damaged",
            alarm_id="journal", code=AlarmCode.JOURNAL_DAMAGED.value,
            severity=ALARMS[AlarmCode.JOURNAL_DAMAGED].severity.value, text=self.refusal[:400], held=True)
        outbox = _MemoryOutbox([OutboxRow(row_id=1, seq=0, msg_id=alarm.msg_id, channel=Channel.ALARMS.value,
                                          device=None, payload=encode_message(alarm), retain=False, qos=1)])
        self.relay = Relay(settings, outbox, self._status_payload, on_command=self._refuse_command, tls=tls)

    async def _refuse_command(self, request: CommandRequest) -> tuple[bool, str]:
        return False, self.refusal or "settling refused"

    def _rebuilt_machine(self) -> TableMachine:
        """A fresh machine rebuilt from the journal alone (emits discarded: already in the outbox).

        The journal's recipe (:meth:`Journal.replay_inputs`): the machine at ``journal.replay_shoe``, its
        bet pads seeded with :meth:`Journal.pads_before_replay`, then every input since the start of
        the previous shoe.
        """
        assert self.journal is not None
        shoe = self.journal.replay_shoe
        machine = TableMachine(self.config, shoe=shoe if isinstance(shoe, int) and shoe > 0 else 1)
        machine.seed_pads([inp.event for inp in self.journal.pads_before_replay()
                           if isinstance(inp.event, SpotChanged)])
        replayed = 0
        for inp in self.journal.replay_inputs():
            if isinstance(inp.event, Command):
                machine.handle_command(inp)
            else:
                machine.handle(inp)
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
        link_tasks = [asyncio.create_task(link.run(), name=f"link-{name}")
                      for name, link in self.links.items()]  # none while refusing
        self._tasks = [relay_task, input_task, *link_tasks]
        watchdog = asyncio.create_task(self._watchdog(), name="watchdog")
        self.relay.notify()  # rows left undelivered by a previous run
        self.ready.set()
        status = "refusing to settle: journal damaged" if self.refusal else "running"
        sdnotify.notify(f"READY=1\nSTATUS={status}")
        log.info("daemon_ready", refusing=self.refusal is not None)
        try:
            await self._stop.wait()
        finally:
            sdnotify.notify("STOPPING=1")
            log.info("daemon_stopping")
            async with self._commit_lock:  # the input being journaled finishes its transaction first
                input_task.cancel()  # and before the links: their final "stopped" is not a device loss
                await asyncio.gather(input_task, return_exceptions=True)
            for t in link_tasks:
                t.cancel()
            await asyncio.gather(*link_tasks, return_exceptions=True)
            try:  # never skip the rest of the shutdown (Relay.stop logs a dead relay task itself)
                await self.relay.stop(relay_task, stop_timeout=3.0)
            except Exception:
                log.exception("relay_stop_failed")
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)
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
            item = await self.queue.get()
            try:
                ok = await self._process_device(item)
            except Exception:  # a machine bug must not stop the table: log it, keep reading
                log.exception("input_failed", input=repr(item))
                continue
            seq = getattr(item, "seq", None)
            if ok and isinstance(seq, int) and not isinstance(item, DeviceState):
                link = self.links.get(item.device)
                if link is not None:
                    await link.ack(seq)
            await self._prune_if_due()

    async def _announce(self) -> None:
        """Journal a :class:`TableStart` input first thing on every start: the machine emits the retained
        table info (wagers, paytables, limits, seats) from this run's config, published like any message.
        Not counted in :attr:`inputs` (no device input or command)."""
        async with self._commit_lock:
            assert self.machine is not None
            inp = TimedInput(ts=now_iso(), event=TableStart())
            await self._journal(inp, self.machine.handle(inp), counted=False)

    async def _process_device(self, item: DeviceEvent | DeviceState) -> bool:
        """Apply one device item; ``False`` when it was dropped or could not be journaled."""
        if not isinstance(item, DeviceState):
            last = self._resend_filter.get(item.device)
            if last is not None:
                if _seq_behind(item.seq, last):
                    self.dropped_resends += 1
                    log.info("device_resend_dropped", device=item.device, seq=item.seq, last=last)
                    link = self.links.get(item.device)
                    if link is not None:  # already journaled: AK the last number accepted (protocol §3)
                        await link.ack(last)
                    return False
                del self._resend_filter[item.device]
        self._devices_waiting += 1
        try:
            await self._commit_lock.acquire()
        finally:
            self._devices_waiting -= 1
        try:
            inp = TimedInput(ts=now_iso(), event=item)
            if not self._encodable(inp):
                return False
            assert self.machine is not None
            emits = self.machine.handle(inp)
            return await self._journal(inp, emits)
        finally:
            self._commit_lock.release()

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

        Over :attr:`command_limit` the answer is ``"rate limited"`` and nothing is journaled. A command
        whose journal row cannot be encoded or written is not applied (the machine is rebuilt from the
        journal when the failure comes after the machine ran)."""
        if not self.command_limit.take():
            return False, f"rate limited (at most {self.command_limit.rate:g} commands/s)"
        args = {str(k): v if isinstance(v, str) else msgspec.json.encode(v).decode()
                for k, v in request.args.items()}
        await self._lock_after_devices()
        try:
            inp = TimedInput(ts=now_iso(), event=Command(request.name, args, request.operator))
            if not self._encodable(inp):
                return False, "command cannot be journaled (not valid text): not applied"
            assert self.machine is not None
            reply, emits = self.machine.handle_command(inp)
            if not await self._journal(inp, emits):
                return False, "journal failure: command not applied"
        finally:
            self._commit_lock.release()
        await self._prune_if_due()
        return reply.ok, reply.reason

    async def _prune_if_due(self) -> None:
        """Prune the journal (in a worker thread) once :data:`PRUNE_EVERY_ROUNDS` rounds completed."""
        if self._rounds_since_prune < PRUNE_EVERY_ROUNDS or self.journal is None:
            return
        self._rounds_since_prune = 0
        try:
            deleted = await asyncio.to_thread(self.journal.prune)
        except (JournalUnwritable, JournalDamaged) as exc:
            log.error("journal_prune_failed", error=str(exc))
            return
        self.prunes += 1
        log.info("journal_pruned", rows=deleted)

    async def _journal(self, inp: TimedInput, emits: Iterable[Emit], *, counted: bool = True) -> bool:
        """Append ``inp`` and its messages in one transaction, in a worker thread so the loop (and the
        relay publishing earlier rows) is not blocked by the fsync; callers hold ``_commit_lock``, so
        inputs reach the machine and the journal in the same order."""
        assert self.journal is not None and self.relay is not None
        emits = list(emits)
        try:
            rows = await asyncio.to_thread(metrics.timed(self.journal.append), inp, emits)
        except Exception as exc:  # any failure of the journaling step: the input was not journaled
            self.journal_failures += 1
            error = f"{type(exc).__name__}: {str(exc)[:200]}"
            if isinstance(exc, JournalUnwritable | JournalDamaged):
                error = str(exc)
            log.critical("journal_append_failed", error=error, input=type(inp.event).__name__)
            detail = f"journal failure, settling stopped: {error}"
            if detail != self._status_detail:
                self._status_detail = detail
                self.relay.republish_status()  # the floor learns it now, not at the next reconnect
            self._publish_journal_alarm(inp, error)
            try:  # never let the machine run ahead of what is durable
                self.machine = self._rebuilt_machine()
            except Exception as exc2:
                log.critical("journal_replay_failed", error=f"{type(exc2).__name__}: {exc2}")
            return False
        if self._status_detail:
            self._status_detail = ""
            log.warning("journal_writable_again")
            self.relay.republish_status()
        self.inputs += counted
        metrics.journaled(inp, emits, rows)  # inputs, settlements, alarms, holds (daemon/metrics.py)
        self._rounds_since_prune += sum(message_schema(e.message) in ROUND_COMPLETE_SCHEMAS for e in emits)
        for e in emits:
            shoe, rnd = getattr(e.message, "shoe", None), getattr(e.message, "round", None)
            if rnd is not None:
                bind_round(shoe, rnd)
                break
        self.relay.notify()
        return True

    def _publish_journal_alarm(self, inp: TimedInput, error: str) -> None:
        """A critical ``INTERNAL_ERROR`` alarm, published from memory (it cannot go through the journal
        that just failed): the input was not applied and the machine is rebuilt from the journal."""
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
        if self.refusal is not None and state == "online":
            state = "refusing"  # up and connected, but settling nothing (damaged journal)
        return encode_message(TableStatus(table=self.config.table, ts=now_iso(), state=state,
                                          detail=self._status_detail))

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
