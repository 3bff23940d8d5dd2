"""The state machine gives what the machine before its per-input work was cut down gave, on input
sequences the golden tests do not reach: operator commands through ``handle_command`` with their
replies (``enter_card``, ``rescan`` keep and set_aside, ``void_round``, ``new_shoe``, ``ack_alarm``,
repeated command ids, unbound and wrongly bound commands), device restarts and lost links mid-round,
repeated cards after a lost link, burns and cut cards mid-shoe, wrong-role frames, ticks, rejected
inputs and replays after a restart, on the deploy examples and small tables of every game.

The sequences are those of the differential fuzzer (tests/tools/machine_differential.py: ``Feeder``
turns each action into an input), drawn from ``random.Random(i)``; the digests (every emit, command
reply, public round state, watchdog time and snapshot after every input) were recorded from the
reference machine with :func:`digest` (``PYTHONPATH`` holding the reference build as ``tablesense_old``)."""

from __future__ import annotations

import hashlib
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))

import machine_differential as md

SEQUENCES = 24
"""Sequences per game (each on config ``i % n`` of the game's configs, every fourth one calm)."""


def digest(pkg: str, game: str, sequences: int = SEQUENCES) -> str:
    b = md.build(pkg)
    texts = md.config_texts(game)
    h = hashlib.sha256()
    for i in range(sequences):
        r = random.Random(i)
        side = md.Side(b, texts[i % len(texts)], calm=i % 4 == 0)
        for _ in range(r.randint(40, 200)):
            h.update(repr(side.step((r.randint(0, 999), r.randint(0, 2**16), r.randint(0, 2**16)))).encode())
    return h.hexdigest()


GOLDEN = {
    'baccarat': 'badc0d494abc91783f0f6bbc7e700fff6ca71abf099facc7eba0fd1616c7cb12',
    'ez-baccarat': 'a0628ca60513f501097bd47d34f706416ac8b0df40aa5d84e4467acfb12adf55',
    'blackjack': '81556f9c141d237170aa2742a13eec838f5ed2982e376bd2b57b91c09406557e',
    'uth': '95425bf7e2b18688073024688166167d3f817bb1ab13bdf4ce91c481768b30e8',
}


@pytest.mark.parametrize("game", md.GAMES)
def test_machine_gives_the_reference_outputs(game: str) -> None:
    assert digest("tablesense", game) == GOLDEN[game]


if __name__ == "__main__":
    for g in md.GAMES:
        print(f"    {g!r}: {digest(sys.argv[1] if len(sys.argv) > 1 else 'tablesense_old', g)!r},")
