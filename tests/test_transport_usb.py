"""``usb://`` links through the real pyusb code against the Python pyusb backend (no hardware, no libusb)."""

from __future__ import annotations

import asyncio

import pytest
import structlog
import usb.core
from link_support import expected_cards, running, running_link, wait_until
from structlog.testing import capture_logs

from tablesense.drivers.events import CardDrawn, DeviceIdentity, LinkState
from tablesense.drivers.protocols.tsref import encode
from tablesense.drivers.transports import OpenError, open_transport
from tablesense.drivers.transports.usb import parse_usb_url, registered_backend
from tablesense.simulators.exposure import UsbExposure
from tablesense.simulators.runner import SimulatorRunner, shoe_program
from tablesense.simulators.shoe import VirtualShoe
from tablesense.simulators.usb_backend import SimUsbBackend, SimUsbDevice

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _plain_structlog() -> None:
    structlog.reset_defaults()


def test_the_backend_drives_real_pyusb_find_and_strings() -> None:
    dev = SimUsbDevice(vid=0x1234, pid=0x5678, serial="SHOE-42")
    backend = SimUsbBackend([dev, SimUsbDevice(vid=0x1234, pid=0x5678, serial="OTHER")])
    found = usb.core.find(idVendor=0x1234, idProduct=0x5678, backend=backend,
                          custom_match=lambda d: d.serial_number == "SHOE-42")
    assert found is not None and found.serial_number == "SHOE-42" and found.product == "virtual card shoe"
    assert len(list(usb.core.find(find_all=True, backend=backend))) == 2


async def test_round_over_usb_with_kernel_driver_detached_and_reattached() -> None:
    shoe = VirtualShoe(decks=8, seed=31)
    exposure = UsbExposure(serial="SIM-31")
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=2, loop_shoes=False), pace=0.005,
                             start_on_host=True)
    async with running(runner.run()):
        await wait_until(lambda: registered_backend() is exposure.backend, "backend registered")
        async with running_link(exposure.address) as rec:
            await wait_until(lambda: runner.finished.is_set(), "two rounds")
            await wait_until(lambda: len(rec.cards) >= len(expected_cards(shoe.history)), "every card")
        calls = exposure.device.call_names()
    assert [(c.seq, c.card) for c in rec.cards] == [(c.seq, c.card) for c in expected_cards(shoe.history)]
    assert rec.of(DeviceIdentity)  # the status request went out on the OUT endpoint and was answered
    # usbhid detached before the configuration and the claim, given back on close.
    first = calls.index
    assert first("detach_kernel_driver") < first("set_configuration") < first("claim_interface")
    assert first("claim_interface") < first("release_interface") < first("attach_kernel_driver")
    assert exposure.device.kernel_driver[0] is True
    assert registered_backend() is None  # the exposure unregistered itself


async def test_unplug_and_replug_usb_mid_round() -> None:
    shoe = VirtualShoe(decks=8, seed=32)
    exposure = UsbExposure(serial="SIM-32")
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=3, loop_shoes=False), pace=0.02,
                             start_on_host=True, heartbeat=None)
    with capture_logs() as logs:
        async with running(runner.run()):
            await wait_until(lambda: registered_backend() is exposure.backend, "backend registered")
            async with running_link(exposure.address) as rec:
                await wait_until(lambda: sum(isinstance(e, CardDrawn) for e in shoe.history) >= 2,
                                 "two cards")
                await runner.unplug()
                await wait_until(lambda: rec.link.open_failures >= 2, "retries while off the bus")
                assert "no such device" in rec.link.detail
                await runner.replug()
                await wait_until(lambda: runner.finished.is_set(), "three rounds")
                await wait_until(lambda: len(rec.cards) >= len(expected_cards(shoe.history)), "every card")
        calls = exposure.device.call_names()
    assert [(c.seq, c.card) for c in rec.cards] == [(c.seq, c.card) for c in expected_cards(shoe.history)]
    assert rec.link.connects == 2
    assert calls.count("detach_kernel_driver") >= 2  # detached again after the replug rebound usbhid
    assert len([e for e in logs if e["event"] == "link.lost"]) == 1
    assert [s.state for s in rec.states].count(LinkState.ONLINE) == 2


async def test_reply_arriving_just_after_a_read_timeout_is_not_lost() -> None:
    dev = SimUsbDevice(serial="SIM-33")
    backend = SimUsbBackend([dev])
    link = await open_transport("usb://1209:7a5e?serial=SIM-33&timeout=20", usb_backend=backend)
    try:
        reply = encode(DeviceIdentity("shoe", 1, "acme", "s1", "2.0", "X1"))
        before = dev.timeouts
        dev.deliver_after_timeout(reply)  # lands the moment the in-flight read gives up
        got = b""
        gave_up = 0
        async with asyncio.timeout(10):
            while not got.endswith(b"\r\n"):
                # The caller itself gives up on reads at the same rate as the USB read timeout: a
                # cancelled read() must not swallow the reply either.
                try:
                    got += await asyncio.wait_for(link.read(), 0.02)
                except TimeoutError:
                    gave_up += 1
        assert got == reply
        assert dev.timeouts > before  # it really came after a USB read timeout
    finally:
        await link.close()


async def test_permission_denied_is_one_clear_line() -> None:
    dev = SimUsbDevice(serial="SIM-34", permission_denied=True)
    backend = SimUsbBackend([dev])
    with capture_logs() as logs:
        async with running_link("usb://1209:7a5e?serial=SIM-34", usb_backend=backend) as rec:
            await wait_until(lambda: rec.link.open_failures >= 3, "three attempts")
    loud = [e for e in logs if e["event"] == "link.open_failed" and e["log_level"] == "warning"]
    assert len(loud) == 1 and loud[0]["kind"] == "permission"
    assert "permission denied" in loud[0]["message"] and "usb://1209:7a5e" in loud[0]["message"]


async def test_missing_usb_device_names_ids_and_serial() -> None:
    backend = SimUsbBackend([SimUsbDevice(serial="SOMEONE-ELSE")])
    with pytest.raises(OpenError) as info:
        await open_transport("usb://1209:7a5e?serial=SIM-35", usb_backend=backend)
    assert info.value.kind == "not_found" and "1209:7a5e serial SIM-35" in info.value.cause


@pytest.mark.parametrize(("url", "fragment"), [
    ("usb://12345", "VID:PID"),
    ("usb://zz:01", "VID:PID"),
    ("usb://1209:7a5e?endpoint=0x01", "not an IN endpoint"),
    ("usb://1209:7a5e?colour=red", "unknown option"),
    ("usb://1209:7a5e?timeout=0", "positive"),
])
def test_bad_usb_urls_are_explained(url: str, fragment: str) -> None:
    with pytest.raises(OpenError) as info:
        parse_usb_url(url)
    assert fragment in info.value.cause and info.value.kind == "bad_url"


def test_usb_url_options() -> None:
    spec = parse_usb_url("usb://1234:abcd?serial=S1&interface=1&endpoint=0x82&out=0x02&timeout=50")
    assert (spec.vid, spec.pid, spec.serial, spec.interface) == (0x1234, 0xABCD, "S1", 1)
    assert (spec.endpoint_in, spec.endpoint_out, spec.timeout_ms) == (0x82, 0x02, 50)
