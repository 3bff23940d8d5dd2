"""Journal and outbox: order, seq/msg_id across restarts, atomicity, replay, retention, bounded memory."""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from journal_support import PAD, SHOE, TABLE, RealTable, Step, Traffic, sealed_rows

from tablesense.daemon.journal import (
    Journal,
    JournalDamaged,
    JournalUnwritable,
    OutboxRow,
    audit,
    load_key,
    open_for_recall,
)
from tablesense.daemon.journal.seal import InputRow, MarkRow, PruneRow
from tablesense.daemon.messages import FloorRound, RoundState, SettlementMessage, decode_message
from tablesense.daemon.table.inputs import Channel, Emit, TimedInput
from tablesense.drivers.events import Heartbeat, LinkState, ShoeStatus, ShoeStatusKind


def feed(journal: Journal, steps: list[Step]) -> list[OutboxRow]:
    rows: list[OutboxRow] = []
    for inp, emits in steps:
        rows.extend(journal.append(inp, emits))
    return rows


def deliver_all(journal: Journal) -> None:
    while rows := journal.pending(limit=50):
        for row in rows:
            journal.mark_delivered(row.row_id)


@pytest.fixture
def traffic() -> Traffic:
    return Traffic()


def test_append_pending_mark_delivered_in_order(tmp_path: Path, traffic: Traffic) -> None:
    with Journal(tmp_path, TABLE) as j:
        steps = traffic.new_shoe() + traffic.baccarat_round()
        rows = feed(j, steps)
        n_emits = sum(len(e) for _, e in steps)
        assert [r.seq for r in rows] == list(range(1, n_emits + 1))
        assert all(r.row_id == r.seq for r in rows)
        assert j.pending_count() == n_emits
        pending = j.pending(limit=1000)
        assert pending == rows
        # each stored payload is the emitted message with seq and msg_id filled in
        flat = [e for _, emits in steps for e in emits]
        for row, emit in zip(pending, flat, strict=True):
            msg = decode_message(row.payload)
            is_floor = isinstance(msg, FloorRound)
            chain = {"chain_seq": row.seq - 1, "chain_head": msg.chain_head} if is_floor else {}
            assert msg == msgspec.structs.replace(emit.message, seq=row.seq, msg_id=row.msg_id, **chain)
            assert row.channel == emit.channel.value and row.retain == emit.retain and row.qos == emit.qos
            assert re.fullmatch(rf"{TABLE}-{j.epoch}-{row.seq}-[0-9a-f]{{8}}", row.msg_id)
        assert len({r.msg_id for r in rows}) == len(rows)
        j.mark_delivered(rows[0].row_id)
        j.mark_delivered(rows[2].row_id)
        j.mark_delivered(rows[2].row_id)  # idempotent
        assert [r.seq for r in j.pending(limit=3)] == [2, 4, 5]
        assert [r.seq for r in j.pending(limit=2, after_row=4)] == [5, 6]
        assert j.pending_count() == n_emits - 2
        j.flush_marks()  # sealed as one mark entry; the same answers from the file
        j.mark_delivered(rows[2].row_id)  # still idempotent
        assert [r.seq for r in j.pending(limit=3)] == [2, 4, 5] and j.pending_count() == n_emits - 2
        with pytest.raises(KeyError):
            j.mark_delivered(10_000)
        with pytest.raises(ValueError):
            j.pending(limit=0)
    marks = [r for r in sealed_rows(tmp_path) if isinstance(r, MarkRow)]
    assert [m.ranges for m in marks] == [((1, 1), (3, 3))]


def test_input_without_emits_is_journaled_and_takes_no_seq(tmp_path: Path, traffic: Traffic) -> None:
    with Journal(tmp_path, TABLE) as j:
        feed(j, traffic.new_shoe())
        assert j.append(*traffic.heartbeat()) == []
        assert j.last_seq == 1
        rows = feed(j, traffic.baccarat_round())
        assert rows[0].seq == 2
        assert [type(i.event) for i in j.replay_inputs()][:2] == [ShoeStatus, Heartbeat]


def test_seq_and_msg_id_survive_close_and_reopen(tmp_path: Path, traffic: Traffic) -> None:
    j = Journal(tmp_path, TABLE)
    first = feed(j, traffic.new_shoe() + traffic.baccarat_round())
    j.mark_delivered(first[0].row_id)
    epoch = j.epoch
    j.close()
    j = Journal(tmp_path, TABLE)
    assert j.epoch == epoch and j.last_seq == first[-1].seq
    assert j.pending(limit=1000) == first[1:]  # same rows, same msg_id, same payload
    assert first[1].msg_id.startswith(f"{TABLE}-{epoch}-{first[1].seq}-")
    more = feed(j, traffic.baccarat_round())
    assert more[0].seq == first[-1].seq + 1
    assert [r.seq for r in j.pending(limit=1000)] == list(range(2, more[-1].seq + 1))
    j.close()


def test_msg_ids_differ_between_two_journal_files(tmp_path: Path) -> None:
    a = Journal(tmp_path / "a", TABLE)
    b = Journal(tmp_path / "b", TABLE)
    ra = feed(a, Traffic().new_shoe())
    rb = feed(b, Traffic().new_shoe())
    assert ra[0].seq == rb[0].seq == 1 and ra[0].msg_id != rb[0].msg_id
    a.close()
    b.close()


def test_failure_mid_append_leaves_nothing(tmp_path: Path, traffic: Traffic) -> None:
    j = Journal(tmp_path, TABLE)
    feed(j, traffic.new_shoe())
    before = (j.last_seq, j.pending_count(), len(list(j.replay_inputs())))
    # a real failure inside the transaction, after the input row and the first outbox rows went in (a
    # trigger planted while the journal is open: a constraint failure, which no genuine append raises, is
    # reported as damage, not as a full disk)
    side = sqlite3.connect(j.path)
    side.execute("CREATE TRIGGER boom BEFORE INSERT ON outbox WHEN NEW.seq = 6 "
                 "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    side.commit()
    steps = traffic.baccarat_round()
    feed(j, steps[:4])  # the bet (no message) and 3 cards: rows 2, 3, 4
    assert j.last_seq == 4
    with pytest.raises(JournalDamaged, match="injected failure"):
        j.append(*steps[4])  # 4th card: round state (row 5, inserted) + settlement (row 6, fails)
    assert j.last_seq == 4 and j.pending_count() == 4
    assert len(list(j.replay_inputs())) == before[2] + 4
    assert side.execute("SELECT max(seq) FROM outbox").fetchone()[0] == 4  # nothing of the failed append
    assert side.execute("SELECT max(id) FROM log").fetchone()[0] == len(list(j.replay_inputs()))
    side.execute("DROP TRIGGER boom")
    side.commit()
    side.close()
    rows = j.append(*steps[4])  # the same append now succeeds with the seq the failed one would have had
    assert [r.seq for r in rows] == [5, 6]
    j.close()
    with Journal(tmp_path, TABLE) as j2:
        assert [r.seq for r in j2.pending(limit=100)] == [1, 2, 3, 4, 5, 6]


def test_unjournalable_input_raises_before_writing(tmp_path: Path) -> None:
    with Journal(tmp_path, TABLE) as j:
        with pytest.raises(TypeError):
            j.append(TimedInput("2026-11-29T12:00:00Z", object()), [])  # type: ignore[arg-type]
        assert list(j.replay_inputs()) == []


def test_size_cap_reached_raises_unwritable_and_keeps_earlier_rows(tmp_path: Path) -> None:
    traffic = Traffic()
    j = Journal(tmp_path, TABLE, max_size_bytes=64 * 1024)
    written: list[OutboxRow] = []
    with pytest.raises(JournalUnwritable, match="full"):
        for _ in range(500):
            for inp, emits in traffic.baccarat_round():
                written.extend(j.append(inp, emits))
    assert written, "some rounds fit before the cap"
    assert j.last_seq == written[-1].seq and j.pending_count() == len(written)
    j.close()
    with Journal(tmp_path, TABLE) as j2:  # opens clean: integrity and checksums pass
        assert j2.pending(limit=100_000) == written


def test_damaged_file_refuses_to_open(tmp_path: Path, traffic: Traffic) -> None:
    j = Journal(tmp_path, TABLE)
    for _ in range(20):
        feed(j, traffic.baccarat_round())
    j.close()
    data = bytearray(j.path.read_bytes())
    page = 4096
    assert len(data) > 6 * page
    data[3 * page: 5 * page] = bytes((i * 37 + 11) % 256 for i in range(2 * page))  # garbage in 2 pages
    j.path.write_bytes(bytes(data))
    with pytest.raises(JournalDamaged):
        Journal(tmp_path, TABLE)
    with pytest.raises(JournalDamaged):
        open_for_recall(tmp_path)


def test_truncated_file_refuses_to_open(tmp_path: Path, traffic: Traffic) -> None:
    j = Journal(tmp_path, TABLE)
    for _ in range(20):
        feed(j, traffic.baccarat_round())
    j.close()
    data = j.path.read_bytes()
    j.path.write_bytes(data[: len(data) // 2])  # a lost tail, e.g. a filesystem without journalling
    with pytest.raises(JournalDamaged):
        Journal(tmp_path, TABLE)


def test_changed_row_content_is_caught_by_its_seal(tmp_path: Path, traffic: Traffic) -> None:
    j = Journal(tmp_path, TABLE)
    rows = feed(j, traffic.new_shoe() + traffic.baccarat_round(stake=2500))
    j.close()
    data = j.path.read_bytes()
    needle = b'"stake":2500'
    assert needle in data
    j.path.write_bytes(data.replace(needle, b'"stake":9500', 1))  # same length: SQLite's structure is intact
    side = sqlite3.connect(j.path)
    assert side.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    side.close()
    with pytest.raises(JournalDamaged, match="fails its seal"):
        Journal(tmp_path, TABLE)
    assert rows


def test_garbage_file_and_foreign_journal_refuse_to_open(tmp_path: Path) -> None:
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "journal.sqlite").write_bytes(b"this is not a database" * 500)
    with pytest.raises(JournalDamaged):
        Journal(tmp_path / "g", TABLE)
    Journal(tmp_path / "t", "other-table").close()
    with pytest.raises(JournalDamaged, match="other-table"):
        Journal(tmp_path / "t", TABLE)
    side = sqlite3.connect(tmp_path / "t" / "journal.sqlite")
    side.execute("PRAGMA user_version=99")
    side.close()
    with pytest.raises(JournalDamaged, match="schema version 99"):
        Journal(tmp_path / "t", "other-table")


def test_second_writer_is_refused(tmp_path: Path) -> None:
    with Journal(tmp_path, TABLE), pytest.raises(JournalUnwritable, match="in use"):
        Journal(tmp_path, TABLE)
    Journal(tmp_path, TABLE).close()  # free again once closed


def test_directory_that_cannot_be_created_is_unwritable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(JournalUnwritable):
        Journal(tmp_path / "file" / "sub", TABLE)


def test_retention_must_cover_recall() -> None:
    with pytest.raises(ValueError, match="at least 10"):
        Journal("/nonexistent-never-created", TABLE, retention_rounds=9)


def test_replay_starts_at_the_previous_shoe(tmp_path: Path, traffic: Traffic) -> None:
    with Journal(tmp_path, TABLE) as j:
        assert list(j.replay_inputs()) == [] and j.replay_shoe is None and j.current_shoe is None
        first = [traffic.device_state(PAD, LinkState.ONLINE), *traffic.new_shoe(), *traffic.baccarat_round()]
        feed(j, first)
        assert list(j.replay_inputs()) == [inp for inp, _ in first]
        assert (j.current_shoe, j.replay_shoe, j.pads_before_replay()) == (1, 1, [])
        second = traffic.new_shoe() + traffic.baccarat_round(alarm=True) + [traffic.command("ack_alarm",
                                                                                            alarm="2.1")]
        feed(j, second)
        assert list(j.replay_inputs()) == [inp for inp, _ in first + second]  # from the journal's start
        assert (j.current_shoe, j.replay_shoe, j.current_round()) == (2, 1, (2, 2))
        third = [*traffic.new_shoe(), traffic.device_state(SHOE, LinkState.STALE)]
        third += traffic.baccarat_round()[:3]  # the open round
        feed(j, third)
        replay = list(j.replay_inputs())
        assert replay == [inp for inp, _ in second + third]  # from the start of the previous shoe
        assert isinstance(replay[0].event, ShoeStatus) and replay[0].event.kind is ShoeStatusKind.NEW_SHOE
        assert (j.current_shoe, j.replay_shoe, j.current_round()) == (3, 2, (3, 1))
        pads = j.pads_before_replay()  # the bet of shoe 1's round, still on the layout when shoe 2 began
        assert [p.ts for p in pads] == [first[2][0].ts]
    with Journal(tmp_path, TABLE) as j:  # all of it survives a restart
        assert list(j.replay_inputs()) == replay and j.pads_before_replay() == pads
        assert (j.current_shoe, j.replay_shoe, j.current_round()) == (3, 2, (3, 1))


def test_last_device_seq(tmp_path: Path, traffic: Traffic) -> None:
    with Journal(tmp_path, TABLE) as j:
        assert j.last_device_seq(SHOE) is None
        feed(j, traffic.new_shoe() + traffic.baccarat_round())
        feed(j, [traffic.device_state(SHOE, LinkState.DISCONNECTED)])  # no device seq: unchanged
        assert j.last_device_seq(SHOE) == 5 and j.last_device_seq(PAD) == 2
    with Journal(tmp_path, TABLE) as j:
        assert j.last_device_seq(SHOE) == 5


def test_retained_latest_is_the_latest_delivered_per_topic(tmp_path: Path, traffic: Traffic) -> None:
    with Journal(tmp_path, TABLE) as j:
        feed(j, traffic.new_shoe() + traffic.baccarat_round())
        feed(j, [traffic.device_state(SHOE, LinkState.ONLINE), traffic.device_state(PAD, LinkState.ONLINE)])
        assert j.retained_latest() == []  # nothing delivered yet: the relay publishes in order anyway
        deliver_all(j)
        latest = j.retained_latest()
        assert [(r.channel, r.device) for r in latest] == [
            ("round", None), ("devices", SHOE), ("devices", PAD)]
        assert j.pending(limit=10) == []
        newer = feed(j, traffic.baccarat_round()[:2])  # a newer round state, not yet delivered
        assert j.retained_latest() == latest
        j.mark_delivered(newer[-1].row_id)
        again = j.retained_latest()
        assert again[-1] == newer[-1] and len(again) == 3
        state = decode_message(again[-1].payload)
        assert isinstance(state, RoundState) and state.seq == newer[-1].seq


def test_prune_keeps_undelivered_recall_and_replay(tmp_path: Path, traffic: Traffic) -> None:
    """Retention deletes whole archive units (:data:`UNIT_BLOCKS` rounds) below the last 10 rounds and
    the replay; a unit holding an unacknowledged message stays whole."""
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:
        feed(j, traffic.new_shoe())
        feed(j, [traffic.device_state(SHOE, LinkState.ONLINE)])
        feed(j, traffic.baccarat_round())  # shoe 1 round 1
        deliver_all(j)
        undelivered = feed(j, traffic.baccarat_round())  # shoe 1 round 2: never acknowledged
        for _ in range(38):
            feed(j, traffic.baccarat_round())  # shoe 1 rounds 3-40
        feed(j, traffic.new_shoe())
        feed(j, traffic.quiet())  # heartbeats: the devices' frames before the replay are not needed
        for _ in range(3):
            feed(j, traffic.baccarat_round())  # shoe 2 rounds 1-3
        feed(j, traffic.new_shoe())
        for _ in range(12):
            feed(j, traffic.baccarat_round())  # shoe 3 rounds 1-12
        for row in j.pending(limit=10_000):
            if row not in undelivered:
                j.mark_delivered(row.row_id)
        feed(j, traffic.baccarat_round()[:3])  # shoe 3 round 13, open
        replay_before = list(j.replay_inputs())
        first_before = j.first_seq()
        assert j.prune() > 0
        assert j.pending(limit=10_000)[: len(undelivered)] == undelivered
        assert list(j.replay_inputs()) == replay_before
        assert j.first_seq() == first_before == 1  # the first unit holds round 1-2: kept whole
        with open_for_recall(tmp_path) as reader:
            ids = [r.round_id for r in reader.rounds(last=100)]
            # rounds 1-17..1-32 (the second unit) went; the first unit stays for 1-2's messages (and holds
            # the opening of 1-17 for betting, sent at 1-16's end), the third holds the replay's start
            # (shoe 2), the rest is not archived yet
            assert ids[:3] == ["1-1", "1-2", "1-3"] and "1-18" not in ids and "1-32" not in ids
            assert ids[ids.index("1-16") + 1:ids.index("1-16") + 3] == ["1-17", "1-33"] and ids[-1] == "3-13"
            assert reader.round("1-17").status == "incomplete"
            kept = reader.round("1-2")
            assert {m.seq for m in kept.messages if not m.delivered} == {r.seq for r in undelivered} & {
                m.seq for m in kept.messages}
            assert kept.status == "complete" and len(kept.settlements) == 1
            with pytest.raises(KeyError):
                reader.round("1-20")
            with pytest.raises(KeyError):
                reader.round("1-18")
            assert reader.round("3-3").status == "complete" and len(reader.round("3-3").cards) == 4
        assert ("devices", SHOE) in [(r.channel, r.device) for r in j.retained_latest()]
        assert j.prune() == 0  # nothing more to do
        assert j.messages_by_seq(1, j.last_seq)[0].seq == 1
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:  # a pruned journal reopens clean
        assert j.pending(limit=10_000)[: len(undelivered)] == undelivered
    report = audit(tmp_path, load_key())
    assert report.ok and report.prunes == 1, report.failure


def test_prune_never_touches_the_replay(tmp_path: Path, traffic: Traffic) -> None:
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:
        feed(j, traffic.new_shoe())
        for _ in range(40):
            feed(j, traffic.baccarat_round())
        deliver_all(j)
        replay = list(j.replay_inputs())
        assert j.prune() == 0  # every input since the shoe began is needed to rebuild the machine
        assert list(j.replay_inputs()) == replay


def test_prune_drops_inputs_of_earlier_shoes(tmp_path: Path, traffic: Traffic) -> None:
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:
        feed(j, traffic.new_shoe())
        for _ in range(40):
            feed(j, traffic.baccarat_round())
        feed(j, traffic.new_shoe())
        feed(j, traffic.quiet())  # heartbeats: the devices' frames before the replay are not needed
        for _ in range(3):
            feed(j, traffic.baccarat_round())
        feed(j, traffic.new_shoe())
        for _ in range(20):
            feed(j, traffic.baccarat_round())
        deliver_all(j)
        replay = list(j.replay_inputs())
        pads = j.pads_before_replay()
        assert [(p.event.spot, p.event.amount) for p in pads] == [("P1-PP", 2500)]  # type: ignore[union-attr]
        assert j.prune() > 0
        kept = [r for r in sealed_rows(tmp_path) if isinstance(r, InputRow)]
        # the replay starts with shoe 2; shoe 1's first 32 rounds are gone, the unit with the bet still on
        # the layout when shoe 2 began (round 1-40) is kept
        assert kept[0].ts > replay[0].ts or kept[0].ts < replay[0].ts
        assert len(kept) < len(replay) + 16 * 6 and [i for i in kept if i.ts >= replay[0].ts] != []
        assert list(j.replay_inputs()) == replay and j.pads_before_replay() == pads
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:
        assert list(j.replay_inputs()) == replay and j.pads_before_replay() == pads


def test_prune_by_days_keeps_recent_rounds(tmp_path: Path, traffic: Traffic) -> None:
    with Journal(tmp_path, TABLE, retention_rounds=10, retention_days=30) as j:
        feed(j, traffic.new_shoe())
        for _ in range(40):
            feed(j, traffic.baccarat_round())
        for _ in range(2):
            feed(j, traffic.new_shoe())
            feed(j, traffic.quiet())  # heartbeats: the devices' frames before the replay are not needed
            feed(j, traffic.baccarat_round())
        deliver_all(j)
        assert j.prune(now=traffic.start + timedelta(days=29)) == 0  # all rounds are younger than 30 days
        assert j.prune(now=traffic.start + timedelta(days=31)) > 0
        with open_for_recall(tmp_path) as reader:
            assert reader.rounds(last=100)[0].round_id == "1-33"  # whole units of 16 rounds went


def test_prune_by_size_archives_and_gives_space_back(scratch: Path) -> None:
    """``max_size``: once the used size exceeds it, older units go (never the last 10 rounds nor the
    replay), ignoring ``retention_days``; freed pages are returned to the file system. The daemon's real
    messages of a 17-spot baccarat table, four shoes."""
    table = RealTable(seed=3)
    with Journal(scratch, "bac-01", retention_rounds=1000, retention_days=365, max_size=1 << 20) as j:
        for n in range(330):
            for inp, emits in table.round():
                for row in j.append(inp, emits):
                    j.mark_delivered(row.row_id)
            if n % 10 == 9:
                j.prune()
        j.prune()
        used = j._used_bytes(j._db())  # the figure retention works on
        side = sqlite3.connect(j.path)
        free = side.execute("PRAGMA freelist_count").fetchone()[0]
        side.close()
        assert used <= 1 << 20
        assert free < 64  # incremental vacuum gave the freed pages back
        prunes = [r for r in sealed_rows(scratch) if isinstance(r, PruneRow)]
        assert prunes and {p.reason for p in prunes} == {"size"}
        assert (j.first_seq() or 0) > 1
    report = audit(scratch, load_key())
    assert report.ok, report.failure


def test_one_prune_gives_back_every_page_it_frees(scratch: Path) -> None:
    """``PRAGMA incremental_vacuum(N)`` frees one page per step of the statement: run with ``execute`` it
    freed ONE page per call, so a prune that freed more than its 256 steps left the rest in the file
    (and spent 4 statements a page). Stepped to completion, one prune gives back everything it freed."""
    table = RealTable(seed=4)
    with Journal(scratch, "bac-01", retention_rounds=10, retention_days=365) as j:
        for _ in range(150):  # about 6 MB of hot rows, nothing archived yet
            for inp, emits in table.round():
                for row in j.append(inp, emits):
                    j.mark_delivered(row.row_id)
        vacuum = j._vacuum
        freed: list[int] = []

        def counted(*args: Any, **kwargs: Any) -> Any:  # a generator of steps, as _vacuum
            freed.append(j._db().execute("PRAGMA freelist_count").fetchone()[0])
            yield from vacuum(*args, **kwargs)

        j._vacuum = counted  # type: ignore[method-assign]
        j.prune()  # archives every closed block in one go: their hot rows' pages are freed
        side = sqlite3.connect(j.path)
        try:
            free = side.execute("PRAGMA freelist_count").fetchone()[0]
        finally:
            side.close()
    assert freed and freed[0] > 4 * 256, f"the prune freed only {freed} pages"
    assert free == 0, f"{free} of the {freed[0]} pages the prune freed are still in the file"


@pytest.fixture
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A journal directory in memory (/dev/shm) when there is one: fsync costs nothing there, for tests
    that write thousands of transactions and measure nothing."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() else Path(str(tmp_path_factory.mktemp("scratch")))
    directory = Path(tempfile.mkdtemp(prefix="tablesense-journal-", dir=base))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_pending_reads_a_bounded_window_of_100k_undelivered_rows(tmp_path_factory: pytest.TempPathFactory
                                                                   ) -> None:
    shm = Path("/dev/shm")
    base = Path(str(tmp_path_factory.mktemp("big"))) if not shm.is_dir() else shm
    directory = base / f"tablesense-journal-{datetime.now(UTC).timestamp()}"
    try:
        traffic = Traffic()
        with Journal(directory, TABLE) as j:
            for _ in range(1_000):  # 1,000 appends of 100 settlements each: 100k undelivered rows
                inp, _ = traffic.heartbeat()
                settle = traffic.settlement(inp.ts, 500, ("QH", "QS", "3D", "8C"))
                j.append(inp, [settle] * 100)
            assert j.pending_count() == 100_000
            tracemalloc.start()
            rows = j.pending(limit=100)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            assert [r.seq for r in rows] == list(range(1, 101))
            assert peak < 1_000_000, f"pending(limit=100) peaked at {peak} bytes"
            assert [r.seq for r in j.pending(limit=100, after_row=99_950)] == list(range(99_951, 100_001))
            assert isinstance(decode_message(rows[0].payload), SettlementMessage)
    finally:
        for f in directory.glob("*"):
            f.unlink()
        directory.rmdir()


def test_append_accepts_every_channel(tmp_path: Path, traffic: Traffic) -> None:
    with Journal(tmp_path, TABLE) as j:
        (inp, _), = traffic.new_shoe()
        msg = RoundState(table=TABLE, ts=inp.ts, shoe=1, round=1, game="baccarat", phase="betting")
        rows = j.append(inp, [Emit(c, msg, device="x" if c is Channel.DEVICE else None) for c in Channel])
        assert [r.channel for r in rows] == [c.value for c in Channel]
        assert rows[[c for c in Channel].index(Channel.DEVICE)].device == "x"


def test_replay_by_seq_reads_stored_messages_and_chain_head(tmp_path: Path, traffic: Traffic) -> None:
    """``messages_by_seq`` (for ``cmd/replay``): every journaled message in the range, delivered or not,
    the stored bytes, archived or not; pruned ones absent, ``first_seq`` the lowest held. ``chain_head``
    is the head after the last row, and each floor record carries the head just before its own row."""
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:
        assert j.chain_head() == (0, j.chain_head()[1]) and len(j.chain_head()[1]) == 64
        assert j.first_seq() is None and j.messages_by_seq(1, 10) == []
        written = feed(j, traffic.new_shoe())
        for _ in range(40):
            before = j.chain_head()
            rows = feed(j, traffic.baccarat_round())
            floor = decode_message(next(r for r in rows if r.channel == "floor/rounds").payload)
            assert isinstance(floor, FloorRound) and floor.chain_seq == floor.seq - 1
            assert floor.chain_head != before[1]  # rows of the round came between
            written += rows
        deliver_all(j)
        assert j.messages_by_seq(1, j.last_seq, limit=100_000) == written
        assert j.messages_by_seq(5, 9) == written[4:9] and j.messages_by_seq(5, 9, limit=2) == written[4:6]
        assert j.messages_by_seq(j.last_seq + 1, j.last_seq + 5) == []
        seq, head = j.chain_head()
        assert seq == j.last_seq and head == audit(tmp_path, load_key()).chain_head
        for _ in range(2):
            feed(j, traffic.new_shoe())
            feed(j, traffic.quiet())  # heartbeats: the devices' frames before the replay are not needed
            feed(j, traffic.baccarat_round())
        deliver_all(j)
        assert j.prune() > 0  # the first units go
        first = j.first_seq()
        assert first is not None and first > 1
        got = j.messages_by_seq(1, first + 2)
        assert [r.seq for r in got] == [first, first + 1, first + 2]
        assert got == [r for r in written if first <= r.seq <= first + 2]
        with pytest.raises(ValueError):
            j.messages_by_seq(1, 2, limit=0)
    with Journal(tmp_path, TABLE, retention_rounds=10) as j:  # from the file, verified, after a restart
        assert j.messages_by_seq(first, first + 2) == got
