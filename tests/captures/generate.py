"""Regenerate the synthetic captures in this directory from the simulators (deterministic, seeded).

Run ``.venv/bin/python tests/captures/generate.py`` from the repository root, then regenerate the golden
transcripts with ``TABLESENSE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_captures.py`` and
review the diff. Captures recorded from real devices with ``tablesense capture`` go here too (they are
not generated; this script never touches files it does not list).
"""

from __future__ import annotations

import random
from pathlib import Path

from tablesense.drivers.protocols.tsref import encode_ack, encode_status_request
from tablesense.simulators import faults
from tablesense.simulators.capture_format import Capture, CaptureChunk, save
from tablesense.simulators.pads import VirtualPads
from tablesense.simulators.shoe import VirtualShoe

HERE = Path(__file__).parent


def paced(frames: list[bytes], pace: float, start: float = 0.0) -> list[CaptureChunk]:
    """One chunk per frame, ``pace`` seconds apart."""
    return [CaptureChunk(round(start + i * pace, 6), f) for i, f in enumerate(frames)]


def clean_round() -> Capture:
    shoe = VirtualShoe(8, seed=20261129, serial="VS-CLEAN")
    data = shoe.answer(encode_status_request()) + shoe.start_shoe()
    data += shoe.deal_baccarat_round() + shoe.heartbeat() + shoe.deal_baccarat_round()
    return Capture("shoe", "tsref", "two clean baccarat rounds from a seeded 8-deck shoe: status answer, "
                   "new shoe, burn (first card face up, its value more face down), cards, heartbeat",
                   {"serial": "9600 8N1", "source": "simulators.shoe.VirtualShoe(8, seed=20261129)"},
                   paced(faults.frames_of(data), 0.75))


def noisy_shoe() -> Capture:
    rng = random.Random(7)
    shoe = VirtualShoe(8, seed=99, burn=2, serial="VS-NOISY", start_seq=99990)
    frames = faults.frames_of(shoe.start_shoe())            # NS 99990, BN 99991, BN 99992
    frames[2] = faults.corrupt_checksum(frames[2])          # a burn frame with a bad checksum
    frames += faults.frames_of(shoe.draw())                 # CD 99993
    frames.append(shoe.unknown_frame("ZZ", "vendor-extension"))  # 99994: a type this codec does not know
    frames.append(faults.unreadable(shoe.draw()))           # CU 99995: the shoe could not read a card
    frames.append(b"$CD,99996," + b"9" * 150 + b"*00\r\n")  # an over-long line
    card = shoe.draw()
    frames += [card, card]                                  # CD 99996 and its retransmission
    frames += faults.frames_of(shoe.draw())                 # CD 99997
    shoe.draw()                                             # CD 99998 lost on the line: a sequence gap
    frames += faults.frames_of(shoe.deal(3))                # CD 99999, 00000, 00001 (the count wraps)
    data = frames[0][7:] + b"".join(frames[1:]) + b"\x00\xff line noise \x07"  # capture starts mid-frame
    data = faults.insert_garbage(data, rng, probability=0.3, max_len=12)
    chunks = faults.split_random(data, rng, max_chunk=23)
    return Capture("shoe", "tsref", "noisy line: opened mid-frame, garbage between frames, reads split "
                   "anywhere, a bad checksum, an unknown type, an unreadable card, an over-long line, a "
                   "duplicate, a lost frame; sequence numbers wrap 99999 -> 00000",
                   {"serial": "9600 8N1", "source": "tests/captures/generate.py noisy_shoe()"},
                   paced(chunks, 0.05))


def pads_session() -> Capture:
    pads = VirtualPads(["P1", "P2", "B1", "T1"], rfid=True, serial="VP-TABLE7")
    frames = faults.frames_of(pads.answer(encode_status_request()))
    for _phase, data in pads.play_round({"P1": 2500, "B1": 10000}):
        frames += faults.frames_of(data)
    for _phase, data in pads.play_round({"P2": 500, "T1": 100}, past_post={"P2": 50000}):
        frames += faults.frames_of(data)
    frames += faults.frames_of(pads.answer(encode_ack(3)))  # an ack: no reply
    for _phase, data in pads.play_round({"P1": 1000}, void=True):
        frames += faults.frames_of(data)
    return Capture("pads", "tsref", "RFID bet pads, three rounds: a normal round, a round where P2 goes "
                   "from 500 to 50000 after no more bets (past-posting), a voided round",
                   {"serial": "9600 8N1", "source": "tests/captures/generate.py pads_session()"},
                   paced(frames, 0.4))


def wrong_baud() -> Capture:
    shoe = VirtualShoe(8, seed=5, serial="VS-BAUD")
    data = shoe.answer(encode_status_request()) + shoe.start_shoe() + shoe.deal_baccarat_round()
    garbled = faults.wrong_baud(data, sent_baud=9600, read_baud=19200)
    return Capture("shoe", "tsref", "port opened at 19200 baud while the shoe sends at 9600: every byte is "
                   "mangled, no frame survives (expect zero events and garbage counted)",
                   {"serial": "19200 8N1 (device at 9600)",
                    "source": "simulators.faults.wrong_baud(9600 -> 19200)"},
                   paced(faults.split_random(garbled, random.Random(3), max_chunk=32), 0.1))


def impossible_card() -> Capture:
    shoe = VirtualShoe(1, cards=["AS", "KH", "2D", "7C", "9S"], serial="VS-1DECK")
    data = shoe.new_shoe() + shoe.deal(3) + faults.impossible_card(shoe, "AS") + shoe.deal(2)
    return Capture("shoe", "tsref", "single-deck shoe reports a second ace of spades: the codec delivers "
                   "it (it cannot know), the round logic must reject it as a card the shoe cannot hold",
                   {"serial": "9600 8N1", "source": "tests/captures/generate.py impossible_card()"},
                   paced(faults.frames_of(data), 0.6))


CAPTURES = {
    "baccarat_clean": clean_round,
    "shoe_noisy": noisy_shoe,
    "pads_past_posting": pads_session,
    "shoe_wrong_baud": wrong_baud,
    "shoe_impossible_card": impossible_card,
}


def main() -> None:
    for name, make in CAPTURES.items():
        path = HERE / f"{name}.cap"
        save(path, make())
        print(path)


if __name__ == "__main__":
    main()
