"""``rfc2217://`` links (serial device servers speaking RFC 2217, e.g. ser2net) through pyserial's client.

The device server is pyserial's own ``PortManager`` (the engine of its rfc2217_server example) bridging a
TCP socket to the simulator's pty, so both the RFC 2217 negotiation and the real pty path run.
"""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest
import serial
import serial.rfc2217
import structlog
from link_support import expected_cards, running, running_link, wait_until
from structlog.testing import capture_logs

from tablesense.drivers.events import DeviceIdentity, LinkState
from tablesense.simulators.exposure import PtyExposure
from tablesense.simulators.runner import SimulatorRunner, shoe_program
from tablesense.simulators.shoe import VirtualShoe

pytestmark = [pytest.mark.timeout(60),
              # pyserial 3.5's RFC 2217 client still calls Thread.setDaemon/setName
              pytest.mark.filterwarnings("ignore:set(Daemon|Name).. is deprecated:DeprecationWarning")]


@pytest.fixture(autouse=True)
def _plain_structlog() -> None:
    structlog.reset_defaults()


class PtySerial(serial.Serial):  # type: ignore[misc]
    """pyserial port on a pty: ptys have no modem lines (TIOCMGET/TIOCMBIS fail with
    ENOTTY), so report them idle instead of failing the RFC 2217 server."""

    @property
    def cts(self) -> bool:
        return False

    @property
    def dsr(self) -> bool:
        return False

    @property
    def ri(self) -> bool:
        return False

    @property
    def cd(self) -> bool:
        return False

    def _update_rts_state(self) -> None:
        pass

    def _update_dtr_state(self) -> None:
        pass


class DeviceServer:
    """A one-connection RFC 2217 server in threads: TCP client <-> pyserial port on ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.alive = True
        self.conn: socket.socket | None = None
        self.baud_seen: list[int] = []
        self.error: BaseException | None = None
        self._threads = [threading.Thread(target=self._serve, daemon=True)]
        self._threads[0].start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        self.conn = conn
        port = PtySerial(self.path, timeout=0.05)
        lock = threading.Lock()

        class Writer:
            def write(self, data: bytes) -> None:
                with lock, contextlib.suppress(OSError):
                    conn.sendall(data)

        manager = serial.rfc2217.PortManager(port, Writer())

        def to_client() -> None:
            while self.alive:
                try:
                    data = port.read(port.in_waiting or 1)
                except (serial.SerialException, OSError, TypeError):
                    return
                if data:
                    Writer().write(b"".join(manager.escape(data)))

        pump = threading.Thread(target=to_client, daemon=True)
        pump.start()
        try:
            while self.alive:
                data = conn.recv(1024)
                if not data:
                    break
                port.write(b"".join(manager.filter(data)))
                self.baud_seen.append(port.baudrate)
        except OSError as exc:
            self.error = exc
        finally:
            self.alive = False
            pump.join(1)
            port.close()
            with contextlib.suppress(OSError):
                conn.close()

    def close(self) -> None:
        self.alive = False
        self.listener.close()
        if self.conn is not None:
            with contextlib.suppress(OSError):
                self.conn.shutdown(socket.SHUT_RDWR)
        self._threads[0].join(2)


async def test_round_over_rfc2217_and_loss_of_the_server(tmp_path: object) -> None:
    shoe = VirtualShoe(decks=8, seed=51)
    exposure = PtyExposure(directory=str(tmp_path))
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=2, loop_shoes=False), pace=0.005,
                             start_on_host=True, heartbeat=None)
    with capture_logs() as logs:
        async with running(runner.run()):
            await wait_until(lambda: exposure.plugged, "pty")
            server = DeviceServer(exposure.address)
            try:
                url = f"rfc2217://127.0.0.1:{server.port}"
                async with running_link(url, baud=19200) as rec:
                    await wait_until(lambda: runner.finished.is_set(), "two rounds")
                    await wait_until(lambda: len(rec.cards) >= len(expected_cards(shoe.history)),
                                     "every card")
                    assert rec.link.state is LinkState.ONLINE
                    assert rec.states[1].detail == f"rfc2217 127.0.0.1:{server.port} @ 19200"
                    server.close()  # the device server goes away
                    await wait_until(lambda: rec.link.open_failures >= 1, "reconnect attempts")
                    assert rec.link.state is LinkState.DISCONNECTED
            finally:
                server.close()
    assert [(c.seq, c.card) for c in rec.cards] == [(c.seq, c.card) for c in expected_cards(shoe.history)]
    assert rec.of(DeviceIdentity)  # the status request went through the server to the device
    assert 19200 in server.baud_seen  # the baud rate was set on the far port over RFC 2217
    assert len([e for e in logs if e["event"] == "link.lost"]) == 1
