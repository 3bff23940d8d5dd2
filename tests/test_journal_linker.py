"""``seal.Linker``: the journal's chain links with the HMAC key set up once give exactly the links of
``seal.link`` (the chain format is unchanged), also when two threads link at once (the event loop
appends while the maintenance thread verifies blocks before archiving them)."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from tablesense.daemon.journal.seal import Linker, chain, link


@settings(max_examples=300, deadline=None)
@given(key=st.binary(min_size=32, max_size=80), previous=st.binary(min_size=0, max_size=40),
       rows=st.lists(st.binary(max_size=5000), min_size=1, max_size=8))
def test_a_linker_gives_the_links_of_link(key: bytes, previous: bytes, rows: list[bytes]) -> None:
    linker = Linker(key)
    current = previous
    for row in rows:
        expected = link(key, current, row)
        assert linker(current, row) == expected
        current = expected
    assert current == chain(key, previous, rows)


def test_two_threads_linking_with_one_linker_get_the_same_chains() -> None:
    key = bytes(range(32))
    linker = Linker(key)
    rows = [bytes([i % 251]) * (i % 3000) for i in range(400)]  # small rows and large ones
    expected = chain(key, b"\x00" * 32, rows)
    results: list[bytes] = []

    def work() -> None:
        for _ in range(20):
            current = b"\x00" * 32
            for row in rows:
                current = linker(current, row)
            results.append(current)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 60
