"""Per-table ``seq`` audit: find what the floor is missing and ask the table to replay it.

Every table journals its messages with a table-wide ``seq`` (1, 2, 3 ... within a journal epoch) and
publishes them in order. The floor's database is the account of what arrived: :meth:`Tracker.audit`
(run every second by one floor process, the leader; on PostgreSQL the holder of an advisory lock)
walks each ``(table, epoch)`` from its contiguous high-water mark ``through_seq`` over the seqs stored,
up to the highest seq seen or the ``last_seq`` the table's status reported, and finds the holes.

* A hole that lasts longer than ``grace`` seconds (two floor processes sharing the load commit out of
  order for a moment; a reconnecting table drains its backlog) is a gap: a ``SEQ_GAP`` floor alarm is
  raised and ``cmd/replay`` is requested for it (at most 10000 seqs a request), again after ``retry``
  seconds (doubling up to ``retry_max``) until the hole is filled; then the alarm is cleared.
  A hole at the tail (only the status's ``last_seq`` says it exists) waits until nothing has arrived
  from the table for ``grace`` seconds.
* Requests go only to a table that is ``online`` and only for its current journal epoch (``cmd/replay``
  names seqs, not epochs). A hole in an older epoch (the table replaced its journal) cannot be replayed:
  ``SEQ_LOST``. A range the table answers as ``no longer held (pruned)`` is ``SEQ_LOST`` too; both are
  kept in ``gaps`` (``state`` ``lost``/``pruned``) and the walk steps over them.

The replay itself and its reply are the table's (contract: ``{"ok": true, "reason": "replaying N
messages seq A..B"}``, pruned seqs named as ``seq A..B no longer held (pruned)``); the replayed messages
carry their original ``msg_id``, so one already stored changes nothing.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tablesense.daemon.floor.alarms import clear_floor_alarm, now_iso, raise_floor_alarm
from tablesense.daemon.floor.store import Database, Tx
from tablesense.daemon.logging import get_logger

__all__ = ["MAX_REPLAY_SPAN", "MAX_REQUESTS_PER_TABLE", "ReplayRequest", "Tracker", "coalesce", "holes",
           "pruned_ranges"]

log = get_logger(component="floor")

MAX_REPLAY_SPAN = 10_000
"""Most seqs one ``cmd/replay`` may name (contract: ``to_seq - from_seq < 10000``)."""

MAX_REQUESTS_PER_TABLE = 3
"""Most ``cmd/replay`` requests one audit pass sends to one table. The audit runs every second, so a
table gets at most 3 a second, well inside its command rate limit (``[mqtt] command_rate`` 20/s, burst
50, docs/mqtt.md), and the replays it serves one after the other stay few."""

_WALK = 20_000
_LEADER_LOCK = 0x666C6F72  # "flor": the PostgreSQL advisory lock (one bigint key) of the audit's leader
_EPOCH_REPLACED = "journal epoch replaced"
_RANGE_RE = re.compile(r"seq (\d+)\.\.(\d+) ")
_PRUNED_RE = re.compile(r"seq ((?:\d+\.\.\d+, )*\d+\.\.\d+)(?: and \d+ more)? "
                        r"no longer held")
_COMMAND_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")  # the daemon's bound; this floor's are replay-{16 hex}
_PAIR_RE = re.compile(r"(\d+)\.\.(\d+)")
MAX_REPLY_BYTES = 4096
"""A reply larger than this is no answer of a table's (its reason is one line): ignored unread."""


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    """One ``cmd/replay`` the floor sends: ``table``, ``from_seq``..``to_seq`` (inclusive), ``command_id``."""

    table: str
    epoch: str
    from_seq: int
    to_seq: int
    command_id: str


SendReplay = Callable[[ReplayRequest], Awaitable[None]]


def holes(through: int, seqs: list[int], target: int, skip: list[tuple[int, int]],
          complete: bool) -> tuple[int, list[tuple[int, int]]]:
    """``(new through, holes)``: ``seqs`` (ascending, all ``> through``) are the stored seqs; ``target`` the
    highest seq known to exist; ``skip`` ranges count as present (pruned or lost); ``complete``: ``seqs``
    holds every stored seq above ``through`` (else nothing beyond the last one is judged yet).

    Pure. Holes are inclusive ``(from, to)`` ranges in ascending order; the new ``through`` is the end of
    the contiguous run from ``through + 1`` (never lower than ``through``).
    """
    last = seqs[-1] if seqs else through
    limit = max(target, last) if complete else last
    covered = sorted([(s, s) for s in seqs] + [(a, b) for a, b in skip if b > through])
    out: list[tuple[int, int]] = []
    cur = through + 1
    for a, b in covered:
        if b < cur:
            continue
        if a > cur and cur <= limit:
            out.append((cur, min(a - 1, limit)))
        cur = max(cur, b + 1)
    if cur <= limit:
        out.append((cur, limit))
    new_through = out[0][0] - 1 if out else cur - 1
    return max(new_through, through), out


def coalesce(due: list[tuple[int, int]], span: int = MAX_REPLAY_SPAN,
             budget: int = MAX_REQUESTS_PER_TABLE) -> list[tuple[int, int]]:
    """Ranged requests ``(from, to)`` covering the holes ``due`` (inclusive, ascending, disjoint): each
    request starts at a hole and runs to the end of the last hole that starts within ``span`` seqs of it
    (clamped to ``span`` seqs); at most ``budget`` requests, the lowest first. Pure.

    Seqs between holes are asked again although the floor holds them: a replayed message the floor
    holds changes nothing (same ``msg_id``), and one request for many holes costs one command of the
    table's rate budget instead of one per hole."""
    out: list[tuple[int, int]] = []
    for lo, hi in due:
        if out and lo <= out[-1][0] + span - 1:
            start = out[-1][0]
            out[-1] = (start, max(out[-1][1], min(hi, start + span - 1)))
            continue
        if len(out) >= budget:
            break
        out.append((lo, min(hi, lo + span - 1)))
    return out


def pruned_ranges(reason: str, within: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """The ranges a replay reply's reason names as pruned: ``seq A..B no longer held (pruned)``, or the
    daemon's list ``seq A..B, C..D, E..F and 2 more no longer held (pruned)``. ``within``: the request's
    ``(from, to)``; a range is cut to it (a reply cannot declare lost what was not asked), one outside
    it is left out."""
    out: list[tuple[int, int]] = []
    for named in _PRUNED_RE.findall(reason):
        for a, b in _PAIR_RE.findall(named):
            lo, hi = int(a), int(b)
            if within is not None:
                lo, hi = max(lo, within[0]), min(hi, within[1])
            if lo <= hi:
                out.append((lo, hi))
    return out


async def _lost_pending(tx: Tx, table: str, epoch: str) -> bool:
    """Whether ``(table, epoch)`` has a raised ``SEQ_LOST`` alarm or a range lost because its epoch
    looked replaced (the audit looks at them again while the epoch is current)."""
    prefix = f"{table}:SEQ_LOST:{epoch}:"
    rows = await tx.fetchall("SELECT COUNT(*) FROM floor_alarms WHERE table_id = ? AND code = 'SEQ_LOST' AND "
                             "state = 'raised' AND substr(alarm_key, 1, ?) = ?", (table, len(prefix), prefix))
    lost = await tx.fetchall("SELECT COUNT(*) FROM gaps WHERE table_id = ? AND epoch = ? AND state = 'lost' "
                             "AND detail = ?", (table, epoch, _EPOCH_REPLACED))
    return bool(int(rows[0][0]) or int(lost[0][0]))


async def _missing(tx: Tx, table: str, epoch: str, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``ranges`` the floor does not hold: what a table's pruning lost is only what the
    floor had not received (a ranged request also names seqs the floor holds)."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        held = [int(r[0]) for r in await tx.fetchall(
            "SELECT seq FROM messages WHERE table_id = ? AND epoch = ? AND seq >= ? AND seq <= ? "
            "ORDER BY seq", (table, epoch, lo, hi))]
        out += holes(lo - 1, held, hi, [], True)[1]
    return out


def _at(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Tracker:
    """The seq audit (module docstring) over ``db``; ``send`` publishes a :class:`ReplayRequest` (``None``:
    requests are only recorded, e.g. in ``floor report``). ``grace``, ``retry``, ``retry_max``: seconds."""

    def __init__(self, db: Database, send: SendReplay | None, consumer: str = "floor", *, grace: float = 2.0,
                 retry: float = 10.0, retry_max: float = 300.0,
                 max_requests_per_table: int = MAX_REQUESTS_PER_TABLE) -> None:
        self.db = db
        self.send = send
        self.consumer = consumer
        self.grace = grace
        self.retry = retry
        self.retry_max = retry_max
        self.max_requests_per_table = max(1, max_requests_per_table)
        self.leader = False
        self.requests_sent = 0

    async def _lead(self) -> bool:
        """Whether this process leads the audit: on PostgreSQL, whether its database session holds the
        advisory lock now. The lock is the session's: a session that went (a server restart, a network
        cut, pg_terminate_backend) took it with it, and another process may hold it since; checked at
        every pass (before, a process that once led believed so for good, and two processes led)."""
        if self.db.dialect != "postgresql":
            if not self.leader:
                log.info("floor_audit_leader", consumer=self.consumer)
            self.leader = True
            return True
        if self.leader:
            rows = await self.db.fetchall(
                "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND "
                "classid = 0 AND objid = ? AND objsubid = 1 AND granted", (_LEADER_LOCK,))
            if rows and int(rows[0][0]):
                return True
            self.leader = False
            log.warning("floor_audit_leader_lost", consumer=self.consumer,
                        reason="the database session holding the lock ended")
        rows = await self.db.fetchall("SELECT pg_try_advisory_lock(?)", (_LEADER_LOCK,))
        self.leader = bool(rows and rows[0][0])
        if self.leader:
            log.info("floor_audit_leader", consumer=self.consumer)
        return self.leader

    async def audit(self, now: datetime | None = None) -> list[ReplayRequest]:
        """One pass over every ``(table, epoch)``; returns the replay requests sent in it. Does nothing
        (returns ``[]``) unless this process leads the audit."""
        if not await self._lead():
            return []
        now = now or datetime.now(UTC)
        tracks = await self.db.fetchall(
            "SELECT s.table_id, s.epoch, s.through_seq, s.max_seq, s.status_last_seq, s.last_progress_at, "
            "t.epoch, t.state FROM seq_tracks s LEFT JOIN tables t ON t.table_id = s.table_id "
            "ORDER BY s.table_id, s.epoch")
        sent: list[ReplayRequest] = []
        epochs: dict[str, list[str]] = {}
        for row in tracks:
            epochs.setdefault(str(row[0]), []).append(str(row[1]))
        for table, epoch, through, max_seq, last_seq, progress, cur_epoch, state in tracks:
            current = (cur_epoch == epoch) if cur_epoch else len(epochs[table]) == 1
            known_old = bool(cur_epoch) and cur_epoch != epoch
            target = max(int(max_seq), int(last_seq))
            async with self.db.transaction() as tx:
                open_rows = await tx.fetchall("SELECT COUNT(*) FROM gaps WHERE table_id = ? AND epoch = ? "
                                              "AND state = 'open'", (table, epoch))
                # a current epoch's lost ranges and SEQ_LOST alarms are looked at again (reopened,
                # cleared once recovered); an old epoch's stay as they are
                settled = int(through) >= target and not int(open_rows[0][0])
                if settled and (known_old or not await _lost_pending(tx, str(table), str(epoch))):
                    continue
                req = await self._audit_one(tx, now, table, epoch, int(through), target, str(progress),
                                            current and state == "online", known_old)
            for r in req:
                await self._send(r)
                sent.append(r)
        return sent

    async def _audit_one(self, tx: Tx, now: datetime, table: str, epoch: str, through: int, target: int,
                         progress: str, may_request: bool, old_epoch: bool) -> list[ReplayRequest]:
        if not old_epoch:
            # The epoch is the table's current one again (a duplicate instance stepped back, a status
            # of another journal was only a moment current): what was declared lost because that epoch
            # looked replaced can be replayed after all. Pruned ranges stay lost.
            await tx.execute("UPDATE gaps SET state = 'open', closed_at = NULL, next_request_at = ? WHERE "
                             "table_id = ? AND epoch = ? AND state = 'lost' AND detail = ?",
                             (_iso(now), table, epoch, _EPOCH_REPLACED))
        skip = [(int(a), int(b)) for a, b in await tx.fetchall(
            "SELECT from_seq, to_seq FROM gaps WHERE table_id = ? AND epoch = ? AND state IN ('pruned', "
            "'lost')",
            (table, epoch))]
        rows = await tx.fetchall("SELECT seq FROM messages WHERE table_id = ? AND epoch = ? AND seq > ? "
                                 "ORDER BY seq LIMIT ?", (table, epoch, through, _WALK))
        seqs = [int(r[0]) for r in rows]
        new_through, found = holes(through, seqs, target, skip, complete=len(seqs) < _WALK)
        if new_through != through:
            await tx.execute("UPDATE seq_tracks SET through_seq = ? WHERE table_id = ? AND epoch = ? AND "
                             "through_seq < ?", (new_through, table, epoch, new_through))
        opened = {int(r[0]): (int(r[1]), str(r[2]), int(r[3]), r[4], str(r[5])) for r in await tx.fetchall(
            "SELECT from_seq, to_seq, first_seen, requests, last_request_at, next_request_at FROM gaps "
            "WHERE table_id = ? AND epoch = ? AND state = 'open'", (table, epoch))}
        now_s = _iso(now)
        kept: set[int] = set()
        requests: list[ReplayRequest] = []
        asked: dict[int, int] = {}  # hole start -> requests made for it so far
        due_holes: list[tuple[int, int]] = []
        max_stored = seqs[-1] if seqs else through
        for lo, hi in found:
            overlap = [f for f, v in opened.items() if f <= hi and v[0] >= lo]
            if old_epoch:
                await tx.execute(
                    "INSERT INTO gaps (table_id, epoch, from_seq, to_seq, state, first_seen, requests, "
                    "next_request_at, closed_at, detail) VALUES (?, ?, ?, ?, 'lost', ?, 0, ?, ?, ?) ON "
                    "CONFLICT "
                    "(table_id, epoch, from_seq) DO UPDATE SET state = 'lost', to_seq = excluded.to_seq, "
                    "closed_at = excluded.closed_at",
                    (table, epoch, lo, hi, now_s, now_s, now_s, _EPOCH_REPLACED))
                for f in overlap:
                    if f != lo:
                        await tx.execute("DELETE FROM gaps WHERE table_id = ? AND epoch = ? AND from_seq = "
                                         "? AND "
                                         "state = 'open'", (table, epoch, f))
                await raise_floor_alarm(
                    tx, f"{table}:SEQ_LOST:{epoch}:{lo}", table, "SEQ_LOST",
                    f"seq {lo}..{hi} of journal epoch {epoch} never reached the floor and the table has "
                    f"replaced that journal: they cannot be replayed")
                continue
            tail = hi >= max_stored
            first_seen = min([now_s, *(opened[f][1] for f in overlap)])
            n_req = max([0, *(opened[f][2] for f in overlap)])
            last_req = max([opened[f][3] for f in overlap if opened[f][3]], default=None)
            nxt = min(opened[f][4] for f in overlap) if overlap else _iso(now + timedelta(seconds=self.grace))
            for f in overlap:
                if f != lo:
                    await tx.execute("DELETE FROM gaps WHERE table_id = ? AND epoch = ? AND from_seq = ? AND "
                                     "state = 'open'", (table, epoch, f))
            kept.add(lo)
            await tx.execute(
                "INSERT INTO gaps (table_id, epoch, from_seq, to_seq, state, first_seen, requests, "
                "last_request_at, "
                "next_request_at, detail) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, ?, '') ON CONFLICT "
                "(table_id, epoch, from_seq) DO UPDATE SET to_seq = excluded.to_seq, state = 'open', "
                "closed_at = NULL", (table, epoch, lo, hi, first_seen, n_req, last_req, nxt))
            due = _at(nxt) <= now
            quiet = _at(progress) <= now - timedelta(seconds=self.grace) if progress else True
            asked[lo] = n_req
            if due and not (tail and not quiet) and may_request:
                due_holes.append((lo, hi))
        # Many holes (messages dropped one in two) make a few ranged requests, not one per hole.
        for start, end in coalesce(due_holes, MAX_REPLAY_SPAN, self.max_requests_per_table):
            command_id = f"replay-{secrets.token_hex(8)}"
            requests.append(ReplayRequest(table, epoch, start, end, command_id))
            for lo, n_req in asked.items():
                if not start <= lo <= end:
                    continue
                n_req += 1
                backoff = min(self.retry * 2 ** (n_req - 1), self.retry_max)
                await tx.execute("UPDATE gaps SET requests = ?, last_request_at = ?, next_request_at = ? "
                                 "WHERE table_id = ? AND epoch = ? AND from_seq = ?",
                                 (n_req, now_s, _iso(now + timedelta(seconds=backoff)), table, epoch, lo))
            await tx.execute("INSERT INTO replay_requests (command_id, table_id, epoch, from_seq, to_seq, "
                             "sent_at, consumer) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (command_id, table, epoch, start, end, now_s, self.consumer))
        for f in opened:
            if f not in kept:
                await tx.execute("UPDATE gaps SET state = 'filled', closed_at = ? WHERE table_id = ? AND "
                                 "epoch = ? AND from_seq = ? AND state = 'open'", (now_s, table, epoch, f))
        await self._recovered(tx, table, epoch, now_s)
        still = await tx.fetchall("SELECT from_seq, to_seq, requests FROM gaps WHERE table_id = ? AND "
                                  "epoch = ? "
                                  "AND state = 'open' ORDER BY from_seq", (table, epoch))
        key = f"{table}:SEQ_GAP:{epoch}"
        requested = [(int(a), int(b)) for a, b, n in still if int(n) > 0]
        if requested:
            ranges = ", ".join(f"{a}..{b}" for a, b in requested[:5]) + (
                f" ... ({len(requested)} ranges)" if len(requested) > 5 else "")
            await raise_floor_alarm(tx, key, table, "SEQ_GAP",
                                    f"seq {ranges} of journal epoch {epoch} missing at the floor: "
                                    f"cmd/replay requested")
        elif not still:
            await clear_floor_alarm(tx, key, f"seq gaps of journal epoch {epoch} filled (by replay)")
        return requests

    async def _recovered(self, tx: Tx, table: str, epoch: str, now_s: str) -> None:
        """Clear each raised ``SEQ_LOST`` alarm of ``(table, epoch)`` whose range the floor now holds
        whole (a replay after the epoch became current again, a late delivery), and mark its gap
        ``filled``. The alarm's text names the range (``seq A..B ...``; a reopened gap may have been
        split since)."""
        prefix = f"{table}:SEQ_LOST:{epoch}:"
        raised = await tx.fetchall(
            "SELECT alarm_key, text FROM floor_alarms WHERE table_id = ? AND code = 'SEQ_LOST' AND state = "
            "'raised' AND substr(alarm_key, 1, ?) = ?", (table, len(prefix), prefix))
        for key, text in raised:
            m = _RANGE_RE.match(str(text))
            if m is None:
                continue
            lo, hi = int(m[1]), int(m[2])
            held = await tx.fetchall("SELECT COUNT(*) FROM messages WHERE table_id = ? AND epoch = ? AND "
                                     "seq >= ? AND seq <= ?", (table, epoch, lo, hi))
            if int(held[0][0]) < hi - lo + 1:
                continue
            await tx.execute("UPDATE gaps SET state = 'filled', closed_at = ? WHERE table_id = ? AND "
                             "epoch = ? AND from_seq >= ? AND to_seq <= ? AND state <> 'filled'",
                             (now_s, table, epoch, lo, hi))
            await clear_floor_alarm(tx, str(key), f"seq {lo}..{hi} of journal epoch {epoch} recovered: the "
                                                  f"floor holds every one of them now")

    async def _send(self, r: ReplayRequest) -> None:
        if self.send is None:
            return
        try:
            await self.send(r)
            self.requests_sent += 1
            log.warning("floor_replay_requested", table=r.table, epoch=r.epoch, from_seq=r.from_seq,
                        to_seq=r.to_seq, command_id=r.command_id)
        except Exception as exc:  # the next audit asks again (the gap stays open)
            log.warning("floor_replay_request_failed", table=r.table, error=f"{type(exc).__name__}: {exc}")

    async def on_reply(self, command_id: str, payload: bytes, table: str | None = None) -> None:
        """Record the table's answer to a replay request; the seqs of ranges it names as pruned (cut to
        the range asked) that the floor does not hold become ``SEQ_LOST``. ``table``: the table whose
        reply topic it came on; an answer to a request of another table's, to no request of this
        floor's, or larger than :data:`MAX_REPLY_BYTES` is ignored (logged)."""
        if len(payload) > MAX_REPLY_BYTES or not _COMMAND_ID.fullmatch(command_id):
            log.warning("floor_replay_reply_ignored", table=table, command_id=repr(command_id[:80]),
                        reason=f"{len(payload)} bytes" if len(payload) > MAX_REPLY_BYTES else
                        "not a command id of this floor's")
            return
        try:
            body = json.loads(payload)
        except (ValueError, RecursionError):
            body = {}
        if not isinstance(body, dict):
            body = {}
        ok = body.get("ok") is True
        reason = str(body.get("reason", ""))[:1000].replace("\x00", "\\x00")
        async with self.db.transaction() as tx:
            rows = await tx.fetchall("SELECT table_id, epoch, from_seq, to_seq FROM replay_requests WHERE "
                                     "command_id = ?", (command_id,))
            if not rows or (table is not None and str(rows[0][0]) != table):
                log.warning("floor_replay_reply_ignored", table=table, command_id=command_id[:80],
                            reason="no such request of this floor" if not rows else
                            f"the request was sent to {rows[0][0]}")
                return
            table, epoch = str(rows[0][0]), str(rows[0][1])
            asked = (int(rows[0][2]), int(rows[0][3]))
            await tx.execute("UPDATE replay_requests SET reply_ok = ?, reply_reason = ?, replied_at = ? "
                             "WHERE command_id = ?", (ok, reason, now_iso(), command_id))
            if not ok:
                log.warning("floor_replay_refused", table=table, command_id=command_id, reason=reason)
                return
            for lo, hi in await _missing(tx, table, epoch, pruned_ranges(reason, asked)):
                now_s = now_iso()
                await tx.execute(
                    "INSERT INTO gaps (table_id, epoch, from_seq, to_seq, state, first_seen, requests, "
                    "next_request_at, closed_at, detail) VALUES (?, ?, ?, ?, 'pruned', ?, 0, ?, ?, ?) ON "
                    "CONFLICT "
                    "(table_id, epoch, from_seq) DO UPDATE SET state = 'pruned', to_seq = excluded.to_seq, "
                    "closed_at = excluded.closed_at, detail = excluded.detail",
                    (table, epoch, lo, hi, now_s, now_s, now_s, reason))
                await raise_floor_alarm(
                    tx, f"{table}:SEQ_LOST:{epoch}:{lo}", table, "SEQ_LOST",
                    f"seq {lo}..{hi} of journal epoch {epoch} were pruned at the table before the floor got "
                    f"them: they cannot be replayed")
            log.info("floor_replay_answered", table=table, command_id=command_id, reason=reason)
