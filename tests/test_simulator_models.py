"""The virtual shoe, virtual pads and fault transforms, decoded through the real tsref codec."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablesense.daemon.rules.baccarat import coup_from_cards
from tablesense.daemon.rules.cards import ALL_CARDS, Card, CardNotInShoe, ShoeComposition
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    CardUnreadable,
    DealerButton,
    DeviceError,
    DeviceIdentity,
    Heartbeat,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)
from tablesense.drivers.protocols.tsref import TsrefCodec, encode_ack, encode_status_request
from tablesense.simulators import faults
from tablesense.simulators.pads import VirtualPads
from tablesense.simulators.shoe import VirtualShoe, burn_count


def decode(data: bytes, device: str = "shoe") -> list:
    return TsrefCodec(device).feed(data)


def kinds(events: list) -> list[str]:
    return [e.kind.value if isinstance(e, ShoeStatus) else type(e).__name__ for e in events]


# -- shoe -------------------------------------------------------------------------------------------


def test_same_seed_same_shoe_different_seed_different_shoe() -> None:
    def run(seed: int) -> bytes:
        shoe = VirtualShoe(8, seed=seed)
        return shoe.start_shoe() + shoe.deal(30)
    assert run(7) == run(7)
    assert run(7) != run(8)


def test_a_full_shuffled_shoe_holds_each_card_exactly_decks_times_and_decodes_as_sent() -> None:
    shoe = VirtualShoe(6, seed=3)
    data = shoe.start_shoe()
    while shoe.remaining:
        data += shoe.draw()
    events = decode(data)
    assert events == shoe.history
    out = [e.card for e in events if isinstance(e, CardDrawn)] + shoe.burned
    assert Counter(out) == Counter({c: 6 for c in ALL_CARDS})
    assert kinds(events).count("cut_card") == 1
    assert kinds(events)[-1] == "empty"
    assert len(shoe.dealt) + len(shoe.burned) == 6 * 52


@pytest.mark.parametrize("first, burned_after", [("AS", 1), ("9H", 9), ("5D", 5), ("10C", 10), ("KD", 10)])
def test_burn_rule_first_card_face_up_then_its_value_value_zero_burns_ten(first, burned_after) -> None:
    assert burn_count(Card.parse(first)) == burned_after
    script = [first] + [str(c) for c in ALL_CARDS[:20] if str(c) != first]
    shoe = VirtualShoe(1, cards=script, burn="rule")
    events = decode(shoe.start_shoe())
    burns = [e for e in events if isinstance(e, ShoeStatus) and e.kind is ShoeStatusKind.BURN]
    assert len(burns) == 1 + burned_after
    assert burns[0].card == Card.parse(first)
    assert all(b.card is None for b in burns[1:])  # face down
    assert shoe.next_card == Card.parse(script[1 + burned_after])


def test_burn_a_fixed_number_and_report_faces() -> None:
    shoe = VirtualShoe(1, cards=["2S", "3S", "4S", "5S"], burn=2, report_burned_faces=True)
    events = decode(shoe.start_shoe() + shoe.draw())
    assert [(e.kind.value, str(e.card)) for e in events if isinstance(e, ShoeStatus)] == [
        ("new_shoe", "None"), ("burn", "2S"), ("burn", "3S")]
    assert events[-1] == CardDrawn("shoe", 3, Card.parse("4S"))


def test_cut_card_comes_out_before_the_card_when_cut_card_at_cards_remain() -> None:
    shoe = VirtualShoe(1, seed=11, burn=None, cut_card_at=16)
    data = shoe.new_shoe() + shoe.deal(52 - 16)
    assert not shoe.cut_card_out and shoe.remaining == 16
    data += shoe.draw()
    events = decode(data)
    assert kinds(events)[-2:] == ["cut_card", "CardDrawn"]
    assert shoe.cut_card_out and shoe.remaining == 15


def test_scripted_shoe_deals_exactly_the_script_and_reports_empty() -> None:
    shoe = VirtualShoe(8, cards=["QH", "2S", "3D"])
    assert shoe.burn_rule is None and shoe.cut_card_at is None
    events = decode(shoe.new_shoe() + shoe.deal(10) + shoe.draw())
    assert [str(e.card) for e in events if isinstance(e, CardDrawn)] == ["QH", "2S", "3D"]
    assert kinds(events) == ["new_shoe", "CardDrawn", "CardDrawn", "CardDrawn", "empty", "empty"]


def test_script_with_a_card_the_shoe_cannot_hold_is_refused() -> None:
    with pytest.raises(CardNotInShoe):
        VirtualShoe(1, cards=["AS", "AS"])
    with pytest.raises(ValueError):
        VirtualShoe(9)
    with pytest.raises(ValueError):
        VirtualShoe(1, seed=1, cut_card_at=52)
    with pytest.raises(ValueError):
        VirtualShoe(1, seed=1, burn="some")  # type: ignore[arg-type]


def test_baccarat_rounds_follow_the_drawing_rules() -> None:
    shoe = VirtualShoe(8, seed=2024)
    shoe.start_shoe()
    sizes = set()
    for _ in range(40):
        before = len(shoe.history)
        data = shoe.deal_baccarat_round()
        cards = [e.card for e in decode(data) if isinstance(e, CardDrawn)]
        assert cards == shoe.last_round
        coup = coup_from_cards(cards)  # raises if the cards are not a complete, legal round
        assert len(coup.cards) == len(cards)
        sizes.add(len(cards))
        assert len(shoe.history) > before
    assert sizes == {4, 5, 6}


def test_unreadable_card_still_leaves_the_shoe() -> None:
    shoe = VirtualShoe(1, cards=["AS", "2S"])
    events = decode(shoe.new_shoe() + shoe.draw_unreadable() + shoe.draw())
    assert [type(e) for e in events[1:]] == [CardUnreadable, CardDrawn, ShoeStatus]
    assert events[2].card == Card.parse("2S")
    assert shoe.dealt == [Card.parse("AS"), Card.parse("2S")] and shoe.remaining == 0


def test_status_request_answered_with_identity_and_lid_state() -> None:
    shoe = VirtualShoe(8, seed=1, serial="SN-42")
    reply = shoe.answer(encode_status_request()[:4])
    assert reply == b""
    reply = shoe.answer(encode_status_request()[4:] + encode_ack(0))
    events = decode(reply + shoe.open_lid() + shoe.answer(encode_status_request()))
    assert isinstance(events[0], DeviceIdentity) and events[0].serial == "SN-42"
    assert kinds(events) == ["DeviceIdentity", "lid_closed", "lid_open", "DeviceIdentity", "lid_open"]
    assert shoe.acked == [0]


def test_heartbeat_error_and_retransmit() -> None:
    shoe = VirtualShoe(8, seed=1)
    data = shoe.heartbeat() + shoe.error("E26", "card face up, check the shoe") + shoe.retransmit()
    codec = TsrefCodec("shoe")
    assert codec.feed(data) == [Heartbeat("shoe", 0),
                                DeviceError("shoe", 1, "E26", "card face up, check the shoe")]
    assert codec.stats.duplicates == 1


def test_sequence_numbers_wrap_in_the_simulator_too() -> None:
    shoe = VirtualShoe(1, seed=5, start_seq=99998)
    codec = TsrefCodec("shoe")
    codec.feed(shoe.start_shoe())
    assert codec.stats.seq_gaps == 0 and codec.last_seq is not None and codec.last_seq < 99998


# -- pads -------------------------------------------------------------------------------------------


def test_rfid_pads_round_with_amounts_lock_and_clear() -> None:
    pads = VirtualPads(["P1", "B1", "T1"], rfid=True)
    phases = pads.play_round({"P1": 2500, "T1": 500})
    assert [name for name, _ in phases] == ["bets", "no_more_bets", "round_end", "clear"]
    events = decode(b"".join(f for _, f in phases), "pads")
    assert events == pads.history
    assert [(e.spot, e.state, e.amount) for e in events if isinstance(e, SpotChanged)] == [
        ("P1", SpotState.PLACED, 2500), ("T1", SpotState.PLACED, 500),
        ("P1", SpotState.LOCKED, 2500), ("T1", SpotState.LOCKED, 500),
        ("P1", SpotState.EMPTY, 0), ("T1", SpotState.EMPTY, 0)]
    buttons = [e.button for e in events if isinstance(e, DealerButton)]
    assert buttons == [Button.NO_MORE_BETS, Button.ROUND_END]
    assert not pads.locked


def test_presence_only_pads_report_unknown_amounts_and_cannot_see_a_change() -> None:
    pads = VirtualPads(["P1"], rfid=False)
    data = pads.place("P1", 1000)
    assert pads.place("P1", 5000) == b""  # capping on an occupied spot is invisible without RFID
    events = decode(data + pads.remove("P1"), "pads")
    assert [(e.state, e.amount) for e in events] == [(SpotState.PLACED, None), (SpotState.EMPTY, None)]
    assert pads.remove("P1") == b""


def test_past_posting_is_reported_after_no_more_bets() -> None:
    pads = VirtualPads(["P1", "B1"])
    phases = dict(pads.play_round({"P1": 1000}, past_post={"P1": 20000, "B1": 5000}))
    late = decode(phases["past_post"], "pads")
    assert [(e.spot, e.state, e.amount) for e in late] == [
        ("P1", SpotState.PLACED, 20000), ("B1", SpotState.PLACED, 5000)]
    with pytest.raises(ValueError, match="locked"):
        pads.past_post("P1", 100)


def test_pad_void_round_and_input_checks() -> None:
    pads = VirtualPads(["P1"])
    phases = pads.play_round({"P1": 100}, void=True)
    assert [n for n, _ in phases] == ["bets", "no_more_bets", "void_round", "clear"]
    assert decode(phases[2][1], "pads")[0].button is Button.VOID_ROUND
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ValueError):
            pads.place("P1", bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no spot"):
        pads.place("X9", 100)
    with pytest.raises(ValueError):
        VirtualPads([])
    with pytest.raises(ValueError):
        VirtualPads(["P1", "P1"])


def test_pads_answer_a_status_request_with_every_spot() -> None:
    pads = VirtualPads(["P1", "B1"], rfid=True)
    pads.place("B1", 700)
    events = decode(pads.answer(encode_status_request()), "pads")
    assert isinstance(events[0], DeviceIdentity)
    assert [(e.spot, e.state, e.amount) for e in events[1:]] == [
        ("P1", SpotState.EMPTY, 0), ("B1", SpotState.PLACED, 700)]


# -- faults -----------------------------------------------------------------------------------------


def test_fault_unreadable_rewrites_a_card_frame_with_the_same_seq() -> None:
    shoe = VirtualShoe(8, seed=1)
    shoe.new_shoe()
    frame = shoe.draw()
    (event,) = decode(faults.unreadable(frame))
    assert event == CardUnreadable("shoe", 1)
    with pytest.raises(ValueError):
        faults.unreadable(shoe.heartbeat())


def test_fault_ninth_ace_of_spades_from_eight_decks() -> None:
    shoe = VirtualShoe(8, seed=1)
    shoe.new_shoe()
    data = faults.impossible_card(shoe, "AS")
    aces = [e.card for e in decode(data) if isinstance(e, CardDrawn)]
    composition = ShoeComposition(8)
    with pytest.raises(CardNotInShoe):
        for card in aces:
            composition.take(card)
    assert len(aces) == 9


def test_fault_bad_checksum_split_and_repeat() -> None:
    shoe = VirtualShoe(8, seed=9)
    data = shoe.start_shoe() + shoe.deal(6)
    frames = faults.frames_of(data)
    frames[3] = faults.corrupt_checksum(frames[3])
    rng = random.Random(1)
    chunks = faults.split_random(faults.repeat_frames(b"".join(frames), rng, 0.5), rng, max_chunk=7)
    assert b"".join(chunks).count(b"$") > len(frames)
    codec = TsrefCodec("shoe")
    events = [e for c in chunks for e in codec.feed(c)]
    assert events == shoe.history[:3] + shoe.history[4:]
    assert codec.stats.bad_checksum >= 1
    assert codec.take_gaps()[0].expected == 3


def test_wrong_baud_capture_of_a_real_round_decodes_to_nothing() -> None:
    shoe = VirtualShoe(8, seed=4)
    data = shoe.status() + shoe.start_shoe() + shoe.deal_baccarat_round()
    for sent, read in ((9600, 19200), (19200, 9600)):
        codec = TsrefCodec("shoe")
        assert codec.feed(faults.wrong_baud(data, sent, read)) == []
        assert codec.stats.garbage_bytes > 0


# -- properties -------------------------------------------------------------------------------------


@settings(deadline=None, max_examples=40)
@given(st.integers(1, 8), st.integers(0, 2**32), st.sampled_from(["rule", 0, 3, None]),
       st.sampled_from([None, 1, 16, 40]))
def test_any_shoe_deals_out_exactly_its_cards_with_one_cut_card_and_an_empty_at_the_end(
        decks, seed, burn, cut) -> None:
    shoe = VirtualShoe(decks, seed=seed, burn=burn, cut_card_at=cut)
    data = shoe.start_shoe()
    while shoe.remaining:
        data += shoe.deal_baccarat_round()
    codec = TsrefCodec("shoe")
    events = codec.feed(data)
    assert events == shoe.history and codec.stats.dropped == 0 and codec.stats.seq_gaps == 0
    seen = [e.card for e in events if isinstance(e, CardDrawn)] + shoe.burned
    assert Counter(seen) == Counter({c: decks for c in ALL_CARDS})
    k = kinds(events)
    assert k.count("cut_card") == (1 if cut is not None else 0)
    if cut is not None:  # the cut card comes out with exactly `cut` cards behind it
        cards_after = sum(1 for x in k[k.index("cut_card"):] if x == "CardDrawn")
        assert cards_after == cut
    assert k[-1] == "empty" and k.count("empty") == 1


@settings(deadline=None, max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(["place", "remove", "nmb", "end", "clear", "void"]),
                          st.sampled_from(["P1", "P2", "B1"]), st.integers(1, 10**6)), max_size=40),
       st.booleans())
def test_any_pad_session_decodes_to_its_history_and_locks_every_occupied_spot(ops, rfid) -> None:
    pads = VirtualPads(["P1", "P2", "B1"], rfid=rfid)
    data = b""
    for op, spot, amount in ops:
        if op == "place":
            data += pads.place(spot, amount)
        elif op == "remove":
            data += pads.remove(spot)
        elif op == "nmb":
            data += pads.no_more_bets()
            assert all(pads.state[s] is SpotState.LOCKED for s in pads.spots if pads.bets[s] > 0)
        elif op == "end":
            data += pads.round_end()
        elif op == "void":
            data += pads.void_round()
        else:
            data += pads.clear()
            assert all(pads.state[s] is SpotState.EMPTY for s in pads.spots)
    events = TsrefCodec("pads").feed(data)
    assert events == pads.history
    amounts = {e.amount for e in events if isinstance(e, SpotChanged)}
    assert (amounts <= {None}) if not rfid else (None not in amounts)
