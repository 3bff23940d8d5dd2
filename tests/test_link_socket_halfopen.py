"""A ``socket://`` device whose TCP flow is left half-open is reopened (docs/devices.md, docs/configuration.md
``[devices.<name>] stale_reconnect``).

The end-to-end test puts the shoe (a serial device server: :class:`TcpExposure`) behind a loopback proxy.
After the first card the proxy black-holes the daemon's flow: no FIN, no RST, bytes read and dropped (a
stateful firewall, NAT or bridge restarted), while new connections pass. The daemon must reopen the link
by itself and take the card the shoe resends, with the default ``stale_reconnect`` of ``socket://``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from e2e_support import TABLESENSE, Recorder
from link_support import running_link, wait_until

from tablesense.daemon.broker import MosquittoBroker
from tablesense.daemon.config import SOCKET_STALE_RECONNECT, ConfigError, parse_config
from tablesense.daemon.rules.cards import Card
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    DealerButton,
    DeviceIdentity,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)
from tablesense.drivers.protocols.tsref import Ack, HostDecoder, encode
from tablesense.simulators.dealer import sim_config_toml
from tablesense.simulators.exposure import PtyExposure, TcpExposure

pytestmark = pytest.mark.timeout(120)


def _config(url: str, extra: str = "") -> str:
    text = sim_config_toml("baccarat", urls={"shoe": url, "pads": "/dev/ttyUSB1"}, host="127.0.0.1",
                           port=1883, journal="/tmp/never-opened", table="halfopen")
    return text.replace("[devices.shoe]\n", f"[devices.shoe]\n{extra}", 1)


# ------------------------------------------------------------------------------------------- config


def test_socket_devices_are_reopened_by_default_others_never() -> None:
    cfg = parse_config(_config("socket://127.0.0.1:4001"))
    assert cfg.devices["shoe"].reopen_stale_after() == SOCKET_STALE_RECONNECT > 0
    assert cfg.devices["pads"].reopen_stale_after() is None  # a serial path errors on unplug
    rfc2217 = parse_config(_config("rfc2217://127.0.0.1:4001"))  # TCP as well: half-open never errors
    assert rfc2217.devices["shoe"].reopen_stale_after() == SOCKET_STALE_RECONNECT


def test_stale_reconnect_key_sets_or_disables_the_reopen() -> None:
    assert parse_config(_config("socket://127.0.0.1:4001", "stale_reconnect = 0\n")) \
        .devices["shoe"].reopen_stale_after() is None
    assert parse_config(_config("/dev/ttyUSB0", "stale_reconnect = 12.5\n")) \
        .devices["shoe"].reopen_stale_after() == 12.5


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "3601", '"soon"'])
def test_bad_stale_reconnect_is_one_clear_line(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_config("socket://127.0.0.1:4001", f"stale_reconnect = {value}\n"))
    text = str(info.value)
    assert "\n" not in text and text.startswith("devices.shoe.stale_reconnect: ")


# ---------------------------------------------------------------------------------------- keepalive


async def test_socket_transport_turns_on_tcp_keepalive() -> None:
    """A peer that vanishes without FIN or RST is found by the kernel (keepalive, user timeout)."""
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with running_link(f"socket://127.0.0.1:{port}") as rec:
            await wait_until(lambda: rec.link.state is LinkState.ONLINE, "the link online")
            transport = rec.link._transport
            assert transport is not None
            sock = transport._transport.get_extra_info("socket")  # type: ignore[attr-defined]
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            if hasattr(socket, "TCP_KEEPIDLE"):
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) <= 60
            if hasattr(socket, "TCP_USER_TIMEOUT"):
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) > 0
    finally:
        server.close()


# ------------------------------------------------------------------------------------- end to end


class BlackHoleProxy:
    """Loopback TCP proxy in front of ``target_port``. :meth:`black_hole`: every flow open now goes
    silent for the client (its bytes are read and dropped, nothing is sent to it, its socket stays open:
    no FIN, no RST) and its device-server side is closed (the server rebooted); later flows pass."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.port = 0
        self.accepted = 0
        self._silenced = 0
        self._flows: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        flow = self.accepted
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self._flows.append((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(4096):
                    if flow > self._silenced:
                        dst.write(data)

        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer), return_exceptions=True)

    def black_hole(self) -> None:
        self._silenced = self.accepted
        for _client, upstream in self._flows:
            upstream.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for client, upstream in self._flows:
            client.close()
            upstream.close()


class RawDevice:
    """A tsref device whose frames the test writes; records the host's acknowledgements."""

    def __init__(self, name: str, exposure: TcpExposure | PtyExposure) -> None:
        self.name, self.exposure = name, exposure
        self.seq = 0
        self.acks: list[int] = []
        self._decoder = HostDecoder()
        self._task: asyncio.Task[None] | None = None
        self.host_seen = asyncio.Event()

    async def start(self) -> None:
        await self.exposure.start()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            data = await self.exposure.from_host.get()
            self.host_seen.set()
            self.acks += [m.seq for m in self._decoder.feed(data) if isinstance(m, Ack)]

    def frame(self, make: Any) -> tuple[int, bytes]:
        """The next frame (``make(device, seq)`` builds its event) and its sequence number."""
        seq, self.seq = self.seq, self.seq + 1
        return seq, encode(make(self.name, seq))

    async def send(self, make: Any) -> int:
        seq, data = self.frame(make)
        await self.exposure.write(data)
        return seq

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.exposure.close()


@contextlib.asynccontextmanager
async def _world(tmp: Path) -> AsyncIterator[tuple[RawDevice, RawDevice, TcpExposure, BlackHoleProxy,
                                                    Recorder, Path]]:
    broker = MosquittoBroker(tmp / "broker", persistence=False)
    broker.start()
    shoe_server = TcpExposure()
    shoe, pads = RawDevice("shoe", shoe_server), RawDevice("pads", PtyExposure("pads", tmp / "dev"))
    (tmp / "dev").mkdir()
    proc: subprocess.Popen[bytes] | None = None
    proxy: BlackHoleProxy | None = None
    rec: Recorder | None = None
    log = tmp / "daemon.log"
    try:
        await shoe.start()
        await pads.start()
        proxy = BlackHoleProxy(shoe_server.port)
        await proxy.start()
        text = sim_config_toml("baccarat", urls={"shoe": f"socket://127.0.0.1:{proxy.port}",
                                                 "pads": str(tmp / "dev" / "pads")},
                               host=broker.host, port=broker.port, journal=tmp / "journal", table="halfopen")
        assert "stale_reconnect" not in text  # the default for socket:// is what is tested
        (tmp / "table.toml").write_text(text)
        rec = Recorder(broker, "tablesense/halfopen/#", f"rec-{tmp.name}")
        await rec.start()
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        with open(log, "ab") as out:
            proc = subprocess.Popen([TABLESENSE, "run", "--config", str(tmp / "table.toml")], stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        async with asyncio.timeout(30):
            await shoe.host_seen.wait()
            await pads.host_seen.wait()
        yield shoe, pads, shoe_server, proxy, rec, log
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if rec is not None:
            await rec.stop()
        if proxy is not None:
            await proxy.close()
        await shoe.stop()
        await pads.stop()
        broker.stop()


def _round_cards(rec: Recorder) -> list[str]:
    rounds = rec.on("round")
    return [c["card"] for c in rounds[-1].body["cards"]] if rounds else []


async def test_half_open_shoe_link_is_reopened_and_the_next_card_taken(tmp_path: Path) -> None:
    async with _world(tmp_path) as (shoe, pads, shoe_server, proxy, rec, log):
        await shoe.send(lambda d, s: DeviceIdentity(d, s, "acme", "CS-8", "1", "SN1", "boot1"))
        await pads.send(lambda d, s: DeviceIdentity(d, s, "acme", "BP-1", "1", "SN2", "boot2"))
        await shoe.send(lambda d, s: ShoeStatus(d, s, ShoeStatusKind.NEW_SHOE))
        burn = await shoe.send(lambda d, s: ShoeStatus(d, s, ShoeStatusKind.BURN, Card.parse("5H")))
        await wait_until(lambda: burn in shoe.acks, "the burn acknowledged", 30)
        await pads.send(lambda d, s: SpotChanged(d, s, "1P", SpotState.PLACED, 1000))
        nmb = await pads.send(lambda d, s: DealerButton(d, s, Button.NO_MORE_BETS))
        await wait_until(lambda: nmb in pads.acks, "no more bets acknowledged", 30)
        first = await shoe.send(lambda d, s: CardDrawn(d, s, Card.parse("2H")))
        await wait_until(lambda: first in shoe.acks, "the first card acknowledged", 30)
        assert shoe_server.clients == 1 and proxy.accepted == 1

        proxy.black_hole()  # the daemon's flow goes silent; the device server is reachable anew
        await wait_until(lambda: not shoe_server.connected, "the device server to lose its client", 30)
        second, data = shoe.frame(lambda d, s: CardDrawn(d, s, Card.parse("3D")))
        assert not await shoe_server.write(data)  # dealt while nobody is connected: the shoe keeps it

        # Without a reopen the daemon waits on the silent flow forever; the bound leaves room for the
        # default (stale after 5 s, reopened SOCKET_STALE_RECONNECT s later) on a loaded machine.
        await wait_until(lambda: shoe_server.clients >= 2, "the daemon to reopen the shoe link",
                         5.0 + SOCKET_STALE_RECONNECT + 45)
        assert proxy.accepted >= 2
        await wait_until(lambda: shoe_server.connected, "the new connection", 30)
        assert await shoe_server.write(data)  # the shoe resends its unacknowledged card
        await wait_until(lambda: second in shoe.acks, "the resent card acknowledged", 30)
        await wait_until(lambda: _round_cards(rec) == ["2H", "3D"], "the round to hold both cards", 30)

        states = [(r.body["state"], r.body["detail"]) for r in rec.on("devices/shoe")]
        assert "stale" in [s for s, _ in states]
        assert states[-1][0] == "online"
    text = log.read_text()
    assert '"link.lost"' in text and "stale" in text
