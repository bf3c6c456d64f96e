"""The compiled range walk (core/range_arrow.py over native/rangewalk.c) against the careful decoder: the same rows on
ranges a real lakeFS wrote (tests/fixtures/sstables/), on blocks of every shape the careful decoder reads, and on
damaged files and blocks (both refuse, or both give the same rows)."""

from __future__ import annotations

import array
import random
from pathlib import Path

import cramjam
import pyarrow as pa
import pytest

from spark_jobs.core import range_arrow, sstable
from spark_jobs.core.sstable import SSTableError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sstables"
ROUNDS = 400  # per seed; each seed is its own test


def lakefs_ranges() -> dict[str, bytes]:
    out = {}
    for path in sorted(FIXTURES.glob("*.sst")):
        data = path.read_bytes()
        if sstable.read_properties(data).get("type") == b"ranges":
            out[path.stem] = data
    return out


def careful_blocks(buf: bytes, ends: array.array) -> pa.RecordBatch:
    """The reference for a joined buffer: the careful decoder, block by block."""
    out: list[tuple[bytes, str, int, int]] = []
    for i in range(len(ends)):
        sstable._block_entries_fast(bytes(buf[ends[i - 1] if i else 0:ends[i]]), out)  # noqa: SLF001
    return range_arrow._from_entries(out)  # noqa: SLF001


def outcome(decode, *args):
    try:
        return decode(*args)
    except SSTableError:
        return SSTableError


def test_the_compiled_walk_is_installed():
    assert range_arrow.compiled(), "lakefs_rangewalk did not build: run scripts/install.sh"


@pytest.mark.parametrize("range_id", sorted(lakefs_ranges()))
def test_lakefs_written_ranges_decode_as_the_careful_decoder_does(range_id):
    data = lakefs_ranges()[range_id]
    fast = range_arrow.range_batch(data)
    assert fast.schema == range_arrow.RANGE_SCHEMA
    assert fast.equals(range_arrow.careful_batch(data))
    assert fast.to_pylist() == [dict(path=e.path, address=e.address, address_type=e.address_type, size=e.size)
                                for e in sstable.iter_entries(data)]


@pytest.mark.parametrize("blocks", [1, 2, 512])
def test_a_range_read_a_group_of_blocks_at_a_time_is_the_whole_range(blocks):
    for data in lakefs_ranges().values():
        groups = list(range_arrow.range_batch_groups(data, blocks))
        whole = range_arrow.range_batch(data)
        assert pa.Table.from_batches(groups, schema=range_arrow.RANGE_SCHEMA).equals(
            pa.Table.from_batches([whole], schema=range_arrow.RANGE_SCHEMA))
        assert all(g.num_rows for g in groups)


@pytest.mark.parametrize("blocks", [1, 2, 3])
def test_numbered_groups_are_the_range_and_only_decodes_the_groups_asked_for(blocks, monkeypatch):
    """A range's groups, numbered from 0, are its entries in order; a second read by group numbers gives those
    groups' rows and walks no other block (what keep_versions' second pass relies on)."""
    rnd = random.Random(blocks)
    walked: list[list[tuple[int, int]]] = []
    real = range_arrow.blocks_batch

    def counted(table, handles):
        walked.append(list(handles))
        return real(table, handles)

    monkeypatch.setattr(range_arrow, "blocks_batch", counted)
    for data in lakefs_ranges().values():
        _, handles, _ = sstable.block_keys(data)
        walked.clear()
        numbered = list(range_arrow.numbered_batch_groups(data, blocks))
        assert [n for n, _ in numbered] == list(range(-(-len(handles) // blocks)))
        assert pa.Table.from_batches([b for _, b in numbered], schema=range_arrow.RANGE_SCHEMA).equals(
            pa.Table.from_batches([range_arrow.range_batch(data)], schema=range_arrow.RANGE_SCHEMA))
        only = set(rnd.sample(range(len(numbered)), rnd.randint(0, len(numbered))))
        walked.clear()
        picked = list(range_arrow.numbered_batch_groups(data, blocks, only=only))
        assert [n for n, _ in picked] == sorted(only)
        assert all(b.equals(numbered[n][1]) for n, b in picked)
        assert walked == [handles[n * blocks:(n + 1) * blocks] for n in sorted(only)]


def test_the_walk_takes_every_block_of_lakefs_written_ranges_itself():
    """No block of a lakeFS-written range (long Hive-style paths included) falls back to the careful decoder."""
    import lakefs_rangewalk  # noqa: PLC0415

    for data in lakefs_ranges().values():
        table, handles, _ = sstable.block_keys(data)
        buf, ends = sstable.joined_blocks(table, handles)
        assert lakefs_rangewalk.walk(buf, ends, 0)[-1] == len(handles)


@pytest.mark.parametrize("seed", range(4))
def test_damaged_files_are_refused_or_read_as_the_careful_decoder_reads_them(seed):
    rng = random.Random(seed)
    files = list(lakefs_ranges().values())
    for _ in range(ROUNDS // 4):
        data = bytearray(rng.choice(files))
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        damaged = bytes(data)
        fast = outcome(range_arrow.range_batch, damaged)
        careful = outcome(range_arrow.careful_batch, damaged)
        assert fast is careful or (fast is not SSTableError and careful is not SSTableError and fast.equals(careful))


@pytest.mark.parametrize("seed", range(8))
def test_damaged_blocks_behind_a_good_checksum_are_walked_as_the_careful_decoder_walks_them(seed):
    """Damage the checksum does not see (a writer's bug, a block rebuilt): flipped, dropped or repeated bytes in
    the decompressed blocks themselves."""
    rng = random.Random(seed)
    files = list(lakefs_ranges().values())
    for _ in range(ROUNDS):
        table, handles, _ = sstable.block_keys(rng.choice(files))
        buf, ends = sstable.joined_blocks(table, handles)
        i = rng.randrange(len(ends))
        start, end = (ends[i - 1] if i else 0), ends[i]
        block = bytearray(buf[start:end])
        how = rng.random()
        if how < 0.6:
            for _ in range(rng.randint(1, 4)):
                block[rng.randrange(len(block))] = rng.randrange(256)
        elif how < 0.8:
            at = rng.randrange(len(block))
            del block[at:at + rng.randint(1, 8)]
        else:
            at = rng.randrange(len(block))
            block[at:at] = block[at:at + rng.randint(1, 40)]
        damaged = bytes(buf[:start]) + bytes(block) + bytes(buf[end:])
        shift = len(block) - (end - start)
        new_ends = array.array("q", [e if j < i else e + shift for j, e in enumerate(ends)])
        fast = outcome(range_arrow.joined_batch, damaged, new_ends)
        careful = outcome(careful_blocks, damaged, new_ends)
        assert fast is careful or (fast is not SSTableError and careful is not SSTableError and fast.equals(careful))


# --- blocks of every shape the careful decoder reads, built here -------------------------------------------------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append(n & 0x7F | 0x80)
        n >>= 7


def field(num: int, wire: int, payload: bytes | int) -> bytes:
    tag = uvarint(num << 3 | wire)
    if wire == 0:
        return tag + uvarint(payload)
    if wire == 2:
        return tag + uvarint(len(payload)) + payload
    return tag + payload  # fixed width, as given


def text(rng: random.Random, n: int, *, odd: float) -> bytes:
    chars = "abcdefghijklmnopqrstuvwxyz0123456789/=-_."
    s = "".join(rng.choice(chars) for _ in range(n))
    if rng.random() < odd:
        s += rng.choice(["é", "日本", "𝄞", "\u00a0"])
    raw = s.encode()
    if rng.random() < odd / 40:
        raw += rng.choice([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"])
    return raw


def entry_value(rng: random.Random, odd: float) -> bytes:
    """A graveler value holding a catalog.Entry, in lakeFS's usual shape or, with probability ``odd`` per choice,
    another valid (or slightly wrong) encoding."""
    address = text(rng, rng.choice([20, 44, 60, 130, 300]) if rng.random() < odd else 44, odd=odd)
    fields = [field(1, 2, address)]
    if rng.random() < 0.9:
        fields.append(field(2, 2, field(1, 0, rng.randrange(1 << 31)) + field(2, 0, rng.randrange(10 ** 9))))
    if rng.random() < 0.9:
        size = rng.choice([0, 1, 200, 1 << 20, 1 << 40, (1 << 63) - 1]) if rng.random() < odd else rng.randrange(5000)
        fields.append(field(3, 0, size))
    if rng.random() < 0.9:
        fields.append(field(4, 2, text(rng, 32, odd=odd)))
    for _ in range(rng.choice([0, 0, 1, 3])):
        fields.append(field(5, 2, field(1, 2, text(rng, rng.choice([3, 200]), odd=odd)) +
                            field(2, 2, text(rng, rng.choice([5, 150]), odd=odd))))
    if rng.random() < 0.9:
        fields.append(field(6, 0, rng.choice([1, 2, 0, 5, 127, 128, 300]) if rng.random() < odd / 4 else 1))
    if rng.random() < 0.8:
        fields.append(field(7, 2, text(rng, 24, odd=odd)))
    if rng.random() < odd:
        rng.shuffle(fields)
    if rng.random() < odd / 4:
        fields.append(rng.choice([field(9, 0, 7), field(10, 2, b"x" * 9), field(11, 1, b"\0" * 8),
                                  field(12, 5, b"\0" * 4), field(3, 1, b"\1" * 8), field(6, 2, b"z"),
                                  field(1, 0, 4), bytes([0x0B])]))
    entry = b"".join(fields)
    identity = bytes(rng.randrange(256) for _ in range(32 if rng.random() >= odd else rng.choice([0, 5, 64])))
    return uvarint(2 * len(identity)) + identity + uvarint(2 * len(entry)) + entry


def block(entries: list[tuple[bytes, bytes]], restart_interval: int = 16) -> bytes:
    """A data block as pebble writes it: prefix-compressed keys, restart points, their count."""
    out, restarts, last = bytearray(), [], b""
    for i, (key, value) in enumerate(entries):
        if i % restart_interval == 0:
            restarts.append(len(out))
            shared = 0
        else:
            shared = 0
            while shared < min(len(key), len(last)) and key[shared] == last[shared]:
                shared += 1
        out += uvarint(shared) + uvarint(len(key) - shared) + uvarint(len(value)) + key[shared:] + value
        last = key
    for r in restarts:
        out += r.to_bytes(4, "little")
    return bytes(out + len(restarts).to_bytes(4, "little"))


def random_blocks(rng: random.Random, odd: float) -> tuple[bytes, array.array]:
    parts = []
    for _ in range(rng.randint(1, 4)):
        n = rng.randint(1, 40)
        stem = b"tables/t%d/dt=2026-01-%02d/" % (rng.randrange(3), rng.randrange(30))
        if rng.random() < odd:
            stem = b"warehouse/" + b"long_partition_name=value/" * rng.randint(3, 12)
        keys = sorted({stem + b"part-%05d.parquet" % rng.randrange(10 ** 5) for _ in range(n)})
        trailer = (rng.randrange(1 << 40) << 8 | 1).to_bytes(8, "little")
        if rng.random() < odd / 4:
            trailer = b"\x00" + trailer[1:]  # kind DELETE: lakeFS writes only SET
        parts.append(block([(k + trailer, entry_value(rng, odd)) for k in keys]))
    ends = array.array("q")
    pos = 0
    for p in parts:
        pos += len(p)
        ends.append(pos)
    return b"".join(parts), ends


@pytest.mark.parametrize("odd", [0.0, 0.05, 0.3])
@pytest.mark.parametrize("seed", range(4))
def test_blocks_of_every_shape_walk_as_the_careful_decoder_reads_them(seed, odd):
    rng = random.Random(seed * 1000 + int(odd * 100))
    took = 0
    for _ in range(ROUNDS // 2):
        buf, ends = random_blocks(rng, odd)
        fast = outcome(range_arrow.joined_batch, buf, ends)
        careful = outcome(careful_blocks, buf, ends)
        assert fast is careful or (fast is not SSTableError and careful is not SSTableError and fast.equals(careful))
        took += fast is not SSTableError
    assert took  # not every case refused: the comparison compared rows


def test_a_range_of_snappy_blocks_rebuilt_with_good_checksums_decodes_the_same():
    """The joined buffer is what the careful decoder's blocks are, for files whose blocks are stored raw too."""
    for data in lakefs_ranges().values():
        table, handles, _ = sstable.block_keys(data)
        buf, ends = sstable.joined_blocks(table, handles)
        assert [bytes(buf[ends[i - 1] if i else 0:ends[i]]) for i in range(len(ends))] == list(table.data_blocks())
        assert cramjam.snappy  # the binding the quick path uses


def test_without_the_compiled_walk_the_careful_decoder_decodes_and_says_so(monkeypatch, caplog):
    monkeypatch.setattr(range_arrow, "_native", None)
    monkeypatch.setattr(range_arrow, "_told", set())
    for data in lakefs_ranges().values():
        assert range_arrow.range_batch(data).equals(range_arrow.careful_batch(data))
    assert "careful decoder" in caplog.text


# --- the compiled module's CRC32C and Snappy against the bindings the careful decoder uses ------------------------


@pytest.mark.parametrize("seed", range(3))
def test_the_compiled_crc32c_is_google_crc32c(seed):
    import google_crc32c  # noqa: PLC0415
    import lakefs_rangewalk  # noqa: PLC0415

    rng = random.Random(seed)
    for n in list(range(40)) + [rng.randrange(1 << 16) for _ in range(200)]:
        data = rng.randbytes(n)
        assert lakefs_rangewalk.crc32c(data) == google_crc32c.value(data)


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_snappy_is_cramjam_or_refuses(seed):
    """On streams cramjam wrote, the same bytes; on damaged ones, the same bytes or a refusal (then the careful path,
    cramjam, decides)."""
    import lakefs_rangewalk  # noqa: PLC0415

    rng = random.Random(seed)
    took = 0
    for _ in range(ROUNDS * 2):
        n = rng.choice([0, 1, 5, 17, 60, 61, 300, 4096, 70000])
        kind = rng.random()
        if kind < 0.3:
            data = rng.randbytes(n)
        elif kind < 0.6:
            data = bytes(rng.randrange(rng.choice([2, 4, 16])) for _ in range(n))
        else:
            data = (rng.randbytes(rng.randint(1, 20)) * (n + 1))[:n]
        stream = bytes(cramjam.snappy.compress_raw(data))
        assert lakefs_rangewalk.snappy(stream) == data
        damaged = bytearray(stream)
        for _ in range(rng.randint(1, 3)):
            if damaged:
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        if rng.random() < 0.2 and damaged:
            del damaged[rng.randrange(len(damaged)):]
        mine = lakefs_rangewalk.snappy(bytes(damaged))
        if mine is not None:
            took += 1
            assert mine == bytes(cramjam.snappy.decompress_raw(bytes(damaged)))
    assert took


@pytest.mark.parametrize("seed", range(3))
def test_unpacked_blocks_are_the_careful_decoders_blocks_or_refused(seed):
    """Files with damaged stored blocks, the checksums made good again: what the compiled module unpacks is what
    _Table.block gives; what it refuses, _Table.block names or reads."""
    import google_crc32c  # noqa: PLC0415

    rng = random.Random(seed)
    files = list(lakefs_ranges().values())
    for _ in range(ROUNDS // 2):
        data = bytearray(rng.choice(files))
        table, handles, _ = sstable.block_keys(bytes(data))
        offset, size = rng.choice(handles)
        for _ in range(rng.randint(1, 3)):
            data[offset + rng.randrange(size)] = rng.randrange(256)
        crc = google_crc32c.value(bytes(data[offset:offset + size + 1]))
        data[offset + size + 1:offset + size + 5] = ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF) \
            .to_bytes(4, "little")
        damaged = bytes(data)
        table = sstable._Table(damaged)  # noqa: SLF001
        fast = outcome(range_arrow.joined, table, handles)
        careful = outcome(sstable.joined_blocks, table, handles)
        assert fast is careful or (fast is not SSTableError and careful is not SSTableError
                                   and bytes(fast[0]) == bytes(careful[0]) and list(fast[1]) == list(careful[1]))


def test_the_compiled_index_walk_gives_sstables_handles_and_keys():
    for data in lakefs_ranges().values():
        _, handles, keys = range_arrow.block_keys(data)
        _, want_handles, want_keys = sstable.block_keys(data)
        assert (handles, keys) == (want_handles, want_keys)


@pytest.mark.parametrize("seed", range(3))
def test_the_compiled_slice_comparison_is_pythons(seed, tmp_path, monkeypatch):
    """same_bytes compares two slices as Python compares them (a slice past an end cut there), mapped files too;
    without the compiled code it compares the slices itself."""
    import mmap  # noqa: PLC0415

    rnd = random.Random(seed)
    one = bytes(rnd.choice(b"ab") for _ in range(300))
    path = tmp_path / "one"
    path.write_bytes(one)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        for _ in range(3000):
            other = one if rnd.random() < 0.5 else bytes(rnd.choice(b"ab") for _ in range(rnd.randrange(320)))
            a, b, n = rnd.randrange(320), rnd.randrange(320), rnd.randrange(40)
            expected = one[a:a + n] == other[b:b + n]
            assert range_arrow.same_bytes(one, other, at=(a, b), length=n) == expected, (a, b, n)
            assert range_arrow.same_bytes(mapped, bytearray(other), at=(a, b), length=n) == expected, (a, b, n)
        with pytest.raises(ValueError, match="negative"):
            range_arrow.same_bytes(one, one, at=(-1, 0), length=1)
        monkeypatch.setattr(range_arrow, "_native", None)
        assert range_arrow.same_bytes(mapped, one, at=(3, 3), length=50)
        assert not range_arrow.same_bytes(one, one, at=(0, 1), length=50)
