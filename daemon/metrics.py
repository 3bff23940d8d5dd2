"""Prometheus metrics of one table's daemon, and the retained ``{prefix}/{table}/health`` message.

Exposed with ``prometheus_client`` (docs/install.md, "Metrics"), off by default: ``[metrics] listen`` (an
HTTP listener on a loopback address, for a local Prometheus or node agent) and/or ``[metrics] textfile``
(a file rewritten atomically every ``interval`` seconds, for node_exporter's textfile collector: the form
for hardened units, which listen on nothing). Every series carries the ``table`` label. Amounts are minor
units; times are seconds.

Counted where they happen (one call each, no other code in those modules):

* :func:`journaled` (:class:`daemon.app.App`, after an input and its messages are journaled): inputs by
  device and kind; settlements, stakes and players' net by wager; commission; alarms raised by code;
  the open holds of the round in play; and, for a card, the moment it arrived;
* :func:`timed` (around :meth:`Journal.append` and :meth:`Journal.append_many`, on the event loop or in a
  worker thread, ``App._commit``): the journal commit time;
* :func:`published` (:class:`daemon.mqtt.Relay`, when the broker acknowledged rows): the card-to-publish
  latency, from the card's arrival to the PUBACK of the first message it caused.

Read from the daemon every ``interval`` seconds by :func:`refresh` (in the event loop, so nothing here
touches the journal or the links from the HTTP thread): frames rejected by reason per device (the codec's
counters: checksum, malformed, too_long, unknown_type, duplicate, gap; and resends after a restart,
dropped against the journal), garbage bytes, device links up, the outbox backlog, relay reconnects,
negative PUBACKs, messages delivered, messages too large for the broker (not published), the broker
connection, journal size and journal failures.

Metric names (all prefixed ``tablesense_``; a counter's samples end in ``_total``): :data:`NAMES`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
    write_to_textfile,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tablesense.daemon.logging import get_logger
from tablesense.daemon.messages import (
    AlarmMessage,
    HealthMessage,
    RoundState,
    SettlementMessage,
    encode_message,
)
from tablesense.daemon.version import software_version

if TYPE_CHECKING:
    from tablesense.daemon.app import App

__all__ = ["HEALTH_EVERY", "NAMES", "REGISTRY", "MetricsServer", "bind", "health_message", "journaled",
           "published", "refresh", "run_metrics", "start", "timed"]

log = get_logger(component="metrics")

P = ParamSpec("P")
R = TypeVar("R")

HEALTH_EVERY = 30.0
"""Seconds between two retained ``health`` messages (and one at every connection to the broker)."""

REGISTRY = CollectorRegistry()
"""The registry every tablesense metric is in (not prometheus_client's global one)."""

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0, 10.0, 30.0)
_COMMIT_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

INPUTS = Counter("tablesense_inputs", "Inputs applied and journaled, by device and kind (event type).",
                 ["table", "device", "kind"], registry=REGISTRY)
SETTLEMENTS = Counter("tablesense_settlements", "Wagers settled, by wager and outcome.",
                      ["table", "bet", "outcome"], registry=REGISTRY)
STAKED = Counter("tablesense_staked_minor_units", "Stakes settled, by wager (minor units).",
                 ["table", "bet"], registry=REGISTRY)
NET = Gauge("tablesense_net_minor_units", "Players' net result since the daemon started, by wager (minor "
            "units; negative: the house won).", ["table", "bet"], registry=REGISTRY)
COMMISSION = Counter("tablesense_commission_minor_units", "Commission taken (minor units).", ["table"],
                     registry=REGISTRY)
ALARMS = Counter("tablesense_alarms", "Alarms raised, by code and severity.", ["table", "code", "severity"],
                 registry=REGISTRY)
HOLDS = Gauge("tablesense_open_holds", "Alarm codes holding the round in play (0: not held).", ["table"],
              registry=REGISTRY)
COMMIT = Histogram("tablesense_journal_commit_seconds", "Time to journal one input and its messages "
                   "(one SQLite transaction with fsync; a group commit counts once).", ["table"],
                   buckets=_COMMIT_BUCKETS, registry=REGISTRY)
CARD_TO_PUBLISH = Histogram("tablesense_card_to_publish_seconds", "From a card's arrival to the broker's "
                            "acknowledgement of the first message it caused.", ["table"],
                            buckets=_LATENCY_BUCKETS, registry=REGISTRY)

NAMES = (
    "tablesense_inputs_total", "tablesense_frames_rejected_total", "tablesense_garbage_bytes_total",
    "tablesense_frames_total", "tablesense_device_up", "tablesense_settlements_total",
    "tablesense_staked_minor_units_total", "tablesense_net_minor_units",
    "tablesense_commission_minor_units_total",
    "tablesense_alarms_total", "tablesense_open_holds", "tablesense_outbox_backlog",
    "tablesense_relay_reconnects_total", "tablesense_publish_rejected_total", "tablesense_published_total",
    "tablesense_publish_too_large_total",
    "tablesense_broker_connected", "tablesense_journal_size_bytes", "tablesense_journal_failures_total",
    "tablesense_journal_commit_seconds", "tablesense_card_to_publish_seconds", "tablesense_build_info",
)
"""Every metric name as it appears in the exposition (deploy/grafana/tablesense.json uses these)."""

REJECT_REASONS = ("checksum", "malformed", "too_long", "unknown_type", "duplicate", "gap", "resend")
"""``reason`` label values of ``tablesense_frames_rejected_total`` (``gap``: frames that revealed a skip in
the device's numbering, delivered but counted; ``resend``: frames already journaled, dropped after a
restart)."""

_CODEC_COUNTERS = {"checksum": "bad_checksum", "malformed": "malformed", "too_long": "too_long",
                   "unknown_type": "unknown_type", "duplicate": "duplicates", "gap": "seq_gaps"}

_table = ""
_holds = 0
_arrivals: OrderedDict[str, float] = OrderedDict()
"""msg_id of the first message a card caused -> the card's arrival (epoch seconds), until acknowledged."""
_MAX_ARRIVALS = 10_000


def bind(table: str) -> None:
    """Label everything this process counts with ``table`` (call once, before the daemon runs)."""
    global _table
    _table = table


_children: dict[tuple[int, tuple[str, ...]], Any] = {}
"""Labelled children already looked up (``labels()`` takes a lock and builds a key on every call)."""


def _child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, looked up once per metric and label values (a few dozen in all: tables,
    devices, input kinds, bets, outcomes, alarm codes)."""
    key = (id(metric), labels)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*labels)
    return child


def timed(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` (:meth:`Journal.append`) timed into ``tablesense_journal_commit_seconds`` when it returns."""
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        _child(COMMIT, _table).observe(time.perf_counter() - start)
        return result
    return wrapper


def _arrival(ts: str) -> float | None:
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def journaled(inp: Any, emits: Iterable[Any], rows: Sequence[Any] | None) -> None:
    """Count one journaled input (``TimedInput``) and its emitted messages (``Emit``); ``rows``: the outbox
    rows :meth:`Journal.append` returned (their ``msg_id``), for the card-to-publish latency."""
    event = inp.event
    kind = type(event).__name__
    device = getattr(event, "device", None) or ("operator" if kind == "Command" else "table")
    _child(INPUTS, _table, device, kind).inc()
    for emit in emits:
        m = emit.message
        if isinstance(m, SettlementMessage):
            _child(SETTLEMENTS, _table, m.bet, m.outcome).inc()
            _child(STAKED, _table, m.bet).inc(m.stake)
            _child(NET, _table, m.bet).inc(m.net)
            if m.commission:
                _child(COMMISSION, _table).inc(m.commission)
        elif isinstance(m, AlarmMessage):
            if m.state == "raised":
                _child(ALARMS, _table, m.code, m.severity).inc()
        elif isinstance(m, RoundState):
            global _holds
            _holds = len(m.hold_codes) if m.held else 0
            _child(HOLDS, _table).set(_holds)
    if kind == "CardDrawn" and rows:
        at = _arrival(str(inp.ts))
        if at is not None:
            _arrivals[str(rows[0].msg_id)] = at
            while len(_arrivals) > _MAX_ARRIVALS:
                _arrivals.popitem(last=False)


def published(rows: Iterable[Any]) -> None:
    """The broker acknowledged ``rows`` (outbox rows with ``msg_id``): observe the card-to-publish latency
    of those that were the first message of a card."""
    now = time.time()
    for r in rows:
        at = _arrivals.pop(str(r.msg_id), None)
        if at is not None:
            _child(CARD_TO_PUBLISH, _table).observe(max(0.0, now - at))


class _Snapshot(Collector):
    """Series read from the daemon by :func:`refresh` (counters kept elsewhere, gauges of its state)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metrics: list[Metric] = []

    def set(self, metrics: list[Metric]) -> None:
        with self._lock:
            self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            yield from self._metrics


_SNAPSHOT = _Snapshot()
REGISTRY.register(_SNAPSHOT)


class _Facts:
    """The daemon's state as read by :func:`refresh` (also what the health message reports)."""

    def __init__(self) -> None:
        self.rejected: dict[tuple[str, str], int] = {}
        self.garbage: dict[str, int] = {}
        self.frames: dict[str, int] = {}
        self.devices_up: dict[str, int] = {}
        self.backlog = 0
        self.reconnects = 0
        self.publish_rejected = 0
        self.too_large = 0
        self.delivered = 0
        self.connected = 0
        self.journal_bytes = 0
        self.journal_failures = 0


_facts = _Facts()


def _journal_bytes(path: Any) -> int:
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):
            total += os.stat(f"{path}{suffix}").st_size
    return total


async def refresh(app: App) -> None:
    """Read the daemon's counters and state into the snapshot series (in the event loop; the outbox
    backlog is a journal query, run in a worker thread)."""
    f = _Facts()
    for name, link in app.links.items():
        stats = link.stats
        for reason, attr in _CODEC_COUNTERS.items():
            f.rejected[(name, reason)] = int(getattr(stats, attr, 0))
        f.garbage[name] = int(stats.garbage_bytes)
        f.frames[name] = int(stats.frames)
        f.devices_up[name] = int(str(getattr(link, "state", "")).lower().endswith("online"))
    f.rejected[("all", "resend")] = int(app.dropped_resends)
    relay = app.relay
    if relay is not None:
        f.reconnects = max(0, relay.connects - 1)
        f.publish_rejected = relay.rejected
        f.too_large = relay.too_large
        f.delivered = relay.delivered
        f.connected = int(relay.connected)
    f.journal_failures = app.journal_failures
    journal = app.journal
    if journal is not None:
        with contextlib.suppress(Exception):
            f.backlog = int(await asyncio.to_thread(journal.pending_count))
        f.journal_bytes = _journal_bytes(journal.path)
    global _facts
    _facts = f
    t = _table
    rejected = CounterMetricFamily("tablesense_frames_rejected", "Frames dropped or flagged, by device and "
                                   "reason.", labels=["table", "device", "reason"])
    for (device, reason), value in sorted(f.rejected.items()):
        rejected.add_metric([t, device, reason], value)
    garbage = CounterMetricFamily("tablesense_garbage_bytes", "Bytes outside any frame, by device.",
                                  labels=["table", "device"])
    frames = CounterMetricFamily("tablesense_frames", "Frames that passed framing and checksum, by device.",
                                 labels=["table", "device"])
    up = GaugeMetricFamily("tablesense_device_up", "Device link open (1) or not (0).",
                           labels=["table", "device"])
    for device in sorted(f.garbage):
        garbage.add_metric([t, device], f.garbage[device])
        frames.add_metric([t, device], f.frames[device])
        up.add_metric([t, device], f.devices_up[device])

    def one(cls: type[CounterMetricFamily | GaugeMetricFamily], name: str, doc: str, value: float) -> Metric:
        m = cls(name, doc, labels=["table"])
        m.add_metric([t], value)
        return m

    info = GaugeMetricFamily("tablesense_build_info", "The software version (value 1).",
                             labels=["table", "version"])
    info.add_metric([t, software_version()], 1)
    _SNAPSHOT.set([
        rejected, garbage, frames, up, info,
        one(GaugeMetricFamily, "tablesense_outbox_backlog", "Journaled messages not yet acknowledged by the "
            "broker.", f.backlog),
        one(CounterMetricFamily, "tablesense_relay_reconnects", "Connections to the broker after the first.",
            f.reconnects),
        one(CounterMetricFamily, "tablesense_publish_rejected", "Negative PUBACKs (reason code >= 0x80).",
            f.publish_rejected),
        one(CounterMetricFamily, "tablesense_published", "Journaled messages the broker acknowledged.",
            f.delivered),
        one(CounterMetricFamily, "tablesense_publish_too_large", "Journaled messages larger than the broker "
            "takes ([mqtt] max_message_bytes, or its v5 Maximum Packet Size): not published nor replayed.",
            f.too_large),
        one(GaugeMetricFamily, "tablesense_broker_connected", "Connected to the broker (1) or not (0).",
            f.connected),
        one(GaugeMetricFamily, "tablesense_journal_size_bytes", "Journal file and its WAL, bytes.",
            f.journal_bytes),
        one(CounterMetricFamily, "tablesense_journal_failures", "Inputs that could not be journaled.",
            f.journal_failures),
    ])


def _histogram_totals(h: Histogram) -> tuple[float, float]:
    """``(sum, count)`` of the histogram's series of this table."""
    total = count = 0.0
    for metric in h.collect():
        for s in metric.samples:
            if s.labels.get("table") == _table:
                if s.name.endswith("_sum"):
                    total += s.value
                elif s.name.endswith("_count"):
                    count += s.value
    return total, count


def _counter_total(c: Counter) -> int:
    return int(sum(s.value for m in c.collect() for s in m.samples
                   if s.name.endswith("_total") and s.labels.get("table") == _table))


def health_message(app: App, started: float, previous: dict[str, tuple[float, float]]) -> HealthMessage:
    """The ``tablesense.health`` message: the essentials of the metrics as :func:`refresh` last read them.
    ``previous``: the histogram totals at the last health message (updated), for the means over the
    interval since."""
    from tablesense.daemon.app import now_iso

    means: dict[str, float | None] = {}
    for key, hist in (("commit", COMMIT), ("latency", CARD_TO_PUBLISH)):
        total, count = _histogram_totals(hist)
        before = previous.get(key, (0.0, 0.0))
        previous[key] = (total, count)
        n = count - before[1]
        means[key] = round((total - before[0]) / n * 1000, 3) if n > 0 else None
    f = _facts
    rejected: dict[str, int] = {}
    for (_, reason), value in f.rejected.items():
        rejected[reason] = rejected.get(reason, 0) + value
    return HealthMessage(
        table=app.config.table, ts=now_iso(), software=software_version(),
        uptime_s=int(time.monotonic() - started), inputs=_counter_total(INPUTS),
        frames_rejected=rejected, garbage_bytes=sum(f.garbage.values()),
        devices={name: ("online" if up else "down") for name, up in f.devices_up.items()},
        settlements=_counter_total(SETTLEMENTS), alarms=_counter_total(ALARMS),
        open_holds=_holds, outbox_backlog=f.backlog,
        relay_reconnects=f.reconnects, publish_rejected=f.publish_rejected, journal_bytes=f.journal_bytes,
        journal_commit_ms_mean=means["commit"], card_to_publish_ms_mean=means["latency"])


class MetricsServer:
    """The HTTP listener (``[metrics] listen``): prometheus_client's server in its own thread."""

    def __init__(self, listen: str) -> None:
        host, _, port = listen.rpartition(":")
        host = host.strip("[]")
        self.server, self.thread = start_http_server(int(port), addr=host, registry=REGISTRY)
        self.address = f"{host}:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start(listen: str | None) -> MetricsServer | None:
    """Start the HTTP listener on ``listen`` (a loopback ``HOST:PORT``); ``None`` when off. A listener that
    cannot start is logged (``metrics_listen_failed``) and the daemon runs on without it."""
    if not listen:
        return None
    try:
        server = MetricsServer(listen)
    except OSError as exc:
        log.error("metrics_listen_failed", listen=listen, error=exc.strerror or str(exc))
        return None
    log.info("metrics_listening", address=server.address)
    return server


async def run_metrics(app: App, *, textfile: str | None = None, interval: float = 15.0,
                      health_every: float = HEALTH_EVERY) -> None:
    """Until cancelled: refresh the series every ``interval`` seconds (and write ``textfile``, atomically,
    when set), and publish the retained health message every ``health_every`` seconds and at every new
    connection to the broker (not journaled: it is a snapshot, like the status)."""
    started = time.monotonic()
    previous: dict[str, tuple[float, float]] = {}
    next_health = 0.0
    connects_seen = -1
    next_refresh = 0.0
    textfile_failing = False
    while True:
        now = time.monotonic()
        relay = app.relay
        if now >= next_refresh:
            next_refresh = now + interval
            await refresh(app)
            if textfile:
                try:
                    await asyncio.to_thread(write_to_textfile, textfile, REGISTRY)
                    textfile_failing = False
                except OSError as exc:
                    if not textfile_failing:
                        log.error("metrics_textfile_failed", path=textfile, error=exc.strerror or str(exc))
                    textfile_failing = True
        if relay is not None and relay.connected and (now >= next_health or relay.connects != connects_seen):
            connects_seen = relay.connects
            next_health = now + health_every
            await refresh(app)
            payload = encode_message(health_message(app, started, previous))
            relay.publish_now(f"{relay.topics.base}/health", payload, retain=True)
        await asyncio.sleep(min(1.0, interval))
