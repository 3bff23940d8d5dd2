"""USB shoes with a vendor-specific or HID interface, through pyusb 1.3.

URL form: ``usb://VID:PID[?serial=SN&interface=N&endpoint=0x81&out=0x01&timeout=100]`` (hex ids, as
``lsusb`` prints them). ``endpoint`` is the IN endpoint to read (default: the interface's first IN
endpoint); ``out`` the OUT endpoint for status requests and acknowledgements (default: the first OUT
endpoint, if any); ``timeout`` the read timeout in milliseconds.

What the open does, in order (pyusb 1.3 and Linux usbfs):

1. ``usb.core.find`` by vendor/product (and serial number string) with the injected or registered
   backend (:func:`register_backend`; tests and the simulator use a pyusb backend written in Python).
2. Detach the kernel driver (e.g. ``usbhid``) from *every* interface of the active configuration that
   has one -- Linux refuses to let us claim any interface while a kernel driver holds any interface of
   the device -- remembering which were detached.
3. ``set_configuration()`` only if the device is unconfigured (on a configured device it is a reset).
4. Claim the interface.

Reads are blocking in pyusb, so one dedicated thread runs a *continuous* read loop with a short timeout
and hands chunks to the event loop with ``call_soon_threadsafe``. A read timeout is the idle case: the
thread simply reads again. No read is ever abandoned half way (we never wrap a blocking read in
``wait_for`` and drop its result), so a reply that arrives just after a timeout is picked up by the next
read. Closing stops the thread, releases the interface, re-attaches the kernel drivers we detached and
disposes the pyusb resources. ``USBError`` with errno ``ENODEV``/``EIO``/``EPIPE`` means the device
went away (unplug) and becomes :class:`~drivers.transports.base.LinkLost`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import urllib.parse
from dataclasses import dataclass
from typing import Any

import usb.core
import usb.util

from tablesense.drivers.transports.base import LinkLost, OpenError, ReaderThreadLink, describe_os_error

__all__ = ["UsbLink", "UsbUrl", "open_usb", "parse_usb_url", "register_backend", "registered_backend"]

_registered_backend: Any = None


def register_backend(backend: Any) -> None:
    """Use ``backend`` (a ``usb.backend.IBackend``) for every ``usb://`` URL opened without an explicit
    backend, e.g. the simulator's in-process virtual USB bus. ``None`` restores pyusb's default (libusb)."""
    global _registered_backend
    _registered_backend = backend


def registered_backend() -> Any:
    """The backend set by :func:`register_backend` (``None`` = pyusb's default)."""
    return _registered_backend


@dataclass(frozen=True, slots=True)
class UsbUrl:
    """A parsed ``usb://`` URL (see module docstring)."""

    vid: int
    pid: int
    serial: str | None = None
    interface: int = 0
    endpoint_in: int | None = None
    endpoint_out: int | None = None
    timeout_ms: int = 100


def parse_usb_url(url: str) -> UsbUrl:
    """Parse ``usb://VID:PID[?serial=..&interface=N&endpoint=0x81&out=0x01&timeout=MS]``.

    Raises :class:`OpenError` (kind ``bad_url``) naming what is wrong.
    """
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme != "usb":
        raise OpenError(url, "not a usb:// URL", "bad_url")
    ids = parsed.netloc or parsed.path.lstrip("/")
    try:
        vid_text, pid_text = ids.split(":")
        vid, pid = int(vid_text, 16), int(pid_text, 16)
    except ValueError as exc:
        raise OpenError(url, "expected usb://VID:PID with hexadecimal ids, e.g. usb://1234:5678",
                        "bad_url") from exc
    query = urllib.parse.parse_qs(parsed.query)
    known = {"serial", "interface", "endpoint", "out", "timeout"}
    unknown = set(query) - known
    if unknown:
        raise OpenError(url, f"unknown option(s) {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(sorted(known))}", "bad_url")

    def one(key: str) -> str | None:
        values = query.get(key)
        return values[-1] if values else None

    try:
        iface = int(one("interface") or "0", 0)
        ep_in = int(one("endpoint") or "", 0) if one("endpoint") else None
        ep_out = int(one("out") or "", 0) if one("out") else None
        timeout_ms = int(one("timeout") or "100", 0)
    except ValueError as exc:
        raise OpenError(url, f"bad number in options: {exc}", "bad_url") from exc
    if ep_in is not None and not ep_in & 0x80:
        raise OpenError(url, f"endpoint {ep_in:#04x} is not an IN endpoint (bit 7 clear)", "bad_url")
    if timeout_ms <= 0:
        raise OpenError(url, "timeout must be a positive number of milliseconds", "bad_url")
    return UsbUrl(vid, pid, one("serial"), iface, ep_in, ep_out, timeout_ms)


_GONE = {errno.ENODEV, errno.EIO, errno.EPIPE, errno.ESHUTDOWN, errno.ENOENT}


def _usb_cause(exc: BaseException) -> str:
    err = getattr(exc, "errno", None)
    if err in (errno.ENODEV, errno.ENOENT):
        return "device disconnected"
    return str(exc) or type(exc).__name__


class UsbLink(ReaderThreadLink):
    """An open, claimed USB interface read by a dedicated thread. Made by :func:`open_usb`."""

    def __init__(self, dev: Any, spec: UsbUrl, ep_in: Any, ep_out: Any, detached: list[int],
                 description: str) -> None:
        super().__init__(description)
        self._dev = dev
        self._spec = spec
        self._ep_in = ep_in
        self._ep_out = ep_out
        self._detached = detached
        self._closed = False
        size = int(getattr(ep_in, "wMaxPacketSize", 64) or 64)
        self._packet = size
        self._start_reader(self._reader, f"tablesense-usb {description}")

    def _reader(self) -> None:
        address = self._ep_in.bEndpointAddress
        while not self._stop.is_set():
            try:
                data = self._dev.read(address, self._packet, timeout=self._spec.timeout_ms)
            except usb.core.USBTimeoutError:
                continue  # idle: read again at once, the loop never pauses between reads
            except usb.core.USBError as exc:
                if getattr(exc, "errno", None) == errno.ETIMEDOUT:
                    continue
                if not self._stop.is_set():
                    self._post(LinkLost(_usb_cause(exc)))
                return
            except Exception as exc:
                if not self._stop.is_set():
                    self._post(LinkLost(str(exc) or type(exc).__name__))
                return
            if len(data):
                self._post(bytes(data))

    async def write(self, data: bytes) -> None:
        """Send host-to-device bytes on the OUT endpoint (from a worker thread).

        Raises :class:`LinkLost` if the device is gone; without an OUT endpoint the bytes are dropped
        (a read-only shoe cannot take status requests) and :class:`LinkLost` is *not* raised.
        """
        if self._lost is not None:
            raise self._lost
        if self._ep_out is None:
            return
        try:
            await asyncio.to_thread(self._dev.write, self._ep_out.bEndpointAddress, data,
                                    max(self._spec.timeout_ms, 1000))
        except usb.core.USBError as exc:
            if getattr(exc, "errno", None) in _GONE:
                raise LinkLost(_usb_cause(exc)) from exc
            raise LinkLost(f"write failed: {exc}") from exc

    def _release(self) -> None:
        self._join_reader(2.0 + self._spec.timeout_ms / 1000)
        with contextlib.suppress(usb.core.USBError, ValueError):
            usb.util.release_interface(self._dev, self._spec.interface)
        for number in self._detached:
            # Give the device back to its kernel driver (e.g. usbhid); fails harmlessly after an unplug.
            with contextlib.suppress(usb.core.USBError, NotImplementedError):
                self._dev.attach_kernel_driver(number)
        with contextlib.suppress(usb.core.USBError):
            usb.util.dispose_resources(self._dev)

    async def close(self) -> None:
        """Stop the reader, release the interface, re-attach detached kernel drivers. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        await asyncio.to_thread(self._release)


def _open_blocking(url: str, spec: UsbUrl, backend: Any) -> tuple[Any, Any, Any, list[int]]:
    unreadable: list[BaseException] = []

    def matches(dev: Any) -> bool:
        if spec.serial is None:
            return True
        try:
            return bool(dev.serial_number == spec.serial)
        except (usb.core.USBError, ValueError) as exc:
            unreadable.append(exc)  # reading the serial string needs the device opened
            return False

    try:
        dev = usb.core.find(idVendor=spec.vid, idProduct=spec.pid, backend=backend, custom_match=matches)
    except usb.core.NoBackendError as exc:
        raise OpenError(url, "no USB backend (is libusb-1.0 installed?)", "other") from exc
    if dev is None:
        # pyusb turns a failed open while reading the language ids into ValueError("The device has no
        # langid (permission issue, ...)"), so look at the text as well as the errno.
        denied = [e for e in unreadable if getattr(e, "errno", None) in (errno.EACCES, errno.EPERM)
                  or "permission" in str(e).lower()]
        if denied:
            cause, kind = describe_os_error(errno.EACCES, "")
            raise OpenError(url, f"{cause} (cannot read the serial number of {spec.vid:04x}:{spec.pid:04x})",
                            kind)
        wanted = f"{spec.vid:04x}:{spec.pid:04x}" + (f" serial {spec.serial}" if spec.serial else "")
        raise OpenError(url, f"no such device ({wanted} not on the bus)", "not_found")
    detached: list[int] = []
    try:
        try:
            cfg = dev.get_active_configuration()
        except usb.core.USBError:
            cfg = None
        # Detach from every interface first (Linux usbfs): usbfs will not let us claim one while a kernel
        # driver holds any interface of the device.
        numbers = sorted({i.bInterfaceNumber for i in (cfg if cfg is not None else dev[0])})
        for number in numbers:
            with contextlib.suppress(NotImplementedError):
                if dev.is_kernel_driver_active(number):
                    dev.detach_kernel_driver(number)
                    detached.append(number)
        if cfg is None:
            dev.set_configuration()  # only when unconfigured: on a configured device it resets
            cfg = dev.get_active_configuration()
        intf = usb.util.find_descriptor(cfg, bInterfaceNumber=spec.interface)
        if intf is None:
            raise OpenError(url, f"device has no interface {spec.interface}", "bad_url")
        usb.util.claim_interface(dev, spec.interface)

        def direction(want: int) -> Any:
            return usb.util.find_descriptor(
                intf, custom_match=lambda e: usb.util.endpoint_direction(e.bEndpointAddress) == want)

        ep_in = (usb.util.find_descriptor(intf, bEndpointAddress=spec.endpoint_in)
                 if spec.endpoint_in is not None else direction(usb.util.ENDPOINT_IN))
        if ep_in is None:
            raise OpenError(url, "interface has no such IN endpoint", "bad_url")
        ep_out = (usb.util.find_descriptor(intf, bEndpointAddress=spec.endpoint_out)
                  if spec.endpoint_out is not None else direction(usb.util.ENDPOINT_OUT))
    except OpenError:
        _undo(dev, detached)
        raise
    except usb.core.USBError as exc:
        _undo(dev, detached)
        cause, kind = describe_os_error(getattr(exc, "errno", None), str(exc))
        raise OpenError(url, cause, kind) from exc
    return dev, ep_in, ep_out, detached


def _undo(dev: Any, detached: list[int]) -> None:
    for number in detached:
        with contextlib.suppress(usb.core.USBError, NotImplementedError):
            dev.attach_kernel_driver(number)
    with contextlib.suppress(usb.core.USBError):
        usb.util.dispose_resources(dev)


async def open_usb(url: str, *, backend: Any = None) -> UsbLink:
    """Open and claim the USB device named by ``url`` (see module docstring) off the event loop.

    ``backend`` is a ``usb.backend.IBackend``; ``None`` uses :func:`register_backend`'s, else pyusb's
    default (libusb-1.0). Raises :class:`OpenError` ("no such device", "permission denied", "busy", ...).
    """
    spec = parse_usb_url(url)
    chosen = backend if backend is not None else _registered_backend
    dev, ep_in, ep_out, detached = await asyncio.to_thread(_open_blocking, url, spec, chosen)
    description = f"usb {spec.vid:04x}:{spec.pid:04x} if{spec.interface} ep{ep_in.bEndpointAddress:#04x}"
    return UsbLink(dev, spec, ep_in, ep_out, detached, description)
