"""Mark: what retained commits and staged entries keep alive (pure; reads go through the callables given).

Ranges are immutable and shared between commits, so each unique metarange and range is read once, whatever the
number of commits that reference it; and the versions of one range share most of their data blocks, so each
distinct block is decoded once: the cost follows what changed, not commits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from spark_jobs.core.addresses import relative_key
from spark_jobs.core.sstable import metarange_range_ids, range_addresses

T = TypeVar("T")
R = TypeVar("R")
Mapper = Callable[[Callable[[T], R], Iterable[T]], Iterator[R]]


def unique_range_ids(metarange_ids: Iterable[str], read_metarange: Callable[[str], bytes], *,
                     map_: Mapper = map) -> set[str]:
    """Every range the given metaranges list (the empty metarange of a repository's first commit has none)."""
    wanted = sorted({m for m in metarange_ids if m})
    ranges: set[str] = set()
    for ids in map_(lambda m: metarange_range_ids(read_metarange(m)), wanted):
        ranges.update(ids)
    return ranges


def keys_in_range(data: bytes, namespace_uris: tuple[str, ...], seen_blocks: set[bytes] | None = None) -> set[str]:
    """The namespace-relative keys one range file's entries point at (addresses outside it are left out); with
    ``seen_blocks``, only those of data blocks not decoded before (see sstable.range_addresses)."""
    out = set()
    for address, address_type in range_addresses(data, seen_blocks=seen_blocks):
        key = relative_key(address, address_type, namespace_uris)
        if key is not None:
            out.add(key)
    return out


def kept_keys(range_ids: Iterable[str], read_range: Callable[[str], bytes], namespace_uris: tuple[str, ...], *,
              map_: Mapper = map) -> set[str]:
    # Versions of one range share most of their blocks: each distinct block is decoded once, whatever the
    # number of range versions holding it (the set is shared by the threads; at worst two decode one block).
    seen_blocks: set[bytes] = set()
    kept: set[str] = set()
    for keys in map_(lambda r: keys_in_range(read_range(r), namespace_uris, seen_blocks), sorted(set(range_ids))):
        kept |= keys
    return kept
