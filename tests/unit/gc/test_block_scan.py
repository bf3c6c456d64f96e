"""core.block_scan against the careful decoder, on range files a real lakeFS wrote (tests/fixtures/sstables/): every
entry the scan takes has the fingerprint of the address and type sstable.block_addresses reads at that place, and
a block it cannot walk is reported, never read wrong."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from spark_jobs.core import block_scan, sstable

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sstables"


def _blocks() -> list[bytes]:
    out = []
    for path in sorted(FIXTURES.glob("*.sst")):
        data = path.read_bytes()
        if sstable.read_properties(data).get("type") == b"ranges":
            out += list(sstable._Table(data).data_blocks())
    assert out
    return out


def _by_block(scan: block_scan.Scan) -> dict[int, list[tuple[int, int, int]]]:
    out: dict[int, list[tuple[int, int, int]]] = {}
    for f1, f2, b, e in zip(scan.fp1.tolist(), scan.fp2.tolist(), scan.block.tolist(), scan.entry.tolist(),
                            strict=True):
        out.setdefault(b, []).append((e, f1, f2))
    return {b: sorted(v) for b, v in out.items()}


def _agrees(blocks: list[bytes], scan: block_scan.Scan) -> int:
    """Check every block the scan took against the careful decoder; the number of entries checked."""
    taken = _by_block(scan)
    checked = 0
    for i, block in enumerate(blocks):
        if i in scan.irregular:
            assert i not in taken
            continue
        want = sstable.block_addresses(block)
        got = taken.get(i, [])
        assert [e for e, _, _ in got] == list(range(len(want))), f"block {i}: entries taken out of order"
        for (_, f1, f2), (address, kind) in zip(got, want, strict=True):
            assert (f1, f2) == block_scan.fingerprint(address.encode(), kind)
        checked += len(want)
    return checked


def test_scan_agrees_with_the_careful_decoder_on_real_ranges() -> None:
    blocks = _blocks()
    scan = block_scan.scan(blocks)
    assert _agrees(blocks, scan) >= 30
    # the fixtures hold entries of other shapes too (metadata, full addresses): those blocks are left to the
    # careful decoder, as its own fast loop leaves them
    assert scan.irregular and len(scan.irregular) < len(blocks)


def test_scan_of_each_block_alone_equals_the_scan_of_all() -> None:
    blocks = _blocks()
    together = _by_block(block_scan.scan(blocks))
    for i, block in enumerate(blocks):
        alone = block_scan.scan([block])
        assert _by_block(alone).get(0, []) == together.get(i, [])


@pytest.mark.parametrize("seed", range(40))
def test_a_damaged_block_is_reported_or_read_as_the_careful_decoder_reads_it(seed: int) -> None:
    rnd = random.Random(seed)
    blocks = _blocks()
    damaged = []
    for block in rnd.sample(blocks, 6):
        raw = bytearray(block)
        for _ in range(rnd.randint(1, 4)):
            at = rnd.randrange(len(raw))
            raw[at] = rnd.randrange(256)
        if rnd.random() < 0.3:
            raw = raw[:rnd.randrange(len(raw))]
        damaged.append(bytes(raw))
    scan = block_scan.scan(damaged)
    taken = _by_block(scan)
    for i, block in enumerate(damaged):
        if i in scan.irregular:
            continue
        want = sstable.block_addresses(block)  # the scan took it: the careful decoder must read the same
        assert [(f1, f2) for _, f1, f2 in taken.get(i, [])] == [
            block_scan.fingerprint(a.encode(), k) for a, k in want]


def test_fingerprints_tell_apart_any_byte_length_and_type() -> None:
    base = b"data/gabcdefghijklmnopqrst/cabcdefghijklmnopqrst"
    seen = {block_scan.fingerprint(base, 1)}
    for i in range(len(base)):
        changed = base[:i] + bytes([base[i] ^ 1]) + base[i + 1:]
        seen.add(block_scan.fingerprint(changed, 1))
    seen.add(block_scan.fingerprint(base[:-1], 1))
    seen.add(block_scan.fingerprint(base + b"\0", 1))
    seen.add(block_scan.fingerprint(base, 0))
    seen.add(block_scan.fingerprint(base, 2))
    assert len(seen) == len(base) + 5


def test_no_blocks_and_short_blocks() -> None:
    assert len(block_scan.scan([]).fp1) == 0
    scan = block_scan.scan([b"", b"\x00\x00", b"\x00\x00\x00\x00"])  # too short; no restarts; no entries
    assert len(scan.fp1) == 0
    assert set(scan.irregular) == {0, 1}
