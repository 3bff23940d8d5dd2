"""The relay client's socket read-ahead (``daemon.mqtt._ReadAhead``): paho gets exactly the bytes the
socket delivered, in order, whatever sizes it asks for, and a burst of acknowledgements from a real
Mosquitto costs a few ``recv`` calls instead of about three per PUBACK."""

from __future__ import annotations

import asyncio
import secrets
import socket
from typing import Any

import aiomqtt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablesense.daemon.mqtt import _AckClient, _ReadAhead


class _Paho:
    """The two attributes :class:`_ReadAhead` uses of a paho client: ``_sock`` and ``_sock_recv``."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock: socket.socket | None = sock
        self.calls = 0

    def _sock_recv(self, bufsize: int) -> bytes:
        assert self._sock is not None
        self.calls += 1
        return self._sock.recv(bufsize)


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    return a, b


def test_bytes_are_handed_over_in_order_then_the_socket_says_what_it_says() -> None:
    ours, peer = _pair()
    client = _Paho(ours)
    ahead = _ReadAhead(client)  # type: ignore[arg-type]
    with ours, peer:
        peer.sendall(b"\x40\x02\x00\x07\x40\x02\x00\x08")
        assert ahead.recv(1) == b"\x40"
        assert client.calls == 1 and ahead.pending()
        assert ahead.recv(1) == b"\x02"
        assert ahead.recv(2) == b"\x00\x07"
        assert ahead.recv(100) == b"\x40\x02\x00\x08"  # what is left, no more: no second call
        assert client.calls == 1 and not ahead.pending()
        with pytest.raises(BlockingIOError):  # empty: the socket's own answer
            ahead.recv(1)
        peer.sendall(b"xyz")
        peer.shutdown(socket.SHUT_WR)
        assert ahead.recv(5) == b"xyz"  # a read that fits is handed over as read
        assert ahead.recv(1) == b""  # the end of the stream


def test_a_new_connection_drops_what_was_read_ahead_of_the_old_one() -> None:
    old, old_peer = _pair()
    new, new_peer = _pair()
    client = _Paho(old)
    ahead = _ReadAhead(client)  # type: ignore[arg-type]
    with old, old_peer, new, new_peer:
        old_peer.sendall(b"\x40\x02\x00\x07")
        assert ahead.recv(1) == b"\x40"
        client._sock = new  # paho reconnected
        assert not ahead.pending()
        new_peer.sendall(b"\x20\x03\x00\x00\x00")
        assert ahead.recv(2) == b"\x20\x03"


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=1, max_size=3000),
       sizes=st.lists(st.integers(1, 700), min_size=1, max_size=60),
       chunks=st.lists(st.integers(1, 900), min_size=1, max_size=8))
def test_any_read_sizes_see_the_stream_unchanged(data: bytes, sizes: list[int], chunks: list[int]) -> None:
    ours, peer = _pair()
    ahead = _ReadAhead(_Paho(ours))  # type: ignore[arg-type]
    got = bytearray()
    with ours, peer:
        pos, i, k = 0, 0, 0
        while len(got) < len(data):
            if pos < len(data):  # the peer sends in pieces, between paho's reads
                n = chunks[k % len(chunks)]
                peer.sendall(data[pos:pos + n])
                pos += n
                k += 1
            while True:
                try:
                    part = ahead.recv(sizes[i % len(sizes)])
                except BlockingIOError:
                    break
                i += 1
                assert 0 < len(part) <= sizes[(i - 1) % len(sizes)]
                got += part
    assert bytes(got) == data


@pytest.mark.parametrize("v5", [True, False], ids=["v5", "v3.1.1"])
async def test_a_burst_of_acknowledgements_takes_a_few_reads(v5: bool) -> None:
    """200 QoS 1 publishes at once: every one completes, with far fewer ``recv`` calls than PUBACKs
    (paho alone: the type byte, the length byte and the rest of each PUBACK, one call each)."""
    client = _AckClient("127.0.0.1", 1883, identifier=f"ahead-{secrets.token_hex(4)}",
                        protocol=aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311)
    prefix = f"test-ahead-{secrets.token_hex(4)}"
    async with asyncio.timeout(20):
        async with client:
            paho_client: Any = client._client
            ahead = paho_client._sock_recv.__self__
            assert isinstance(ahead, _ReadAhead)
            calls = 0
            recv = ahead._recv

            def counted(bufsize: int) -> bytes:
                nonlocal calls
                calls += 1
                return recv(bufsize)

            ahead._recv = counted
            futures = [client.start_publish(f"{prefix}/m{i}", b"x" * 50, 1, False, None) for i in range(200)]
            client.write_now()
            for fut in futures:
                await fut
    assert all(f.exception() is None for f in futures)
    assert calls < 100, calls  # paho alone: about 600
