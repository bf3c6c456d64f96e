"""KeySet (spark_jobs/core/key_set.py): a set built once from Arrow columns, probed many times, exact."""

import random
import threading

import numpy as np
import pyarrow as pa
import pytest

from spark_jobs.core import key_set, range_arrow
from spark_jobs.core.key_set import KeySet


@pytest.fixture(params=["compiled", "arrow"])
def backend(request, monkeypatch):
    if request.param == "compiled":
        assert range_arrow.compiled(), "lakefs_rangewalk did not build: run scripts/install.sh"
    else:
        monkeypatch.setattr(range_arrow, "_native", None)
    return request.param


def _words(rng: random.Random, n: int, alphabet: str = "ab/é") -> list[str]:
    # short words over a small alphabet: many equal strings, prefixes of one another, empty ones
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(12))
def test_holds_what_a_python_set_holds(backend, seed):
    rng = random.Random(seed)
    built, asked = _words(rng, rng.randint(0, 400)), _words(rng, rng.randint(0, 400))
    # the set from several chunks, some sliced (offsets not starting at 0), some empty
    cut = sorted(rng.sample(range(len(built) + 1), k=min(3, len(built) + 1)))
    chunks = [pa.array(built[a:b]) for a, b in zip([0, *cut], [*cut, len(built)], strict=True)]
    padded = pa.array(["pad", *built[:5], "pad"]).slice(1, len(built[:5]))
    keys = KeySet(pa.chunked_array([*chunks, padded], pa.string()))
    assert len(keys) == len(set(built))
    probe = pa.array(["x", *asked]).slice(1)
    assert keys.holds(probe).to_pylist() == [a in set(built) for a in asked]


def test_binary_large_and_null_rows(backend):
    keys = KeySet(pa.array([b"\x00a", b"", None, b"\xff" * 40], pa.large_binary()))
    assert len(keys) == 3
    asked = pa.array([b"\x00a", b"\x00", None, b"", b"\xff" * 40, b"\xff" * 39], pa.binary())
    assert keys.holds(asked).to_pylist() == [True, False, False, True, True, False]
    assert keys.holds(pa.chunked_array([asked.slice(0, 2), asked.slice(2)])).to_pylist() == \
        [True, False, False, True, True, False]
    assert keys.holds(pa.array([], pa.string())).to_pylist() == []
    assert KeySet(pa.array([], pa.string())).holds(pa.array(["a", ""])).to_pylist() == [False, False]
    # a list of arrays of different widths, as several tables' key columns
    mixed = KeySet([pa.array(["a"], pa.large_string()), pa.chunked_array([["b"], ["c", "a"]]), pa.array([], "string")])
    assert len(mixed) == 3 and mixed.holds(pa.array(["c", "d", "a"])).to_pylist() == [True, False, True]


def test_many_threads_probe_one_set(backend):
    rng = random.Random(7)
    built = [f"data/{rng.getrandbits(64):016x}" for _ in range(20_000)]
    keys = KeySet(pa.array(built))
    asked = [pa.array(rng.sample(built, 500) + [f"data/{i:x}" for i in range(500)]) for _ in range(8)]
    results = [None] * len(asked)

    def probe(i):
        results[i] = keys.holds(asked[i]).to_pylist()

    threads = [threading.Thread(target=probe, args=(i,)) for i in range(len(asked))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == [True] * 500 + [False] * 500 for r in results)


def test_refuses_what_is_not_strings():
    with pytest.raises(TypeError, match="strings or byte strings"):
        KeySet(pa.array([1, 2]))
    assert key_set.KeySet(pa.array(["a"])).holds(pa.array(["a"])).to_pylist() == [True]


def test_hashes_are_equal_for_equal_strings_and_none_without_the_compiled_module(monkeypatch):
    assert range_arrow.compiled(), "lakefs_rangewalk did not build: run scripts/install.sh"
    rng = random.Random(5)
    words = _words(rng, 300)
    values = pa.chunked_array([pa.array(words[:100]), pa.array(["pad", *words[100:]]).slice(1)])
    got = key_set.hashes(values)
    assert got.dtype.name == "uint64" and len(got) == len(words)
    by_word: dict[str, int] = {}
    for word, h in zip(words, got.tolist(), strict=True):
        assert by_word.setdefault(word, h) == h
    assert len(set(by_word.values())) == len(by_word)  # no collision among these few
    assert key_set.hashes(pa.array(words, pa.binary()).cast(pa.large_binary())).tolist() == got.tolist()
    monkeypatch.setattr(range_arrow, "_native", None)
    assert key_set.hashes(values) is None


_K1, _K2, _MASK = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, (1 << 64) - 1


def _state_after_first_word(data: bytes) -> int:
    # native/hash.h's hash_bytes (seed 0) over the first 8 bytes of a 16-byte string: the state its second word meets
    h = (len(data) * _K1) & _MASK
    h = ((h ^ int.from_bytes(data[:8], "little")) * _K2) & _MASK
    return h ^ (h >> 29)


def test_strings_whose_hashes_collide_are_told_apart():
    """Each step of the hash is a bijection of its state, so a second word can undo any first one: two different
    16-byte strings with one hash. The set must compare their bytes (a hash-only match would call a kept key
    reached)."""
    assert range_arrow.compiled(), "lakefs_rangewalk did not build: run scripts/install.sh"
    one = b"data/aaaaaaaa/01"
    first = b"data/zzz"
    second = (int.from_bytes(one[8:], "little") ^ _state_after_first_word(one) ^ _state_after_first_word(first + one[8:]))
    other = first + second.to_bytes(8, "little")
    assert other != one
    pair = key_set.hashes(pa.array([one, other], pa.binary()))
    assert pair[0] == pair[1], "the collision was not built: hash.h changed, rebuild it here"
    keys = KeySet(pa.array([one], pa.binary()))
    assert keys.holds(pa.array([other, one], pa.binary())).to_pylist() == [False, True]
    both = KeySet(pa.array([one, other, one], pa.binary()))
    assert len(both) == 2 and both.holds(pa.array([other, b"x" * 16], pa.binary())).to_pylist() == [True, False]


def test_the_compiled_set_refuses_columns_that_lie():
    assert range_arrow.compiled(), "lakefs_rangewalk did not build: run scripts/install.sh"
    native = range_arrow._native  # noqa: SLF001
    good = pa.array(["ab", "c"])
    offsets, data = good.buffers()[1], good.buffers()[2]
    backwards = pa.py_buffer(np.array([0, 3, 1], np.int32).tobytes())
    for column, message in [((offsets, data, 0, 3), "shorter than its count"),
                            ((offsets, data, 2**63 - 2, 2), "shorter than its count"),
                            ((offsets, data, -1, 1), "shorter than its count"),
                            ((backwards, b"abc", 0, 2), "go backwards"),
                            ((offsets, b"a", 0, 2), "run past its bytes")]:
        with pytest.raises(ValueError, match=message):
            native.keyset([column])
        with pytest.raises(ValueError, match=message):
            native.holds(native.keyset([]), column)
