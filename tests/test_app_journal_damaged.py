"""``tablesense run`` with a damaged journal (a damaged journal raises a critical alarm and
tablesense refuses to settle rather than guess"): the service keeps running in a refusing mode. Real
Mosquitto, the daemon as a subprocess, the shoe on a real pseudo-terminal, a journal file with two pages
overwritten."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from e2e_support import Daemon, Recorder
from journal_support import Traffic
from test_link_reack import PtyDevice

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.config import parse_config
from tablesense.daemon.journal import Journal
from tablesense.daemon.messages import AlarmMessage, TableStatus, decode_message
from tablesense.simulators.dealer import sim_config_toml

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(120)]


def _json(body: dict[str, object]) -> bytes:
    return json.dumps(body).encode()


def damaged_journal(directory: Path, table: str) -> Path:
    """A journal with 20 baccarat rounds, then garbage written over two of its pages (a disk fault)."""
    traffic = Traffic(table=table)
    with Journal(directory, table) as j:
        traffic.new_shoe()
        for _ in range(20):
            for inp, emits in traffic.baccarat_round():
                j.append(inp, emits)
        path = j.path
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 6 * page
    data[3 * page: 5 * page] = bytes((i * 37 + 11) % 256 for i in range(2 * page))
    path.write_bytes(bytes(data))
    return path


async def test_damaged_journal_runs_refusing_with_a_critical_alarm_and_exits_0(tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    shoe = PtyDevice()
    daemon: Daemon | None = None
    rec: Recorder | None = None
    try:
        text = sim_config_toml("baccarat", urls={"shoe": shoe.path, "pads": str(tmp_path / "no-pads")},
                               host=broker.host, port=broker.port, journal=tmp_path / "journal")
        config = parse_config(text)
        (tmp_path / "table.toml").write_text(text)
        journal = damaged_journal(tmp_path / "journal", config.table)
        before = hashlib.sha256(journal.read_bytes()).hexdigest()
        rec = Recorder(broker, f"tablesense/{config.table}/#", f"rec-{tmp_path.name}")
        await rec.start()
        daemon = Daemon(tmp_path / "table.toml", tmp_path / "daemon.log")
        daemon.start()
        await rec.wait_for(lambda r: r.on("alarms") and any(
            m.body.get("state") == "refusing" for m in r.on("status")), timeout=30)
        assert daemon.proc is not None and daemon.proc.poll() is None  # still running, not exit 2
        shoe.send(1, "QH")  # a card frame: nothing reads it, nothing acknowledges it
        (alarm_msg,) = rec.on("alarms")
        alarm = decode_message(_json(alarm_msg.body))
        assert isinstance(alarm, AlarmMessage)
        assert (alarm.code, alarm.severity, alarm.state) == ("JOURNAL_DAMAGED", "critical", "raised")
        assert alarm.held
        assert alarm.table == config.table and "settling refused" in alarm.text and alarm.msg_id
        status = decode_message(_json(rec.on("status")[-1].body))
        assert isinstance(status, TableStatus) and status.state == "refusing"
        assert status.detail.startswith("journal damaged: settling refused:")
        assert await daemon.terminate(timeout=5) == 0
    finally:
        if daemon is not None:
            daemon.kill()
        if rec is not None:
            await rec.stop()
    try:
        topics = {m.topic.rsplit("/", 1)[-1] for m in rec.messages}
        assert topics <= {"alarms", "status"}, topics  # no round, results, settlements, device states
        assert shoe.poll() == []  # no AK: no device input was applied
        assert hashlib.sha256(journal.read_bytes()).hexdigest() == before  # the evidence is untouched
        log = daemon.log.read_text()
        assert log.count('"event":"journal_damaged_settling_refused"') == 1 and "Traceback" not in log
        retained = Recorder(broker, f"tablesense/{config.table}/status", f"ret-{tmp_path.name}")
        await retained.start()
        await retained.wait_for(lambda r: bool(r.messages), timeout=10)
        await retained.stop()
        assert retained.messages[-1].retain and retained.messages[-1].body["state"] == "offline"
    finally:
        shoe.close()
        broker.stop()
