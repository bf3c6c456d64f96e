"""The GC's rules over Arrow columns (pure): the same decisions as ``addresses``, ``plan`` and ``incremental``, made
for a whole batch at once, so that neither the in-process backend nor a Spark executor builds a Python object per
key. Each function here has a per-key twin that stays the reference (tests compare them).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.core.addresses import FULL, _normal
from spark_jobs.core.plan import LEGACY_SKIP, METADATA_PREFIX, PlanSummary

KEYS_SCHEMA = pa.schema([pa.field("key", pa.string(), nullable=False)])
LISTING_SCHEMA = pa.schema([pa.field("key", pa.string(), nullable=False),
                            pa.field("size", pa.int64(), nullable=False),
                            pa.field("mtime", pa.float64(), nullable=False)])
PLAN_SCHEMA = pa.schema([pa.field("address", pa.string(), nullable=False),
                         pa.field("size", pa.int64(), nullable=False)])


def relative_keys(address: pa.Array, address_type: pa.Array, namespace_uris: Iterable[str]) -> pa.Array:
    """``addresses.relative_key`` of every entry: null where the address lies outside the namespace. Full addresses
    (imported objects, a lake staged by physical address) are cut by prefix tests and plain substring replacement:
    the regular expressions that did it took 0.9 µs an entry (5x), most of the time a range of them took to decode."""
    address = pc.cast(address, pa.string())
    plain = pc.and_(pc.not_equal(address_type, FULL), pc.invert(pc.match_substring(address, "://")))
    out = pc.if_else(plain, pc.utf8_ltrim(address, characters="/"), pa.scalar(None, pa.string()))
    if not len(address) or pc.all(plain).as_py():
        return out
    s3a = pc.starts_with(address, pattern="s3a://")
    full = address
    if pc.any(s3a).as_py():  # Hadoop's s3a:// names the same objects as s3:// (``addresses._normal``)
        full = pc.if_else(s3a, pc.replace_substring(address, pattern="s3a://", replacement="s3://",
                                                    max_replacements=1), address)
    for uri in namespace_uris:
        root = _normal(uri).rstrip("/") + "/"
        inside = pc.and_(pc.is_null(out), pc.starts_with(full, pattern=root))
        if pc.any(inside).as_py():
            # (in a row that starts with the root, its first occurrence is that start)
            rest = pc.replace_substring(full, pattern=root, replacement="", max_replacements=1)
            out = pc.if_else(inside, pc.utf8_ltrim(rest, characters="/"), out)
    return out


def data_key_mask(keys: pa.Array) -> pa.Array:
    """``plan.is_data_key`` of every key."""
    metadata = pc.or_(pc.starts_with(keys, pattern=METADATA_PREFIX),
                      pc.equal(keys, METADATA_PREFIX.rstrip("/")))
    legacy = pc.and_(pc.invert(pc.match_substring(keys, "/")),
                     pc.invert(pc.is_in(keys, value_set=pa.array(sorted(LEGACY_SKIP), pa.string()))))
    return pc.and_(pc.invert(metadata), pc.or_(pc.starts_with(keys, pattern="data/"), legacy))


def prefixes_of(keys: pa.Array, depth: int) -> pa.Array:
    """The ``by_prefix`` group of every key: its first ``depth`` folders, ``(root)`` for a key at the root."""
    parts = pc.list_slice(pc.split_pattern(keys, pattern="/", max_splits=depth), 0, depth)
    joined = pc.binary_join(parts, "/")
    return pc.if_else(pc.match_substring(keys, "/"), joined, pa.scalar("(root)", pa.string()))


def units_of(keys: pa.Array) -> pa.Array:
    """``listing.incremental.unit_of`` of every key: ``data/<slice>/``, or the root (``""``)."""
    slice_ = pc.replace_substring_regex(keys, pattern="(?s)^(data/[^/]*/).*$", replacement="\\1")
    has = pc.and_(pc.starts_with(keys, pattern="data/"), pc.greater_equal(pc.count_substring(keys, "/"), 2))
    return pc.if_else(has, slice_, pa.scalar("", pa.string()))


def all_in_unit(keys: pa.Array | pa.ChunkedArray, unit: str) -> bool:
    """Whether ``units_of`` gives ``unit`` (``data/<slice>/`` or ``""``) for every key, without making the units:
    all under ``data/<slice>/``, or, for the root ``""``, none of them under a ``data/<slice>/``."""
    if not len(keys):
        return True
    if unit:
        return bool(pc.all(pc.starts_with(keys, pattern=unit)).as_py())
    sliced = pc.and_(pc.starts_with(keys, pattern="data/"), pc.greater_equal(pc.count_substring(keys, "/"), 2))
    return not pc.any(sliced).as_py()


def add_prefix_counts(summary: PlanSummary, prefixes: pa.Array | pa.ChunkedArray, sizes: pa.Array | pa.ChunkedArray) -> None:
    """Add objects and bytes per prefix (``PlanSummary.by_prefix``) of deleted objects (numpy over the prefixes'
    dictionary: no Acero plan, whose first use imports pyarrow.dataset, tens of MiB, into a run)."""
    import numpy as np  # noqa: PLC0415

    if not len(prefixes):
        return
    encoded = pc.dictionary_encode(prefixes.combine_chunks() if isinstance(prefixes, pa.ChunkedArray) else prefixes)
    at = encoded.indices.to_numpy(zero_copy_only=False)
    sizes = sizes.combine_chunks() if isinstance(sizes, pa.ChunkedArray) else sizes
    counts = np.bincount(at, minlength=len(encoded.dictionary))
    totals = np.zeros(len(encoded.dictionary), np.int64)
    np.add.at(totals, at, pc.fill_null(sizes, 0).to_numpy(zero_copy_only=False))
    for prefix, count, total in zip(encoded.dictionary.to_pylist(), counts.tolist(), totals.tolist(), strict=True):
        if not count:
            continue
        tally = summary.by_prefix.setdefault(prefix, [0, 0])
        tally[0] += count
        tally[1] += total


def judge(listed: pa.Table, kept: pa.Table, cutoff: float, *, prefix_depth: int) -> tuple[pa.Table, PlanSummary]:
    """``plan.plan_deletions`` over tables: ``listed`` (LISTING_SCHEMA) minus ``kept`` (a ``key`` column, repeats
    allowed), data keys only, nothing modified at or after ``cutoff``. The deleted objects (PLAN_SCHEMA, by key)."""
    summary = PlanSummary()
    data = listed.filter(data_key_mask(listed["key"])) if listed.num_rows else listed
    summary.candidates = data.num_rows
    if data.num_rows and kept.num_rows:
        held = pc.is_in(data["key"], value_set=kept["key"].combine_chunks())
        unkept = data.filter(pc.invert(held))
    else:
        unkept = data
    summary.kept = data.num_rows - unkept.num_rows
    old = pc.less(unkept["mtime"], cutoff) if unkept.num_rows else pa.array([], pa.bool_())
    deleted = unkept.filter(old) if unkept.num_rows else unkept
    summary.too_new = unkept.num_rows - deleted.num_rows
    summary.deleted = deleted.num_rows
    summary.deleted_bytes = int(pc.sum(deleted["size"]).as_py() or 0) if deleted.num_rows else 0
    add_prefix_counts(summary, prefixes_of(deleted["key"], prefix_depth) if deleted.num_rows else
                      pa.array([], pa.string()), deleted["size"])
    deleted = deleted.sort_by("key") if deleted.num_rows else deleted
    return pa.table({"address": deleted["key"].cast(pa.string()), "size": deleted["size"]}, schema=PLAN_SCHEMA), \
        summary
