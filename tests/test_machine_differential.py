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
    'baccarat': '88193cd1eaf5715069cc51c7760370d025d6ee4b197d99d4d6469e047101dafe',
    'ez-baccarat': 'd292c89b7c603c81e0e3d9ef982c47ac76972aa279edf4c58c582f34147b7d10',
    'blackjack': '52d81f15e325a44cf003434a749bb3af5c19efb977c2957d5e19eefdffc236ba',
    'uth': '43b1fc0266a78263bc4424ef70d49451fe0fba89d341f91c49459e34427f42d7',
}


@pytest.mark.parametrize("game", md.GAMES)
def test_machine_gives_the_reference_outputs(game: str) -> None:
    assert digest("tablesense", game) == GOLDEN[game]


if __name__ == "__main__":
    for g in md.GAMES:
        print(f"    {g!r}: {digest(sys.argv[1] if len(sys.argv) > 1 else 'tablesense_old', g)!r},")
