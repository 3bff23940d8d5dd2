"""The state machine's emits are byte-for-byte what they were: the inputs of the machine bench
(benchmarks/bench_machine.py: the simulators' shoe and pads decoded by the tsref codec, stamped as the
daemon stamps them) for a few hundred rounds of each game, fed to a fresh machine, give the emits (topic,
flags and JSON of every message) and the final :meth:`~daemon.table.TableMachine.snapshot` whose SHA-256
digests were recorded from the machine before its per-input work was cut down.

The inputs themselves are checked first (their digest, and the config's): when the simulators or the
example configs change, the bench makes other inputs and the golden digests must be recorded again, from
a machine known to be right (``git stash`` is not used: check the known-good commit out in a worktree and
run :func:`digests` there)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import msgspec
import pytest

from tablesense.daemon.table import TableMachine

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_machine.py"


def _bench() -> ModuleType:
    name = "tablesense_bench_machine"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def digests(game: str, rounds: int, random_wagers: bool, seed: int) -> tuple[str, str, int, str]:
    """(inputs digest, emits digest, number of emits, final snapshot digest) of one bench run."""
    bench = _bench()
    config = bench.bench_config(game)
    made = bench.bench_rounds(config, rounds, seed=seed, random_wagers=random_wagers)
    inputs = hashlib.sha256()
    for name in config.__struct_fields__:  # all but [mqtt], whose client id varies with the hash seed
        if name != "mqtt":
            inputs.update(repr(getattr(config, name)).encode())
    for r in made:
        for inp in r.inputs:
            inputs.update(repr(inp).encode())
    machine = TableMachine(config)
    emits = hashlib.sha256()
    n = 0
    for r in made:
        for inp in r.inputs:
            for e in machine.handle(inp):
                emits.update(bench.encode_emit(e))
                emits.update(b"\n")
                n += 1
    snapshot = hashlib.sha256(msgspec.json.encode(machine.snapshot())).hexdigest()
    return inputs.hexdigest(), emits.hexdigest(), n, snapshot


GOLDEN = [
    # game, rounds, random wagers, seed, inputs, emits, number of emits, final snapshot
    ('baccarat', 300, False, 7, '6d8c4e6eaf750c329f4e2aa876cee756efdefd8e1cfbe8dce5323974d063d032',
     '72f3089c852b80e84abd891f0b7901d15cd62e9ee7cb4c6680e22ccdcdf6d5e8', 8142,
     '20d9de4f96e36ab9f6f37f55477392f4c207e3be32104dd38f43f0c9c1405e44'),
    ('baccarat', 300, True, 11, '29ad18d85dc13e3e367ea60bcab791e9e54f466361ed085d61a5bfc72ac11631',
     '58cd004f87e78746ef391003d2f14425331701c4230f9856f42d6c6c8b853897', 4407,
     'd7abf3e21c995adeb1956e2b0f2e37b2ae80f708e4c6c144d88c25d6e5b3bcc7'),
    ('ez-baccarat', 200, True, 5, '1861a794458f633f609960dc27ae11691d468d9acb6a93ac97c7671d8ef3b546',
     'ff8651b0b7ac956e8b12caa47852f7345e48ab0bba06205b238eec6861a4c956', 2598,
     '39ed0396978303a05d0be92b3158cdd67e8dbf3c5eabe9d789eb9bd668aebf48'),
    ('blackjack', 150, True, 3, '61e1d635fc9fa92fc38de61d4a73836f0de8b9277e896d37f629f384d01f50ff',
     'e096027097962f6edaaa47d7002ecaefe610ac38e0ca43f65f37afb5169bf512', 2300,
     'a939d7087cce0ae659726f085920ca128d18d28c125414b9b45e02f7941530bf'),
    ('uth', 100, True, 9, '7b532cd27cad6730811ffd2d9ea522ba8dd6d32856e2afbfe068c6bb0f081830',
     '63d8f8e1d3a928da435ec2be7e70200c4be8047a96f07b1ead273af0a8254e43', 2096,
     'a9b6d73fcba40a5feb31820859543af7fee8f4d235900e23439c2502322989a8'),
]


@pytest.mark.parametrize(("game", "rounds", "random_wagers", "seed", "inputs", "emits", "n", "snapshot"),
                         GOLDEN, ids=[f"{g[0]}-{g[1]}-{'random' if g[2] else 'every'}" for g in GOLDEN])
def test_emits_are_byte_identical_to_the_recorded_ones(game: str, rounds: int, random_wagers: bool,
                                                        seed: int, inputs: str, emits: str, n: int,
                                                        snapshot: str) -> None:
    got = digests(game, rounds, random_wagers, seed)
    assert got[0] == inputs, ("the bench made other inputs (simulators or example config changed): "
                              "record the golden digests again from a known-good machine")
    assert got[1:] == (emits, n, snapshot)
