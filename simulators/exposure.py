"""How a simulated device reaches tablesense: a pseudo-terminal, a loopback TCP server, or virtual USB.

Every exposure is the *device* side of a link. The simulator writes device bytes with :meth:`write`
and reads host-to-device bytes (status requests, acknowledgements) from :attr:`from_host`; the daemon
opens :attr:`address` exactly as it would open a real device:

* :class:`PtyExposure` -- ``os.openpty()``; the slave is set raw (``tty.setraw``) and the daemon opens it
  with pyserial (gpsfake's approach). A pty's ``/dev/pts/N`` name cannot be recreated
  after an unplug, so the address is a **stable symlink** (``<dir>/shoe -> /dev/pts/N``) that
  :meth:`~PtyExposure.replug` re-points at the new pty -- exactly what udev does with
  ``/dev/serial/by-id/...`` when a real USB-serial shoe is replugged. Unplug closes the master (the
  daemon's next read fails like a real unplug) and removes the symlink ("no such device" on reopen).
* :class:`TcpExposure` -- a one-client TCP server on 127.0.0.1, address ``socket://127.0.0.1:PORT``, like
  a serial device server in raw TCP mode. Unplug closes the connection and stops listening (connection
  refused); replug listens again on the same port.
* :class:`UsbExposure` -- a device on the in-process virtual USB bus of
  :mod:`simulators.usb_backend`, address ``usb://VID:PID?serial=...``; the daemon's real pyusb code runs
  against it (only within the same process).

Bytes written while unplugged, or while no host is connected, are dropped (and counted), as they would
be on a real serial line with nobody listening.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import tty
from pathlib import Path
from typing import Protocol

__all__ = ["Exposure", "PtyExposure", "TcpExposure", "UsbExposure"]


class Exposure(Protocol):
    """The device side of a simulated link (see module docstring)."""

    address: str
    """What to point tablesense at: a path or a URL."""
    from_host: asyncio.Queue[bytes]
    """Host-to-device bytes as received."""
    dropped: int
    """Device bytes dropped because the device was unplugged or nobody was connected."""

    @property
    def plugged(self) -> bool: ...

    async def start(self) -> None: ...

    async def write(self, data: bytes) -> bool: ...

    async def unplug(self) -> None: ...

    async def replug(self) -> None: ...

    async def close(self) -> None: ...


class PtyExposure:
    """A pseudo-terminal behind a stable symlink ``<directory>/<name>`` (see module docstring).

    Args:
        name: symlink file name (e.g. ``"shoe"``).
        directory: where the symlink lives; a fresh ``tablesense-sim-*`` temp dir when ``None``.
    """

    def __init__(self, name: str = "shoe", directory: str | os.PathLike[str] | None = None) -> None:
        self._own_dir = directory is None
        self.directory = Path(directory) if directory is not None else Path(
            tempfile.mkdtemp(prefix="tablesense-sim-"))
        self.link = self.directory / name
        self.address = str(self.link)
        self.from_host: asyncio.Queue[bytes] = asyncio.Queue()
        self.dropped = 0
        self.pty_path: str | None = None
        self._master: int | None = None
        self._slave: int | None = None
        self._write_lock = asyncio.Lock()

    @property
    def plugged(self) -> bool:
        """True while the pty exists and the symlink points at it."""
        return self._master is not None

    async def start(self) -> None:
        """Create the pty and the symlink ("plug the device in")."""
        await self.replug()

    async def replug(self) -> None:
        """Create a new pty and atomically re-point the symlink at it (no-op if already plugged).

        Raises ``FileExistsError`` if the link path holds something other than a symlink (it is never
        overwritten).
        """
        if self._master is not None:
            return
        if self.link.exists() and not self.link.is_symlink():
            raise FileExistsError(f"{self.link} exists and is not a symlink; not replacing it")
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line editing, no CR/LF translation
        os.set_blocking(master, False)
        self._master, self._slave = master, slave
        self.pty_path = os.ttyname(slave)
        tmp = self.link.with_name(self.link.name + ".new")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(self.pty_path)
        tmp.replace(self.link)  # rename(2) is atomic: the daemon never sees a half-made link
        asyncio.get_running_loop().add_reader(master, self._readable)

    def _readable(self) -> None:
        if self._master is None:
            return
        try:
            data = os.read(self._master, 4096)
        except BlockingIOError:
            return
        except OSError:
            return
        if data:
            self.from_host.put_nowait(data)

    async def write(self, data: bytes) -> bool:
        """Write device bytes to the master; False (bytes dropped) if unplugged.

        If the host is not reading and the pty buffer is full, waits up to 50 ms and then drops the
        rest, as a real UART with nobody listening would lose them.
        """
        async with self._write_lock:
            view = memoryview(data)
            waited = 0
            while view:
                if self._master is None:
                    self.dropped += len(view)
                    return False
                try:
                    n = os.write(self._master, view)
                except BlockingIOError:
                    if waited >= 5:
                        self.dropped += len(view)
                        return False
                    waited += 1
                    await asyncio.sleep(0.01)
                    continue
                except OSError:
                    self.dropped += len(view)
                    return False
                view = view[n:]
            return True

    async def unplug(self) -> None:
        """Remove the symlink and close the pty: the daemon's reads fail, reopening finds no device."""
        with contextlib.suppress(FileNotFoundError):
            self.link.unlink()
        if self._master is not None:
            asyncio.get_running_loop().remove_reader(self._master)
            os.close(self._master)
            self._master = None
        if self._slave is not None:
            os.close(self._slave)
            self._slave = None
        self.pty_path = None

    async def close(self) -> None:
        """Unplug and remove the temp directory if this exposure made it."""
        await self.unplug()
        if self._own_dir:
            with contextlib.suppress(OSError):
                self.directory.rmdir()


class TcpExposure:
    """A one-client TCP server on ``host:port`` (``port=0`` picks a free port once, kept across replugs).

    A new client replaces the previous one (a serial device server serves one session at a time).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.address = ""
        self.from_host: asyncio.Queue[bytes] = asyncio.Queue()
        self.dropped = 0
        self.clients = 0
        """Connections accepted so far."""
        self._server: asyncio.Server | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._connected = asyncio.Event()

    @property
    def plugged(self) -> bool:
        """True while listening."""
        return self._server is not None

    @property
    def connected(self) -> bool:
        """True while a host is connected."""
        return self._writer is not None

    async def wait_connected(self) -> None:
        """Wait until a host is connected."""
        await self._connected.wait()

    async def start(self) -> None:
        """Start listening ("plug in")."""
        await self.replug()

    async def replug(self) -> None:
        """Listen again on the same port (no-op if listening)."""
        if self._server is not None:
            return
        self._server = await asyncio.start_server(self._client, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        self.address = f"socket://{self.host}:{self.port}"

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = writer
        self.clients += 1
        self._connected.set()
        try:
            while True:
                data = await reader.read(4096)
                if not data:
                    break
                self.from_host.put_nowait(data)
        except (ConnectionError, OSError):
            pass
        finally:
            if self._writer is writer:
                self._writer = None
                self._connected.clear()
            writer.close()

    async def write(self, data: bytes) -> bool:
        """Send device bytes to the connected host; False (dropped) when nobody is connected."""
        writer = self._writer
        if writer is None or writer.is_closing():
            self.dropped += len(data)
            return False
        try:
            writer.write(data)
            await writer.drain()
        except (ConnectionError, OSError):
            self.dropped += len(data)
            return False
        return True

    async def unplug(self) -> None:
        """Stop listening and close the host's connection (its next read sees the connection closed)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        writer, self._writer = self._writer, None
        self._connected.clear()
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def close(self) -> None:
        """Unplug for good."""
        await self.unplug()


class UsbExposure:
    """A virtual USB shoe on the in-process bus of :mod:`simulators.usb_backend`.

    The backend is registered with :func:`drivers.transports.usb.register_backend` so a plain
    ``usb://VID:PID?serial=...`` URL resolves to it (same process only).
    """

    def __init__(self, vid: int = 0x1209, pid: int = 0x7A5E, serial: str = "SIM0001",
                 register: bool = True) -> None:
        from tablesense.simulators.usb_backend import SimUsbBackend, SimUsbDevice

        self.device = SimUsbDevice(vid=vid, pid=pid, serial=serial)
        self.backend = SimUsbBackend([self.device])
        self.address = f"usb://{vid:04x}:{pid:04x}?serial={serial}"
        self.from_host: asyncio.Queue[bytes] = asyncio.Queue()
        self.dropped = 0
        self._register = register
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def plugged(self) -> bool:
        """True while the virtual device is on the bus."""
        return self.device.plugged

    async def start(self) -> None:
        """Register the backend and forward host writes to :attr:`from_host`."""
        self._loop = asyncio.get_running_loop()
        loop = self._loop

        def deliver(data: bytes) -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.from_host.put_nowait, data)

        self.device.on_host_write = deliver
        if self._register:
            from tablesense.drivers.transports.usb import register_backend
            register_backend(self.backend)

    async def write(self, data: bytes) -> bool:
        """Queue device bytes on the IN endpoint; False (dropped) when unplugged."""
        if not self.device.plugged:
            self.dropped += len(data)
            return False
        self.device.device_write(data)
        return True

    async def unplug(self) -> None:
        """Take the device off the bus: pending and future transfers fail with ENODEV."""
        self.device.unplug()

    async def replug(self) -> None:
        """Put the device back (new address, kernel driver bound again)."""
        self.device.replug()

    async def close(self) -> None:
        """Unplug and unregister the backend if it is still the registered one."""
        self.device.unplug()
        if self._register:
            from tablesense.drivers.transports.usb import register_backend, registered_backend
            if registered_backend() is self.backend:
                register_backend(None)

