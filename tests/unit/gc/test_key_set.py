"""KeySet (spark_jobs/core/key_set.py): a set built once from Arrow columns, probed many times, exact."""

import random
import threading

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
