"""`tablesense run` as a service: SIGTERM (also during a reconnect backoff), crash recovery after
SIGKILL mid-round, a device sequence gap while down, refusing a readable credentials file, and the
broker restarting under a running daemon. Real Mosquitto, real ptys, the daemon as a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import aiomqtt
import pytest
from e2e_support import TABLESENSE, Daemon, Recorder, retained_body, start_table
from test_e2e_games import check_settlements

from tablesense.daemon.broker import MosquittoBroker, free_port, mosquitto_binary
from tablesense.simulators.dealer import DealtRound, SimTable, sim_config_toml

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(300)]


@pytest.fixture
def broker(tmp_path: Path) -> MosquittoBroker:
    b = MosquittoBroker(tmp_path / "broker")
    b.start()
    yield b
    b.stop()


async def retained_status(broker: MosquittoBroker, table: str) -> dict[str, object]:
    return await retained_body(broker, f"tablesense/{table}/status")


async def acked_again(sim: SimTable, before: int, timeout: float = 30) -> None:
    """Wait until a (restarted) daemon acknowledges shoe frames again."""
    async with asyncio.timeout(timeout):
        while len(sim.shoe.acked) <= before:
            await asyncio.sleep(0.01)


async def partial_round(sim: SimTable, bets: dict[str, int], positions: list[str]) -> DealtRound:
    rnd = DealtRound(len(sim.rounds) + 1, bets)
    await sim.pads_frames(sim.pads.open_round(bets))
    await sim.pads_frames(sim.pads.no_more_bets())
    for pos in positions:
        await sim._card(rnd, pos)
    return rnd


async def test_sigterm_exits_0_and_leaves_offline_retained(broker: MosquittoBroker, tmp_path: Path) -> None:
    config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=3)
    try:
        await sim.play_round()
        await rec.wait_for(lambda r: len(r.on("results")) == 1)
        assert daemon.proc is not None
        daemon.proc.terminate()
        assert await asyncio.to_thread(daemon.proc.wait, 5) == 0  # SIGTERM: clean exit within 5 s
    finally:
        daemon.kill()
        await rec.stop()
        await sim.close()
    assert (await retained_status(broker, config.table))["state"] == "offline"
    log = daemon.log.read_text()
    assert '"event":"daemon_stopped"' in log and '"event":"mqtt_offline_published"' in log
    # start-up froze its heap (run.freeze_startup_heap) before serving: full collections while dealing
    # no longer traverse it (docs/performance.md)
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    names = [e.get("event") for e in events]
    assert "startup_heap_frozen" in names and "daemon_ready" in names
    assert names.index("startup_heap_frozen") < names.index("daemon_ready")
    frozen = events[names.index("startup_heap_frozen")]
    assert frozen["objects"] > 10_000  # modules, config, the replayed machine: tens of thousands
    assert 0 <= frozen["collect_ms"] < 5_000


async def test_sigterm_during_reconnect_backoff(tmp_path: Path) -> None:
    dead = MosquittoBroker(tmp_path / "never-started")  # its port is free: every connect is refused
    dev = tmp_path / "dev"
    text = sim_config_toml("baccarat", urls={"shoe": str(dev / "shoe"), "pads": str(dev / "pads")},
                           host=dead.host, port=dead.port, journal=tmp_path / "journal")
    (tmp_path / "t.toml").write_text(text)
    from tablesense.daemon.config import parse_config
    sim = SimTable(parse_config(text), dev, seed=1)
    await sim.start()
    daemon = Daemon(tmp_path / "t.toml", tmp_path / "d.log")
    daemon.start()
    try:
        await sim.wait_host(30)  # startup did not wait for the broker
        await sim.play_round()  # rounds are settled and journaled with no broker at all
        await asyncio.sleep(1.0)  # the relay is backing off by now
        assert daemon.proc is not None and daemon.proc.poll() is None
        daemon.proc.terminate()
        assert await asyncio.to_thread(daemon.proc.wait, 5) == 0
    finally:
        daemon.kill()
        await sim.close()
    assert '"event":"daemon_stopped"' in daemon.log.read_text()


def test_credentials_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    creds = tmp_path / "creds"
    creds.write_text('username = "t"\npassword = "p"\n')
    os.chmod(creds, 0o644)
    text = sim_config_toml("baccarat", urls={"shoe": str(tmp_path / "s"), "pads": str(tmp_path / "p")},
                           host="127.0.0.1", port=free_port(), journal=tmp_path / "j")
    text = text.replace("[mqtt]\n", f'[mqtt]\ncredentials_file = "{creds}"\n')
    (tmp_path / "t.toml").write_text(text)
    proc = subprocess.run([TABLESENSE, "run", "--config", str(tmp_path / "t.toml")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "accessible by other users" in lines[0] and "0644" in lines[0]
    assert not (tmp_path / "j").exists()  # refused before anything was started


async def test_sigkill_mid_round_then_restart_carries_on(broker: MosquittoBroker, tmp_path: Path) -> None:
    config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=21)
    bets = {"1P": 1000, "2B": 2000, "1PP": 500, "2BP": 500, "1HM": 500}
    try:
        for _ in range(3):
            await sim.play_round(bets)
        rnd = await partial_round(sim, bets, ["player", "banker", "player"])
        await rec.wait_for(lambda r: len(r.on("results")) == 3)
        daemon.kill()  # SIGKILL: no offline published, the will tells the broker
        acks = len(sim.shoe.acked)
        daemon = Daemon(daemon.config, tmp_path / "daemon2.log")
        daemon.start()
        await acked_again(sim, acks)
        from tablesense.daemon.rules.baccarat import next_card_hand
        while (hand := next_card_hand([c for _, c in rnd.cards])) is not None:
            await sim._card(rnd, hand.value)
        await sim.pads_frames(sim.pads.clear())
        sim.rounds.append(rnd)
        await sim.play_round(bets)
        await rec.wait_for(lambda r: len(r.on("results")) == 5)
        assert await daemon.terminate() == 0
    finally:
        daemon.kill()
        await rec.stop()
        await sim.close()
    assert check_settlements(config, sim, rec) == 5 * len(bets)
    assert not rec.on("alarms")
    seqs = [m.body["seq"] for m in rec.on("settlements") + rec.on("results") + rec.on("round")]
    assert len(seqs) == len(set(seqs))  # the restart re-used no seq for a different msg_id
    statuses = [m.body["state"] for m in rec.on("status")]
    assert statuses.count("offline") >= 2  # the will after SIGKILL, then the clean stop


async def test_cards_missed_while_down_hold_the_round(broker: MosquittoBroker, tmp_path: Path) -> None:
    _config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=4)
    try:
        await sim.play_round({"1P": 1000})
        rnd = await partial_round(sim, {"1P": 1000, "1PP": 500}, ["player", "banker"])
        daemon.kill()
        lost = sim.shoe.draw()  # dealt while tablesense was down, and never seen by it
        assert lost
        acks = len(sim.shoe.acked)
        daemon = Daemon(daemon.config, tmp_path / "daemon2.log")
        daemon.start()
        await acked_again(sim, acks)
        await sim._card(rnd, "banker")
        await rec.wait_for(lambda r: any(a.body["code"] == "SEQUENCE_GAP" for a in r.on("alarms")))
        await rec.wait_for(lambda r: r.on("round")[-1].body["held"])
        assert await daemon.terminate() == 0
    finally:
        daemon.kill()
        await rec.stop()
        await sim.close()
    gap = next(a.body for a in rec.on("alarms") if a.body["code"] == "SEQUENCE_GAP")
    assert gap["held"] and gap["round"] == 2
    assert len(rec.on("results")) == 1  # the held round settled nothing
    assert not [s for s in rec.on("settlements") if s.body["round"] == 2]


async def test_broker_restart_under_running_daemon(broker: MosquittoBroker, tmp_path: Path) -> None:
    config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=9)
    try:
        for _ in range(2):
            await sim.play_round()
        await rec.wait_for(lambda r: len(r.on("results")) == 2)
        async with aiomqtt.Client(broker.host, broker.port) as c:  # the broker "forgets" retained state
            for dev in ("shoe", "pads"):
                await c.publish(f"tablesense/{config.table}/devices/{dev}", b"", qos=1, retain=True)
        broker.stop()
        for _ in range(3):  # settled and journaled while the broker is down
            await sim.play_round()
        broker.start()
        await rec.wait_for(lambda r: len(r.on("results")) == 5, timeout=60)
        fresh = Recorder(broker, f"tablesense/{config.table}/#", f"late-{tmp_path.name}")
        await fresh.start()
        await fresh.wait_for(lambda r: {m.topic.split("/", 2)[2] for m in r.messages if m.retain}
                             >= {"status", "round", "devices/shoe", "devices/pads"})
        await fresh.stop()
        assert await daemon.terminate() == 0
    finally:
        daemon.kill()
        await rec.stop()
        await sim.close()
    check_settlements(config, sim, rec)
    got = {m.topic.split("/", 2)[2]: m.body for m in fresh.messages if m.retain}
    # the dealer's round-end after round 5 opened round 6 for betting
    assert got["status"]["state"] == "online"
    assert (got["round"]["round"], got["round"]["phase"]) == (6, "betting")
    assert got["devices/shoe"]["state"] == "online"  # republished by the relay after the reconnect
    ids = [m.body["msg_id"] for m in rec.messages if m.body.get("msg_id")]
    seqs = sorted({m.body["seq"] for m in rec.messages if m.body.get("msg_id")})
    assert seqs == list(range(seqs[0], seqs[-1] + 1))  # no seq missing after de-duplication
    print(f"duplicates delivered across the broker restart: {len(ids) - len(set(ids))}")


async def test_systemd_notify_ready_watchdog_stopping(broker: MosquittoBroker, tmp_path: Path) -> None:
    import socket

    dev = tmp_path / "dev"
    text = sim_config_toml("baccarat", urls={"shoe": str(dev / "shoe"), "pads": str(dev / "pads")},
                           host=broker.host, port=broker.port, journal=tmp_path / "journal")
    (tmp_path / "t.toml").write_text(text)
    sock_path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(sock_path)
        server.setblocking(False)
        env = dict(os.environ, NOTIFY_SOCKET=sock_path, WATCHDOG_USEC="400000")
        env.pop("WATCHDOG_PID", None)
        proc = subprocess.Popen([TABLESENSE, "run", "--config", str(tmp_path / "t.toml")], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        got: list[str] = []
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(30):
                while got.count("WATCHDOG=1") < 2:
                    got.append((await loop.sock_recv(server, 256)).decode())
            proc.terminate()
            assert await asyncio.to_thread(proc.wait, 5) == 0
            async with asyncio.timeout(5):
                while "STOPPING=1" not in got:
                    got.append((await loop.sock_recv(server, 256)).decode())
        finally:
            if proc.poll() is None:
                proc.kill()
    assert got[0].startswith("READY=1")  # before the devices, which do not exist here
    assert got.index("STOPPING=1") > got.index("WATCHDOG=1")
