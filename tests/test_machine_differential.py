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
    'baccarat': '3a6ce68f8435102d90fc26db253db2bcc3a9900d4936bb1f57c83e8d011147f3',
    'ez-baccarat': 'cdbbf6868637047fa68ef66ea95f71fa4d8ef9c362f343c4e816c49e4d5274b2',
    'blackjack': '8e59f60601d5528720c852f4cbcde3da7b5520d940bd3700815a6a23e6110148',
    'uth': '13cb30c9f4b4b6f2c88a9e493ce2ecdb733e84b46719e30a9e3144f7281e507e',
}


@pytest.mark.parametrize("game", md.GAMES)
def test_machine_gives_the_reference_outputs(game: str) -> None:
    assert digest("tablesense", game) == GOLDEN[game]


if __name__ == "__main__":
    for g in md.GAMES:
        print(f"    {g!r}: {digest(sys.argv[1] if len(sys.argv) > 1 else 'tablesense_old', g)!r},")
