"""The state machine gives what the machine before its per-input work was cut down gave, on input
sequences the golden tests do not reach: operator commands through ``handle_command`` with their
replies (``enter_card``, ``rescan`` keep and set_aside, ``void_round``, ``new_shoe``, ``ack_alarm``,
repeated command ids, unbound and wrongly bound commands), device restarts and lost links mid-round,
repeated cards after a lost link, burns and cut cards mid-shoe, wrong-role frames, ticks, rejected
inputs and replays after a restart, on the deploy examples and small tables of every game.

The sequences are those of the differential fuzzer (tests/tools/machine_differential.py: ``Feeder``
turns each action into an input), drawn from ``random.Random(i)``; the digests (every emit, command
reply, public round state, watchdog time and snapshot after every input) were recorded from the
reference machine with :func:`digest` (``PYTHONPATH`` holding the reference build as ``tablesense_old``),
and recorded again from this machine when a card set aside mid-deal (a sequence gap, a card the shoe
cannot hold) began to queue the cards after it until a supervisor resolves it (a change of behaviour on
such sequences, which every game's fuzzing reaches; tests/test_adversarial_gap_*.py)."""

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
    'baccarat': '79e936be318bbdf5e3c9dc3551d7277e7ab8d162fab0923abb9125eef7d67543',
    'ez-baccarat': 'f5049b2e57c56034c5d846d3218c8d3de97639d89a1bd445c37a06f9e158574c',
    'blackjack': '42814ef262e4665c306b0e4a037f7868d16317189f62626035b30cd488cfe71b',
    'uth': '98369704afbedc2ae38d1605065544d8f9cd5c58d1ff05b3ad7f02444b8688f9',
}


@pytest.mark.parametrize("game", md.GAMES)
def test_machine_gives_the_reference_outputs(game: str) -> None:
    assert digest("tablesense", game) == GOLDEN[game]


if __name__ == "__main__":
    for g in md.GAMES:
        print(f"    {g!r}: {digest(sys.argv[1] if len(sys.argv) > 1 else 'tablesense_old', g)!r},")
