"""A pyusb backend written in Python: a virtual USB bus with virtual shoes, no hardware, no libusb.

:class:`SimUsbBackend` implements the ``usb.backend.IBackend`` calls pyusb 1.3 makes (pyusb
``usb/backend/__init__.py``), so ``usb.core.find``, ``usb.util.claim_interface``,
``dev.read``/``dev.write``, string descriptors, ``is_kernel_driver_active``/``detach_kernel_driver``/
``attach_kernel_driver`` and ``usb.util.dispose_resources`` all run their real code. It raises what
libusb-1.0 would (pyusb ``usb/backend/libusb1.py`` error table): a read timeout is
``USBTimeoutError("Operation timed out", -7, ETIMEDOUT)``, an unplugged device
``USBError("No such device (it may have been disconnected)", -4, ENODEV)``, claiming an interface a
kernel driver still holds ``USBError("Resource busy", -6, EBUSY)``, no permission
``USBError("Access denied (insufficient permissions)", -3, EACCES)``.

Each :class:`SimUsbDevice` has one configuration with one interface (class HID by default, like a
GDS peripheral) with an interrupt IN endpoint 0x81 and an interrupt OUT
endpoint 0x01 (64-byte packets). Every backend call is recorded in :attr:`SimUsbDevice.calls` so tests
can check that the kernel driver was detached before the claim and re-attached on close.

Fault hooks: :meth:`SimUsbDevice.unplug` / :meth:`~SimUsbDevice.replug`, ``permission_denied``, and
:meth:`SimUsbDevice.deliver_after_timeout` -- bytes that become readable only at the moment an in-flight
read times out, i.e. a reply that arrives just after a read timeout.
"""

from __future__ import annotations

import array
import errno
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import usb.backend
import usb.core

__all__ = ["SimUsbBackend", "SimUsbDevice"]

_HID = 0x03


@dataclass
class _Desc:
    """A descriptor record: pyusb copies the attributes it needs from it."""

    values: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class SimUsbDevice:
    """One virtual USB device (see module docstring). Thread-safe: pyusb calls come from worker threads."""

    vid: int = 0x1209
    pid: int = 0x7A5E
    serial: str = "SIM0001"
    manufacturer: str = "tablesense"
    product: str = "virtual card shoe"
    interface_class: int = _HID
    packet_size: int = 64
    permission_denied: bool = False
    on_host_write: Callable[[bytes], None] | None = None
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    plugged: bool = True
    generation: int = 1
    kernel_driver: dict[int, bool] = field(default_factory=lambda: {0: True})
    configuration: int = 0
    host_writes: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._buffer = bytearray()
        self._after_timeout: list[bytes] = []
        self.timeouts = 0
        """Reads that timed out so far."""

    # -- device side ------------------------------------------------------------------------------------

    def device_write(self, data: bytes) -> None:
        """The device sends ``data`` on its IN endpoint (readable by the host in packet-size pieces)."""
        with self._cond:
            if self.plugged:
                self._buffer += data
                self._cond.notify_all()

    def deliver_after_timeout(self, data: bytes) -> None:
        """Make ``data`` readable only when the next read times out (a reply just after a timeout)."""
        with self._cond:
            self._after_timeout.append(data)

    def unplug(self) -> None:
        """Remove the device from the bus; transfers fail with ENODEV."""
        with self._cond:
            self.plugged = False
            self._buffer.clear()
            self._cond.notify_all()
        self.calls.append(("unplug",))

    def replug(self) -> None:
        """Plug the device back in: a new address, unconfigured, its kernel driver bound again."""
        with self._cond:
            if self.plugged:
                return
            self.plugged = True
            self.generation += 1
            self.kernel_driver = dict.fromkeys(self.kernel_driver, True)
            self.configuration = 0
            self._buffer.clear()
        self.calls.append(("replug",))

    def call_names(self) -> list[str]:
        """Names of the recorded backend calls, in order."""
        return [str(c[0]) for c in self.calls]

    # -- used by the backend ----------------------------------------------------------------------------

    def _check(self, handle: _Handle) -> None:
        if not self.plugged or handle.generation != self.generation:
            raise usb.core.USBError("No such device (it may have been disconnected)", -4, errno.ENODEV)

    def _read(self, handle: _Handle, buff: array.array[int], timeout_ms: int) -> int:
        deadline = time.monotonic() + (timeout_ms / 1000 if timeout_ms else 3600.0)
        with self._cond:
            while True:
                self._check(handle)
                if self._buffer:
                    n = min(len(buff), self.packet_size, len(self._buffer))
                    for i in range(n):
                        buff[i] = self._buffer[i]
                    del self._buffer[:n]
                    return n
                left = deadline - time.monotonic()
                if left <= 0:
                    self.timeouts += 1
                    if self._after_timeout:
                        # The reply lands just after this read gave up.
                        for data in self._after_timeout:
                            self._buffer += data
                        self._after_timeout.clear()
                    raise usb.core.USBTimeoutError("Operation timed out", -7, errno.ETIMEDOUT)
                self._cond.wait(left)


@dataclass(frozen=True)
class _Handle:
    device: SimUsbDevice
    generation: int


class SimUsbBackend(usb.backend.IBackend):  # type: ignore[misc]
    """A ``usb.backend.IBackend`` serving :class:`SimUsbDevice` objects (see module docstring)."""

    def __init__(self, devices: list[SimUsbDevice] | None = None) -> None:
        super().__init__()
        self.devices: list[SimUsbDevice] = list(devices or [])

    # -- enumeration and descriptors --------------------------------------------------------------------

    def enumerate_devices(self) -> Iterator[SimUsbDevice]:
        return iter([d for d in self.devices if d.plugged])

    def get_parent(self, dev: SimUsbDevice) -> None:
        return None

    def get_device_descriptor(self, dev: SimUsbDevice) -> _Desc:
        return _Desc(dict(
            bLength=18, bDescriptorType=1, bcdUSB=0x0200, bDeviceClass=0, bDeviceSubClass=0,
            bDeviceProtocol=0, bMaxPacketSize0=64, idVendor=dev.vid, idProduct=dev.pid, bcdDevice=0x0100,
            iManufacturer=1, iProduct=2, iSerialNumber=3, bNumConfigurations=1,
            address=1 + self.devices.index(dev) + 10 * dev.generation, bus=1,
            port_number=1 + self.devices.index(dev), port_numbers=(1 + self.devices.index(dev),), speed=2))

    def get_configuration_descriptor(self, dev: SimUsbDevice, config: int) -> _Desc:
        if config != 0:
            raise IndexError("configuration index out of range")
        return _Desc(dict(bLength=9, bDescriptorType=2, wTotalLength=9 + 9 + 7 + 7, bNumInterfaces=1,
                          bConfigurationValue=1, iConfiguration=0, bmAttributes=0x80, bMaxPower=50,
                          extra_descriptors=[]))

    def get_interface_descriptor(self, dev: SimUsbDevice, intf: int, alt: int, config: int) -> _Desc:
        if config != 0 or intf != 0 or alt != 0:
            raise IndexError("interface index out of range")
        return _Desc(dict(bLength=9, bDescriptorType=4, bInterfaceNumber=0, bAlternateSetting=0,
                          bNumEndpoints=2, bInterfaceClass=dev.interface_class, bInterfaceSubClass=0,
                          bInterfaceProtocol=0, iInterface=0, extra_descriptors=[]))

    def get_endpoint_descriptor(self, dev: SimUsbDevice, ep: int, intf: int, alt: int, config: int) -> _Desc:
        if config != 0 or intf != 0 or alt != 0 or ep not in (0, 1):
            raise IndexError("endpoint index out of range")
        address = 0x81 if ep == 0 else 0x01
        return _Desc(dict(bLength=7, bDescriptorType=5, bEndpointAddress=address, bmAttributes=0x03,
                          wMaxPacketSize=dev.packet_size, bInterval=1, bRefresh=0, bSynchAddress=0,
                          extra_descriptors=[]))

    # -- handles, configuration, interfaces -------------------------------------------------------------

    def open_device(self, dev: SimUsbDevice) -> _Handle:
        dev.calls.append(("open_device",))
        if not dev.plugged:
            raise usb.core.USBError("No such device (it may have been disconnected)", -4, errno.ENODEV)
        if dev.permission_denied:
            raise usb.core.USBError("Access denied (insufficient permissions)", -3, errno.EACCES)
        return _Handle(dev, dev.generation)

    def close_device(self, dev_handle: _Handle) -> None:
        dev_handle.device.calls.append(("close_device",))

    def set_configuration(self, dev_handle: _Handle, config_value: int) -> None:
        dev = dev_handle.device
        dev._check(dev_handle)
        dev.calls.append(("set_configuration", config_value))
        dev.configuration = config_value

    def get_configuration(self, dev_handle: _Handle) -> int:
        dev = dev_handle.device
        dev._check(dev_handle)
        return dev.configuration

    def set_interface_altsetting(self, dev_handle: _Handle, intf: int, altsetting: int) -> None:
        dev_handle.device._check(dev_handle)
        dev_handle.device.calls.append(("set_interface_altsetting", intf, altsetting))

    def claim_interface(self, dev_handle: _Handle, intf: int) -> None:
        dev = dev_handle.device
        dev._check(dev_handle)
        dev.calls.append(("claim_interface", intf))
        if dev.kernel_driver.get(intf, False):
            raise usb.core.USBError("Resource busy", -6, errno.EBUSY)

    def release_interface(self, dev_handle: _Handle, intf: int) -> None:
        dev = dev_handle.device
        dev.calls.append(("release_interface", intf))
        dev._check(dev_handle)

    def is_kernel_driver_active(self, dev_handle: _Handle, intf: int) -> bool:
        dev = dev_handle.device
        dev._check(dev_handle)
        dev.calls.append(("is_kernel_driver_active", intf))
        return bool(dev.kernel_driver.get(intf, False))

    def detach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        dev = dev_handle.device
        dev._check(dev_handle)
        dev.calls.append(("detach_kernel_driver", intf))
        dev.kernel_driver[intf] = False

    def attach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        dev = dev_handle.device
        dev.calls.append(("attach_kernel_driver", intf))
        dev._check(dev_handle)
        dev.kernel_driver[intf] = True

    # -- transfers --------------------------------------------------------------------------------------

    def intr_read(self, dev_handle: _Handle, ep: int, intf: int, buff: array.array[int], timeout: int) -> int:
        return dev_handle.device._read(dev_handle, buff, timeout)

    def bulk_read(self, dev_handle: _Handle, ep: int, intf: int, buff: array.array[int], timeout: int) -> int:
        return dev_handle.device._read(dev_handle, buff, timeout)

    def intr_write(self, dev_handle: _Handle, ep: int, intf: int, data: array.array[int],
                   timeout: int) -> int:
        dev = dev_handle.device
        dev._check(dev_handle)
        payload = bytes(data)
        dev.host_writes.append(payload)
        if dev.on_host_write is not None:
            dev.on_host_write(payload)
        return len(payload)

    bulk_write = intr_write

    def ctrl_transfer(self, dev_handle: _Handle, bmRequestType: int, bRequest: int, wValue: int,
                      wIndex: int, data: array.array[int], timeout: int) -> int:
        dev = dev_handle.device
        dev._check(dev_handle)
        if bmRequestType & 0x80 and bRequest == 0x06 and wValue >> 8 == 0x03:  # GET_DESCRIPTOR(STRING)
            index = wValue & 0xFF
            if index == 0:
                payload = bytes([4, 3, 0x09, 0x04])  # LANGID en-US
            else:
                texts = {1: dev.manufacturer, 2: dev.product, 3: dev.serial}
                if index not in texts:
                    raise usb.core.USBError("Pipe error", -9, errno.EPIPE)
                encoded = texts[index].encode("utf-16-le")
                payload = bytes([2 + len(encoded), 3]) + encoded
            n = min(len(data), len(payload))
            for i in range(n):
                data[i] = payload[i]
            return n
        raise usb.core.USBError("Pipe error", -9, errno.EPIPE)  # a STALL, as for an unsupported request
