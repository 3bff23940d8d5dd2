"""Every journalable input round-trips exactly through the journal's (kind, JSON) encoding and through a
real journal file (hypothesis)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tablesense.daemon.journal import Journal, JournalDamaged
from tablesense.daemon.journal.codec import decode_event, encode_event, event_device, input_types
from tablesense.daemon.rules.cards import ALL_CARDS
from tablesense.daemon.table.inputs import COMMAND_NAMES, Command, InstanceConflict, TableStart, TimedInput
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    CardUnreadable,
    DealerButton,
    DeviceError,
    DeviceIdentity,
    DeviceState,
    Heartbeat,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)

names = st.text(min_size=1, max_size=12)
seqs = st.integers(min_value=0, max_value=2**63 - 1)
cards = st.sampled_from(ALL_CARDS)
texts = st.text(max_size=40)

events = st.one_of(
    st.builds(CardDrawn, names, seqs, cards),
    st.builds(CardUnreadable, names, seqs),
    st.builds(ShoeStatus, names, seqs, st.sampled_from(ShoeStatusKind), st.none() | cards),
    st.builds(DeviceIdentity, names, seqs, texts, texts, texts, texts),
    st.builds(Heartbeat, names, seqs),
    st.builds(DeviceError, names, seqs, texts, texts),
    st.builds(SpotChanged, names, seqs, texts, st.sampled_from(SpotState),
              st.none() | st.integers(min_value=0, max_value=10**12)),
    st.builds(DealerButton, names, seqs, st.sampled_from(Button)),
    st.builds(DeviceState, names, st.sampled_from(LinkState), texts),
    st.builds(Command, st.sampled_from(COMMAND_NAMES), st.dictionaries(texts, texts, max_size=3), texts),
    st.builds(Command, st.sampled_from(COMMAND_NAMES), st.dictionaries(texts, texts, max_size=3), texts,
              texts, texts, texts),
    st.builds(TableStart, texts),
    st.builds(InstanceConflict, texts, texts, texts),
)


@given(events)
def test_every_input_round_trips(event: object) -> None:
    kind, payload = encode_event(event)
    assert kind == type(event).__name__
    back = decode_event(kind, payload)
    assert back == event and type(back) is type(event)


def test_every_input_type_is_known() -> None:
    assert set(input_types()) == {"CardDrawn", "CardUnreadable", "ShoeStatus", "DeviceIdentity", "Heartbeat",
                                  "DeviceError", "SpotChanged", "DealerButton", "DeviceState", "Command",
                                  "TableStart", "RejectedInput", "Tick", "JournalOutage", "InstanceConflict"}


def test_device_and_device_seq() -> None:
    assert event_device(Heartbeat("shoe", 7)) == ("shoe", 7)
    assert event_device(DeviceState("pad", LinkState.ONLINE)) == ("pad", None)
    assert event_device(Command("void_round", {}, "pitboss")) == (None, None)
    assert event_device(TableStart()) == (None, None)


def test_unknown_kind_and_bad_payload_are_damage() -> None:
    with pytest.raises(JournalDamaged, match="unknown kind"):
        decode_event("Teleport", b"{}")
    with pytest.raises(JournalDamaged, match="cannot be decoded"):
        decode_event("CardDrawn", b'{"device": "shoe", "seq": 1, "card": {"rank": 14, "suit": "H"}}')


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(events, min_size=1, max_size=20))
def test_inputs_round_trip_through_a_journal_file(tmp_path_factory: pytest.TempPathFactory,
                                                  batch: list[object]) -> None:
    directory: Path = tmp_path_factory.mktemp("codec")
    inputs = [TimedInput(f"2026-11-29T12:00:{i:02d}.000Z", e) for i, e in enumerate(batch)]  # type: ignore[arg-type]
    with Journal(directory, "t1") as j:
        for inp in inputs:
            j.append(inp, [])
    with Journal(directory, "t1") as j:
        assert list(j.replay_inputs()) == inputs
