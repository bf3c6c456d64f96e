"""bench/gc/sstable_bench: how fast the GC mark phase reads lakeFS range files, on one core.

    .venv/bin/python bench/gc/sstable_bench.py [--objects 40000 --rounds 15 --output PATH]
    .venv/bin/python bench/gc/sstable_bench.py --quick   # 500 objects, 2 rounds, the checks; writes no results
    make bench-gc            (after bench/gc/bench_gc.py)

Data: range files a real lakeFS wrote. The first run starts lakeFS (tests/services.py, local blockstore, default
``committed.*`` settings, so ranges are split the way production splits them), uploads ``--objects`` objects
(keys like ``tables/<table>/dt=<date>/part-<n>-<uuid>.c000.snappy.parquet``, 0-4 KiB each, 8 threads), commits,
and copies every range of the commit's metarange from ``_lakefs/`` into ``~/.cache/lakefs-janitor/bench-sstables/
objects-<n>/``; later runs reuse that copy (``--regenerate`` to redo it).

Timed, over all range files held in memory, the process pinned to one CPU, in ``--rounds`` rounds that rotate the
order, each after ``gc.collect()``; medians:

* ``snappy``: cramjam's Snappy decompression of every data block and nothing else (the floor for any Python
  reader on cramjam; block offsets found beforehand, untimed);
* ``straightforward``: the baseline, a plain reader written as one would first write it (below, ~60 lines, on
  the decoder's own varint reader):
  blocks through the index, every entry's key rebuilt, value split, protobuf decoded field by field into a dict;
* ``iter_entries``: spark_jobs.core.sstable.iter_entries, every field of every entry decoded into an Entry
  (the careful general decoder, for reference);
* ``range_entries``: spark_jobs.core.sstable.range_entries (path, address, type, size per entry);
* ``range_addresses``: spark_jobs.core.sstable.range_addresses, the walk that skips keys (CRC32C verified);
* ``range_addresses_nocrc``: the same without checksum verification (what the CRC costs).

Checks (a failure exits 1 and writes nothing): every reader returns the same (address, address_type) list, with
exactly one entry per uploaded object. Figures: MiB of range-file bytes per second, entries per second, and the
ratios range_addresses / straightforward (goal >= 3) and range_addresses / snappy. Writes
bench/results/gc-sstable.json and .md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import struct
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import cramjam

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.machine import machine_info  # noqa: E402
from spark_jobs.core import sstable  # noqa: E402

CACHE = Path.home() / ".cache" / "lakefs-janitor" / "bench-sstables"
MIB = 1024 * 1024


# --- data --------------------------------------------------------------------------------------------------


def generate(objects: int, dest: Path) -> None:
    import requests  # noqa: PLC0415

    from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer  # noqa: PLC0415

    server = LakeFSServer().start()
    try:
        api = f"{server.endpoint}/api/v1"
        session = requests.Session()
        session.auth = (ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        adapter = requests.adapters.HTTPAdapter(pool_maxsize=16)
        session.mount("http://", adapter)
        session.post(f"{api}/repositories", json={"name": "bench", "storage_namespace": "local://bench",
                                                 "default_branch": "main"}).raise_for_status()
        rnd = random.Random(42)
        tables = [f"{name}_{i}" for i in range(8) for name in ("events", "orders", "sessions")]

        def key(i: int) -> str:
            return (f"tables/{tables[i % len(tables)]}/dt=2026-{1 + i % 12:02d}-{1 + i % 28:02d}/"
                    f"part-{i:05d}-{uuid.UUID(int=rnd.getrandbits(128))}.c000.snappy.parquet")

        jobs = [(key(i), rnd.randbytes(rnd.randrange(4096))) for i in range(objects)]

        def upload(job: tuple[str, bytes]) -> None:
            resp = session.post(f"{api}/repositories/bench/branches/main/objects", params={"path": job[0]},
                                files={"content": ("blob", job[1], "application/octet-stream")}, timeout=60)
            resp.raise_for_status()

        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            for n, _ in enumerate(pool.map(upload, jobs), 1):
                if n % 5000 == 0:
                    print(f"  uploaded {n}/{objects} ({time.monotonic() - started:.0f} s)", file=sys.stderr)
        commit = session.post(f"{api}/repositories/bench/branches/main/commits", json={"message": "bench"})
        commit.raise_for_status()
        namespace = server.dir / "block" / "bench"
        metarange = (namespace / "_lakefs" / commit.json()["meta_range_id"]).read_bytes()
        tmp = dest.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for rid in sstable.metarange_range_ids(metarange):
            shutil.copyfile(namespace / "_lakefs" / rid, tmp / f"{rid}.sst")
        tmp.rename(dest)
    finally:
        server.cleanup()


def load(objects: int, regenerate: bool) -> list[bytes]:
    dest = CACHE / f"objects-{objects}"
    if regenerate:
        shutil.rmtree(dest, ignore_errors=True)
    if not dest.is_dir():
        print(f"generating {objects} objects on a real lakeFS into {dest} …", file=sys.stderr)
        generate(objects, dest)
    return [p.read_bytes() for p in sorted(dest.glob("*.sst"))]


# --- the baseline: a straightforward reader ----------------------------------------------------------------


# the decoder's own varint and block-handle readers (bounds-checked)
_uvarint = sstable._uvarint  # noqa: SLF001


def _handle(buf: bytes, pos: int = 0) -> tuple[int, int, int]:
    return sstable._block_handle(buf, pos, len(buf), "block handle")  # noqa: SLF001


def _block(data: bytes, offset: int, size: int) -> bytes:
    raw = data[offset:offset + size]
    return bytes(cramjam.snappy.decompress_raw(raw)) if data[offset + size] == 1 else raw


def _entries(block: bytes):
    (num_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * num_restarts
    pos, key = 0, b""
    while pos < end:
        shared, pos = _uvarint(block, pos, end, "block")
        unshared, pos = _uvarint(block, pos, end, "block")
        vlen, pos = _uvarint(block, pos, end, "block")
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        yield key, block[pos:pos + vlen]
        pos += vlen


def _protobuf(buf: bytes) -> dict[int, object]:
    fields, pos, end = {}, 0, len(buf)
    while pos < end:
        tag, pos = _uvarint(buf, pos, end, "Entry")
        if tag & 7 == 0:
            fields[tag >> 3], pos = _uvarint(buf, pos, end, "Entry")
        else:  # length-delimited (Entry has nothing else)
            n, pos = _uvarint(buf, pos, end, "Entry")
            fields[tag >> 3] = buf[pos:pos + n]
            pos += n
    return fields


def straightforward_addresses(data: bytes) -> list[tuple[str, int]]:
    meta_offset, meta_size, p = _handle(data, len(data) - 52)  # footer: checksum type, metaindex, index handles
    index_offset, index_size, _ = _handle(data, p)
    props = {}
    for name, handle in _entries(_block(data, meta_offset, meta_size)):
        if name == b"rocksdb.properties":
            props = dict(_entries(_block(data, *_handle(handle)[:2])))
    index_blocks = [(index_offset, index_size)]
    if props.get(b"rocksdb.block.based.table.index.type") == b"\x02\x00\x00\x00":
        index_blocks = [_handle(handle)[:2] for _, handle in _entries(_block(data, index_offset, index_size))]
    out = []
    for io, isz in index_blocks:
        for _, handle in _entries(_block(data, io, isz)):
            for key, value in _entries(_block(data, *_handle(handle)[:2])):
                _path = key[:-8]
                ilen, p = _uvarint(value, 0, len(value), "value")
                p += ilen >> 1  # identity
                dlen, p = _uvarint(value, p, len(value), "value")
                entry = _protobuf(value[p:p + (dlen >> 1)])
                out.append((entry[1].decode(), entry.get(6, 0)))
    return out


# --- timing ------------------------------------------------------------------------------------------------


def compressed_blocks(files: list[bytes]) -> list[bytes]:
    """Every Snappy-compressed data block of every file (found with the reader's own index walk, untimed)."""
    blocks = []
    for data in files:
        table = sstable._Table(data)
        for offset, size in table.data_handles():
            if data[offset + size] == 1:
                blocks.append(data[offset:offset + size])
    return blocks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=40_000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "gc-sstable.json")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--quick", action="store_true", help="500 objects, 2 rounds, the checks only; implies --no-write")
    args = ap.parse_args()
    if args.quick:
        args.objects, args.rounds, args.no_write = 500, 2, True

    files = load(args.objects, args.regenerate)
    total = sum(map(len, files))
    machine = machine_info(("cramjam", "google-crc32c"))  # before pinning, so nproc is the machine's
    cpu = sorted(os.sched_getaffinity(0))[-1]
    os.sched_setaffinity(0, {cpu})  # one core, and always the same one

    blocks = compressed_blocks(files)
    runs = {
        "snappy": lambda: [cramjam.snappy.decompress_raw(b) for b in blocks],
        "straightforward": lambda: [straightforward_addresses(d) for d in files],
        "iter_entries": lambda: [list(sstable.iter_entries(d)) for d in files],
        "range_entries": lambda: [sstable.range_entries(d) for d in files],
        "range_addresses": lambda: [sstable.range_addresses(d) for d in files],
        "range_addresses_nocrc": lambda: [sstable.range_addresses(d, verify_checksums=False) for d in files],
    }

    # checks
    reference = [a for d in files for a in sstable.range_addresses(d)]
    if len(reference) != args.objects:
        print(f"FAIL: {len(reference)} entries in the ranges, {args.objects} objects uploaded", file=sys.stderr)
        return 1
    for name in ("straightforward", "iter_entries", "range_entries", "range_addresses_nocrc"):
        got = [a for part in runs[name]() for a in part]
        if name == "range_entries":
            got = [(addr, atype) for _, addr, atype, _ in got]
        elif name == "iter_entries":
            got = [(e.address, e.address_type) for e in got]
        if got != reference:
            print(f"FAIL: {name} disagrees with range_addresses", file=sys.stderr)
            return 1

    names = list(runs)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds + 1):  # round 0 warms up, untimed
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            gc.collect()
            t0 = time.perf_counter()
            runs[name]()
            elapsed = time.perf_counter() - t0
            if r:
                times[name].append(elapsed)
    med = {n: statistics.median(t) for n, t in times.items()}
    entries = len(reference)
    figures = {n: {"seconds": med[n], "mib_per_s": total / MIB / med[n], "entries_per_s": entries / med[n],
                   "rounds": times[n]} for n in names}
    per_round = [s / a for s, a in zip(times["straightforward"], times["range_addresses"], strict=True)]
    ratios = {
        "range_addresses / straightforward": med["straightforward"] / med["range_addresses"],
        "range_addresses / straightforward, median of per-round ratios": statistics.median(per_round),
        "range_addresses / straightforward, worst round": min(per_round),
        "range_entries / straightforward": med["straightforward"] / med["range_entries"],
        "range_addresses MiB/s / 45 (the goal)": total / MIB / med["range_addresses"] / 45,
        "range_addresses time / snappy time": med["range_addresses"] / med["snappy"],
        "crc share of range_addresses": 1 - med["range_addresses_nocrc"] / med["range_addresses"],
    }
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "objects": args.objects, "range_files": len(files), "range_bytes": total, "entries": entries,
        "data_blocks": len(blocks), "rounds": args.rounds, "pinned_cpu": cpu,
        "figures": figures, "ratios": ratios,
        "machine": machine,
    }
    lines = [f"# bench/gc/sstable — {result['date']}", "",
             f"{len(files)} range files, {total / MIB:.1f} MiB, {entries:,} entries, {len(blocks):,} data blocks; "
             f"one CPU; median of {args.rounds} rounds.", "",
             "| reader | MiB/s | entries/s | s per pass |", "|---|---:|---:|---:|"]
    lines += [f"| {n} | {f['mib_per_s']:.1f} | {f['entries_per_s']:,.0f} | {f['seconds']:.3f} |"
              for n, f in figures.items()]
    lines += ["", *(f"* {k}: **{v:.2f}**" for k, v in ratios.items())]
    print("\n".join(lines))
    if not args.no_write:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1) + "\n")
        args.output.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
