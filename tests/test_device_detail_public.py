"""The public ``devices/{name}`` topic, which signage reads, never names where a device is: a link
state's detail ("opening socket://10.20.0.12:4001", "tcp 10.20.0.12:4001", a cause quoting the URL)
is published with the device's address replaced by ``<address>`` (docs/security.md); the journal keeps
the input whole, and the state itself is unchanged."""

from __future__ import annotations

import pytest
from machine_support import SHOE, Driver

from tablesense.daemon.config import parse_config
from tablesense.daemon.table.inputs import Channel
from tablesense.drivers.events import DeviceState, LinkState
from tablesense.simulators.dealer import sim_config_toml


def baccarat_config_text() -> str:
    """The bench's baccarat table, its shoe at ``/dev/null`` (the first device URL of the text)."""
    return sim_config_toml("baccarat", urls={"shoe": "/dev/null", "pads": "/dev/null"}, host="127.0.0.1",
                           port=1883, journal="/nonexistent", table="bac-01")


def published(url: str, detail: str, device: str = "shoe") -> tuple[str, str]:
    d = Driver(parse_config(baccarat_config_text().replace('"/dev/null"', f'"{url}"', 1)))
    out = d.feed(DeviceState(device, LinkState.DISCONNECTED, detail))
    (status,) = [e.message for e in out if e.channel is Channel.DEVICE]
    return status.state, status.detail


@pytest.mark.parametrize(("url", "detail", "public"), [
    ("socket://10.20.0.12:4001", "opening socket://10.20.0.12:4001", "opening <address>"),
    ("socket://10.20.0.12:4001", "tcp 10.20.0.12:4001", "tcp <address>"),
    ("socket://10.20.0.12:4001", "cannot open: could not open port 10.20.0.12:4001: [Errno 111] refused",
     "cannot open: could not open port <address>: [Errno 111] refused"),
    ("socket://ts:4001", "cannot open: ts: Name or service not known; its settings",
     "cannot open: <address>: Name or service not known; its settings"),
    ("rfc2217://shoe-srv.casino.lan:7000?logging=debug",
     "rfc2217 shoe-srv.casino.lan:7000?logging=debug @ 9600", "rfc2217 <address> @ 9600"),
    ("/dev/serial/by-id/usb-FTDI_FT232R_A10KZ3XY-if00-port0",
     "opening /dev/serial/by-id/usb-FTDI_FT232R_A10KZ3XY-if00-port0", "opening <address>"),
    ("socket://10.20.0.12:4001", "no valid frame for 5.0 s", "no valid frame for 5.0 s"),
])
def test_the_public_detail_names_no_address(url: str, detail: str, public: str) -> None:
    assert published(url, detail) == ("disconnected", public)


def test_the_journaled_input_keeps_the_detail_whole() -> None:
    d = Driver(parse_config(baccarat_config_text().replace('"/dev/null"', '"socket://10.20.0.12:4001"', 1)))
    d.feed(DeviceState(SHOE, LinkState.CONNECTING, "opening socket://10.20.0.12:4001"))
    assert d.inputs[-1].event.detail == "opening socket://10.20.0.12:4001"
