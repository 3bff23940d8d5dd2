"""Faults the journal must survive: SIGKILL at random moments, a file-size limit hit mid-append (the
operating system refusing writes, like a full disk)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest
from journal_support import sealed_rows

from tablesense.daemon.journal import Journal, audit, load_key
from tablesense.daemon.journal.seal import InputRow, MarkRow, MessageRow

ROOT = Path(__file__).resolve().parent.parent

# Appends Heartbeat inputs, each with (device seq % 3) + 1 settlement messages, marks some delivered, and
# prints the seq of every append once it has returned (= committed).
APPENDER = textwrap.dedent("""
    import sys
    from tablesense.daemon.journal import Journal
    from tablesense.daemon.messages import SettlementMessage
    from tablesense.daemon.table.inputs import Channel, Emit, TimedInput
    from tablesense.drivers.events import Heartbeat

    j = Journal(sys.argv[1], "t9")
    n = j.last_device_seq("shoe") or 0
    print("ready", flush=True)
    while True:
        n += 1
        ts = f"2026-11-29T12:00:00.{n % 1000:03d}Z"
        msg = SettlementMessage(table="t9", ts=ts, shoe=1, round=n, spot="P1", seat="1", bet="player_pair",
                                hand=None, stake=500, outcome="lose", category="no_pair", odds=None, net=-500)
        rows = j.append(TimedInput(ts, Heartbeat("shoe", n)), [Emit(Channel.SETTLEMENTS, msg)] * (n % 3 + 1))
        print(rows[-1].seq, flush=True)
        if n % 4 == 0:
            for row in j.pending(limit=3):
                j.mark_delivered(row.row_id)
""")


def _check_consistent(directory: Path) -> tuple[int, int]:
    """Open (the start-up checks), then audit the whole chain: every input has exactly its messages,
    ``seq`` runs without a gap, acknowledged + pending = all; returns (inputs, last seq)."""
    with Journal(directory, "t9") as j:
        last_seq = j.last_seq
        pending = j.pending(limit=1_000_000)
    report = audit(directory, load_key())
    assert report.ok, report.failure
    rows = sealed_rows(directory)
    seqs = [r.seq for r in rows if isinstance(r, MessageRow)]
    assert seqs == list(range(1, last_seq + 1)), "seq strictly increasing, no gap, no hole"
    per_input: list[tuple[int, int]] = []
    for row in rows:
        if isinstance(row, InputRow):
            per_input.append((int(msgspec.json.decode(row.payload)["seq"]), 0))
        elif isinstance(row, MessageRow):
            per_input[-1] = (per_input[-1][0], per_input[-1][1] + 1)
    for device_seq, count in per_input:
        assert count == device_seq % 3 + 1, f"input {device_seq} has {count} rows: half-written"
    assert [d for d, _ in per_input] == list(range(1, len(per_input) + 1))
    marked = sum(hi - lo + 1 for r in rows if isinstance(r, MarkRow) for lo, hi in r.ranges)
    assert marked + len(pending) == last_seq
    return len(per_input), last_seq


def test_sigkill_at_random_moments_leaves_a_clean_journal(tmp_path: Path) -> None:
    rng = random.Random(5)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    acknowledged = 0
    inputs = 0
    for _ in range(6):
        child = subprocess.Popen([sys.executable, "-c", APPENDER, str(tmp_path)], stdout=subprocess.PIPE,
                                 env=env, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        wanted = rng.randint(5, 60)
        last = 0
        for _ in range(wanted):
            last = int(child.stdout.readline())
        time.sleep(rng.uniform(0, 0.05))  # and then at a random moment, mid-transaction or not
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        count, last_seq = _check_consistent(tmp_path)
        assert last_seq >= last, "every append that returned is in the journal"
        assert count > inputs and last_seq > acknowledged
        acknowledged, inputs = last_seq, count


FSIZE_CHILD = textwrap.dedent("""
    import resource, signal, sys
    from tablesense.daemon.journal import Journal, JournalUnwritable
    from tablesense.daemon.messages import SettlementMessage
    from tablesense.daemon.table.inputs import Channel, Emit, TimedInput
    from tablesense.drivers.events import Heartbeat

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG, as on a full disk
    j = Journal(sys.argv[1], "t9")
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, resource.RLIM_INFINITY))
    def append(n):
        ts = f"2026-11-29T12:00:00.{n % 1000:03d}Z"
        msg = SettlementMessage(table="t9", ts=ts, shoe=1, round=n, spot="P1", seat="1", bet="player_pair",
                                hand=None, stake=500, outcome="lose", category="x" * 300, odds=None, net=-500)
        return j.append(TimedInput(ts, Heartbeat("shoe", n)), [Emit(Channel.SETTLEMENTS, msg)] * (n % 3 + 1))
    n = 0
    try:
        while True:
            n += 1
            append(n)
    except JournalUnwritable as exc:
        print("unwritable", n, j.last_seq, exc, flush=True)
    try:
        append(n)
        print("still-writable", flush=True)
    except JournalUnwritable:
        print("still-unwritable", j.last_seq, flush=True)
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    rows = append(n)  # space is back: the same append goes through, seq continues without a gap
    print("recovered", rows[0].seq, j.last_seq, flush=True)
    j.close()
""")


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE / SIGXFSZ behaviour checked on Linux")
def test_file_size_limit_mid_append_raises_unwritable_and_writes_nothing_partial(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", FSIZE_CHILD, str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    first = lines[0].split()
    assert first[0] == "unwritable" and int(first[1]) > 10, lines
    seq_at_failure = int(first[2])
    assert lines[1].split() == ["still-unwritable", str(seq_at_failure)]
    assert lines[2].split() == ["recovered", str(seq_at_failure + 1), lines[2].split()[2]]
    count, last_seq = _check_consistent(tmp_path)
    assert last_seq == int(lines[2].split()[2]) and count == int(first[1])
