"""`tablesense signage` and `tablesense monitor` against the production broker (TLS + credentials + ACL).

The broker is tests/test_broker_acl.py's: Mosquitto running the shipped deploy/mosquitto/tablesense-tls.conf
and acl (only ports and file paths replaced), certificates made by openssl, the password file by
mosquitto_passwd. Both commands run as the real console script in a subprocess and verify the broker
against the test CA. The table's messages are published by a ``table-bac-01`` client (the role the
daemon has). "Signage never gets floor/ or alarms" is read from the broker's own log without timing:
Mosquitto logs every PUBLISH it sends to a client in order, so once the later ``results`` message is
logged as sent to the signage client, an earlier ``floor/rounds`` or ``alarms`` message sent to it would
be logged before it.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from test_broker_acl import (  # noqa: F401  (broker: the module-scoped fixture, used by name)
    GUARD_S,
    T1,
    USERS,
    Broker,
    _make_cert,
    broker,
    client,
    connected,
    logged,
    pub,
    pytestmark,
)
from test_signage_server import state_until

from tablesense.daemon.messages import (
    AlarmMessage,
    BaccaratOutcome,
    FloorRound,
    RoundResults,
    RoundState,
    SettlementMessage,
    TableStatus,
    encode_message,
)

EXE = str(Path(sys.executable).with_name("tablesense"))
BASE = f"tablesense/{T1}"
TS = "2026-11-29T12:00:00Z"
SECRET = "HOLE-CARD-KD"
"""Marker in the floor/ record and the alarm text: must never reach signage."""


def credentials(tmp: Path, user: str, mode: int = 0o600) -> str:
    """A credentials file for ``user`` (TOML, as the daemon's) with ``mode``."""
    path = tmp / f"{user}.credentials"
    path.write_text(f'username = "{user}"\npassword = "{USERS[user]}"\n')
    path.chmod(mode)
    return str(path)


def coup(round_no: int) -> RoundResults:
    """A baccarat coup: Player 9 (natural, pair of nines? no: 4+5) beats Banker 7."""
    return RoundResults(table=T1, ts=TS, shoe=1, round=round_no, game="baccarat", baccarat=BaccaratOutcome(
        player=("4H", "5S"), banker=("3D", "4C"), player_total=9, banker_total=7, winner="player",
        player_natural=True, banker_natural=False, player_pair=False, banker_pair=False))


async def publish_as_table(b: Broker, *messages: tuple[str, bytes, bool]) -> None:
    """Publish ``(suffix, payload, retain)`` under the table as user ``table-bac-01`` (every publish acked,
    so none is refused by the ACL)."""
    async with connected(client(b, f"table-{T1}")) as table:
        for suffix, payload, retain in messages:
            await table.publish_acked(f"{BASE}/{suffix}", payload, 1, retain, None, timeout=5)


def status_online() -> tuple[str, bytes, bool]:
    return "status", encode_message(TableStatus(table=T1, ts=TS, state="online")), True


@pytest.fixture
def signage_cert(broker: Broker) -> Iterator[tuple[str, str]]:  # noqa: F811
    """A client certificate with CN ``signage-bac-01`` from the test CA."""
    name = "client-signage"
    if not (broker.dir / f"{name}.pem").exists():
        _make_cert(broker.dir, "ca", name, f"signage-{T1}", "extendedKeyUsage=clientAuth\n")
    yield str(broker.dir / f"{name}.pem"), str(broker.dir / f"{name}.key")


class Signage:
    """``tablesense signage`` running in a subprocess; ``url`` of its page."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([EXE, "signage", "--table", T1, "--listen", "127.0.0.1:0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"signage exited: {self.proc.wait()} {self.proc.communicate()[1]}")
        assert line.startswith(f"tablesense signage: table {T1} on http://127.0.0.1:"), line
        self.url = line.rsplit(" ", 1)[1].strip()

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


def client_id_of(b: Broker, user: str, seen: set[str]) -> str | None:
    """The client id of the newest connection of ``user`` in the broker log. The shipped broker makes the
    user name the client id (``use_username_as_clientid``), so ids repeat across connections and ``seen``
    (the ids before the test) no longer tells connections apart: :func:`sent_to` reads from the newest."""
    log = b.log.read_text(errors="replace")
    ids = re.findall(rf"New client connected from \S+ as (\S+) \([^)]*u'{re.escape(user)}'\)", log)
    return ids[-1] if ids else None


def sent_to(b: Broker, cid: str) -> list[str]:
    """Topics of every PUBLISH the broker logged as sent to client ``cid``'s newest connection, in order."""
    log = b.log.read_text(errors="replace")
    log = log[log.rfind(f" as {cid} ("):]
    return re.findall(rf"Sending PUBLISH to {re.escape(cid)} \([^']*'([^']*)'", log)


async def follow_table(b: Broker, url: str, round_no: int) -> dict[str, Any]:
    """Publish floor/rounds and an alarm (both carrying :data:`SECRET`), then the round state and the
    results of ``round_no``; return the page state once it shows the results."""
    async with aiohttp.ClientSession() as http:
        await state_until(http, url, lambda s: s["broker"] == "connected" and s["table_status"] == "online")
        await publish_as_table(
            b,
            ("floor/rounds", encode_message(FloorRound(table=T1, ts=TS, shoe=1, round=round_no,
                                                       game="baccarat", dealer=(SECRET,))), False),
            ("alarms", encode_message(AlarmMessage(table=T1, ts=TS, shoe=1, round=round_no, alarm_id="1.1",
                                                   code="PAST_POSTING", severity="critical",
                                                   text=f"seat 3 {SECRET}")), False),
            ("round", encode_message(RoundState(table=T1, ts=TS, shoe=1, round=round_no, game="baccarat",
                                                phase="complete")), True),
            ("results", encode_message(coup(round_no)), False),
        )
        return await state_until(http, url, lambda s: (s["results"] or {}).get("round") == round_no)


async def no_floor_or_alarms_sent(b: Broker, user: str, seen: set[str]) -> list[str]:
    """The topics sent to ``user``'s newest connection up to its ``results``; asserts none is floor/ or
    alarms (Mosquitto logs sends in order, so waiting for the later ``results`` send is enough)."""
    cid = client_id_of(b, user, seen)
    assert cid is not None, f"no connection of {user} in the broker log"
    async with asyncio.timeout(GUARD_S):  # hang guard only: the log is written after the send
        while f"{BASE}/results" not in sent_to(b, cid):
            await asyncio.sleep(0.02)
    topics = sent_to(b, cid)
    assert not [t for t in topics if "/floor/" in t or t.endswith("/alarms")], topics
    return topics


async def test_signage_over_tls_as_its_user_reads_public_topics_only(broker: Broker, tmp_path: Path) -> None:  # noqa: F811
    """`tablesense signage --ca-file --credentials-file` logs in as signage-bac-01 over verified TLS: the
    page shows the table's status, round and results; floor/rounds and alarms never reach it."""
    await publish_as_table(broker, status_online())
    seen = set(re.findall(r"as (\S+) \(", broker.log.read_text(errors="replace")))
    sig = Signage("--broker", f"127.0.0.1:{broker.port}", "--ca-file", broker.ca,
                  "--credentials-file", credentials(tmp_path, f"signage-{T1}"))
    try:
        state = await follow_table(broker, sig.url, 7)
        assert state["table_status"] == "online" and state["phase"] == "complete" and state["round"] == 7
        assert state["results"]["baccarat"]["winner"] == "player"
        assert SECRET not in json.dumps(state)
        topics = await no_floor_or_alarms_sent(broker, f"signage-{T1}", seen)
        assert {f"{BASE}/status", f"{BASE}/round", f"{BASE}/results"} <= set(topics)
    finally:
        code, err = sig.stop()
    assert code == 0, err
    assert "signage_broker_unreachable" not in err


async def test_signage_with_a_client_certificate(broker: Broker, signage_cert: tuple[str, str]) -> None:  # noqa: F811
    """On the certificate listener the CN signage-bac-01 is the user name: no credentials file needed."""
    await publish_as_table(broker, status_online())
    seen = set(re.findall(r"as (\S+) \(", broker.log.read_text(errors="replace")))
    cert, key = signage_cert
    sig = Signage("--broker", f"127.0.0.1:{broker.cert_port}", "--ca-file", broker.ca,
                  "--cert-file", cert, "--key-file", key)
    try:
        state = await follow_table(broker, sig.url, 8)
        assert state["round"] == 8 and SECRET not in json.dumps(state)
        await no_floor_or_alarms_sent(broker, f"signage-{T1}", seen)
    finally:
        code, err = sig.stop()
    assert code == 0, err


@pytest.mark.parametrize("user", ["surveillance", "floor-1"])
async def test_monitor_over_tls_prints_a_round(broker: Broker, tmp_path: Path, user: str) -> None:  # noqa: F811
    """`tablesense monitor --no-ui --ca-file --credentials-file` as surveillance/floor prints the table's
    status, the round, its settlement and the alarm, and the summary on Ctrl-C (SIGINT)."""
    await publish_as_table(broker, status_online())
    proc = subprocess.Popen([EXE, "monitor", "--no-ui", "--broker", f"127.0.0.1:{broker.port}", "--table", T1,
                             "--ca-file", broker.ca, "--credentials-file", credentials(tmp_path, user)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    loop = asyncio.get_running_loop()
    lines: list[str] = []

    async def read_until(prefix: str) -> str:
        assert proc.stdout is not None
        async with asyncio.timeout(GUARD_S):  # hang guard only
            while True:
                line = await loop.run_in_executor(None, proc.stdout.readline)
                if not line:
                    raise AssertionError(f"monitor ended: {lines} {proc.wait()} {proc.stderr.read()}")
                lines.append(line.rstrip("\n"))
                if line.startswith(prefix):
                    return line.rstrip("\n")

    try:
        assert await read_until(f"[{T1}] status") == f"[{T1}] status online"  # retained: it is subscribed
        settle = SettlementMessage(table=T1, ts=TS, shoe=1, round=9, spot="1P", seat="1", bet="player",
                                   hand="player", stake=2500, outcome="win", category="natural_win",
                                   odds="1 to 1", net=2500)
        await publish_as_table(
            broker,
            ("round", encode_message(RoundState(table=T1, ts=TS, shoe=1, round=9, game="baccarat",
                                                phase="complete")), True),
            ("results", encode_message(coup(9)), False),
            ("settlements", encode_message(settle), False),
            ("alarms", encode_message(AlarmMessage(table=T1, ts=TS, shoe=1, round=9, alarm_id="1.2",
                                                   code="SHOE_LOW", severity="info", text="shoe low")),
             False),
        )
        assert await read_until(f"[{T1}] round") == f"[{T1}] round 1/9 P 4H 5S =9 B 3D 4C =7 -> player"
        assert await read_until(f"[{T1}] settle") == (
            f"[{T1}] settle r9 seat 1 player stake 25.00 win natural_win at 1 to 1 net +25.00")
        assert await read_until(f"[{T1}] ALARM") == f"[{T1}] ALARM #1.2 SHOE_LOW info: shoe low"
        proc.send_signal(signal.SIGINT)
        out, err = await loop.run_in_executor(None, proc.communicate)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert f"table {T1} (baccarat): 1 rounds settled, 0 void, 1 settlements" in out, out


# ------------------------------------------------------------------------------------ one-line errors

def one_line_error(cmd: str, *args: str) -> str:
    """Run ``tablesense cmd args``; assert exit 2 and exactly one stderr line; return it."""
    extra = ["--table", T1, "--listen", "127.0.0.1:0"] if cmd == "signage" else ["--no-ui", "--table", T1]
    done = subprocess.run([EXE, cmd, *extra, *args], capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    return lines[0]


@pytest.mark.parametrize("cmd", ["signage", "monitor"])
def test_file_errors_are_one_line(broker: Broker, tmp_path: Path, cmd: str) -> None:  # noqa: F811
    """World-readable or missing credentials file, missing CA, missing key, key without certificate."""
    where = ["--broker", f"127.0.0.1:{broker.port}", "--ca-file", broker.ca]
    open_creds = credentials(tmp_path, "surveillance", 0o644)
    line = one_line_error(cmd, *where, "--credentials-file", open_creds)
    assert line == (f"tablesense: {cmd}: credentials file {open_creds} is accessible by other users "
                    f"(mode 0644); run: chmod o-rwx {open_creds}")
    missing = str(tmp_path / "nope.credentials")
    assert missing in one_line_error(cmd, *where, "--credentials-file", missing)
    no_ca = str(tmp_path / "no-ca.pem")
    line = one_line_error(cmd, "--broker", f"127.0.0.1:{broker.port}", "--ca-file", no_ca)
    assert f"TLS CA file {no_ca}" in line
    line = one_line_error(cmd, *where, "--cert-file", str(broker.dir / "client-t1.pem"),
                          "--key-file", str(tmp_path / "no.key"))
    assert f"TLS key file {tmp_path / 'no.key'}" in line
    assert "needs --cert-file" in one_line_error(cmd, *where, "--key-file", str(broker.dir / "client-t1.key"))


def test_monitor_refused_by_the_broker_is_one_line(broker: Broker, tmp_path: Path) -> None:  # noqa: F811
    """A wrong password (CONNACK refused), a broker certificate from another CA, and ``--tls`` with the
    system trust store (no test CA in it): one line each."""
    creds = tmp_path / "wrong.credentials"
    creds.write_text("surveillance\nnot-the-password\n")
    creds.chmod(0o600)
    line = one_line_error("monitor", "--broker", f"127.0.0.1:{broker.port}", "--ca-file", broker.ca,
                          "--credentials-file", str(creds))
    assert line.startswith(f"tablesense: cannot reach the broker at 127.0.0.1:{broker.port}:"), line
    line = one_line_error("monitor", "--broker", f"127.0.0.1:{broker.port}",
                          "--ca-file", str(broker.dir / "rogue-ca.pem"),
                          "--credentials-file", credentials(tmp_path, "surveillance"))
    assert "certificate verify failed" in line, line
    # --tls alone trusts the system store, which does not hold the test CA
    line = one_line_error("monitor", "--broker", f"127.0.0.1:{broker.port}", "--tls",
                          "--credentials-file", credentials(tmp_path, "surveillance"))
    assert "certificate verify failed" in line, line
