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
such sequences, which every game's fuzzing reaches; tests/test_adversarial_gap_*.py), and again when the
shoe's restart and a rejected card frame mid-deal began to stop the deal the same way, and when a card
the shoe cannot hold that carries a gap began to raise the gap too and stop the deal at the lost frames
first, and when the blackjack and UTH round-end button pressed while cards waited behind a held card
began to take effect in its place among them, and when a no-more-bets pressed on a held round began to
wait, with every later device frame, until the round is resolved, and when chips moved once the dealer
has ended a held round began to wait for it too, and when a new shoe loaded while frames waited began
to end the wait instead of waiting too, and when the command that completes a round began to be in that
round's published floor record (with each new rule off, the digests were the ones
recorded before; tests/test_adversarial_restart_mid_deal.py, tests/test_adversarial_gap_order.py,
tests/test_adversarial_round_end_held.py, tests/test_adversarial_nmb_held.py,
tests/test_adversarial_chips_after_held_round_end.py)."""

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
'baccarat': 'ccef4b17ccfdc08981475c712f6f851ac8dfa239b49b31725557a153e3e24c6a',
    'ez-baccarat': 'be44ef03d27a749fa60ccf4588b3758944118f9529883b769be241951d041403',
    'blackjack': '26267e1bb2aca77e48805be4e11bc35e9eaae3ac88cf632bf0bf5379da3a728d',
    'uth': '5d7160f1d38074b4fdacc1adebc952293c4cec43a779882c4039f775efed3db2',
}


@pytest.mark.parametrize("game", md.GAMES)
def test_machine_gives_the_reference_outputs(game: str) -> None:
    assert digest("tablesense", game) == GOLDEN[game]


if __name__ == "__main__":
    for g in md.GAMES:
        print(f"    {g!r}: {digest(sys.argv[1] if len(sys.argv) > 1 else 'tablesense_old', g)!r},")
