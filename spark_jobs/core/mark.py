"""Mark: what retained commits and staged entries keep alive (pure; reads go through the callables given).

Ranges are immutable and shared between commits, so each unique metarange and range is read once, whatever the
number of commits that reference it; and the versions of one range share most of their data blocks, so each
distinct block is decoded once: the cost follows what changed, not commits. With path policies an entry is kept
when a retained commit of its path's scope holds its range (``scope_of``, ``range_commits``, ``kept_addresses``
over ``cleaning.ScopedRetention``); keep_versions keeps each path's latest versions (``versions_kept``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

from spark_jobs.core import range_arrow, sstable
from spark_jobs.core.cleaning import CleaningPolicy, Scope, ScopedRetention, first_parent_line
from spark_jobs.core.retention import Commit
from spark_jobs.core.sstable import metarange_range_ids

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
    ``seen_blocks``, only those of data blocks not decoded before (see sstable.range_blocks). Decoded by the
    compiled walk, the keys mapped as one column (``range_arrow``)."""
    if seen_blocks is None:
        batch = range_arrow.range_batch(data)
    else:
        table, wanted = sstable.unseen_blocks(data, seen_blocks)
        batch = range_arrow.blocks_batch(table, list(wanted.values()))
        seen_blocks.update(wanted)  # only once decoded: a corrupt block is never taken as seen
    return set(range_arrow.relative_keys(batch, namespace_uris).drop_null().to_pylist())


def scope_of(path: str, policies: Iterable[CleaningPolicy]) -> Scope:
    """The path policies that decide for an object at ``path`` (whatever the branch; each applies on its own)."""
    return Scope(p.id for p in policies if p.paths and p.covers(path))


def range_commits(members: Iterable[tuple[str, bytes, str]], commits: Iterable[str], *,
                  metarange_of: Callable[[str], str]) -> dict[str, set[str]]:
    """Which of ``commits`` hold each range, from (metarange id, first key, range id) ``members``."""
    holders: dict[str, set[str]] = {}
    for metarange_id, _, range_id in members:
        holders.setdefault(metarange_id, set()).add(range_id)
    out: dict[str, set[str]] = {}
    for commit_id in commits:
        for range_id in holders.get(metarange_of(commit_id), ()):
            out.setdefault(range_id, set()).add(commit_id)
    return out


# A scope travels in a dataset as an int64 mask, a bit per path policy (``scope_mask``): past this many path
# policies a run takes the object path (``plan.datasets.eligible``).
MOST_MASKED_POLICIES = 62


def scope_mask(path: str, path_policies: Sequence[CleaningPolicy]) -> int:
    """``scope_of`` as bits: bit i is set when ``path_policies[i]`` covers ``path``."""
    return sum(1 << i for i, p in enumerate(path_policies) if p.covers(path))


def scope_of_mask(mask: int, path_policies: Sequence[CleaningPolicy]) -> Scope:
    return Scope(p.id for i, p in enumerate(path_policies) if mask >> i & 1)


def unit_alive(range_id: str, scope: Scope, *, range_commits: Mapping[str, Iterable[str]],
               retention: ScopedRetention) -> bool:
    """Whether a range's entries of a scope are kept: some commit the scope retains holds the range."""
    retained = retention.of(scope).commits
    return any(c in retained for c in range_commits.get(range_id, ()))


def kept_addresses(entries: Iterable[tuple[str, Scope, Iterable[str]]], range_commits: Mapping[str, Iterable[str]],
                   retention: ScopedRetention, *, live: dict[tuple[str, Scope], bool] | None = None) -> set[str]:
    """The addresses kept, from (range id, scope, addresses of that range's entries in that scope): those of a
    range some retained commit of the scope holds (``unit_alive``). ``live``, when given, is filled with each
    (range, scope) unit's verdict (what an incremental run's state remembers)."""
    live = {} if live is None else live
    kept: set[str] = set()
    for range_id, scope, addresses in entries:
        if (range_id, scope) not in live:
            live[(range_id, scope)] = unit_alive(range_id, scope, range_commits=range_commits, retention=retention)
        if live[(range_id, scope)]:
            kept.update(addresses)
    return kept


def latest_versions(history: Iterable[Iterable[tuple[str, str]]], n: int | Callable[[str], int]) -> set[str]:
    """KEEP_LATEST_FILE_VERSIONS over a branch's history, newest commit first: for every path, its N most recent
    distinct addresses (the first one seen is HEAD's, so HEAD's version is always among them). ``n`` may depend on
    the path (path policies); 0 keeps nothing for it."""
    count: Callable[[str], int] = (lambda _path: n) if isinstance(n, int) else n
    kept: dict[str, list[str]] = {}
    limits: dict[str, int] = {}
    for entries in history:
        for path, address in entries:
            versions = kept.setdefault(path, [])
            limit = limits[path] if path in limits else limits.setdefault(path, count(path))
            if len(versions) < limit and address not in versions:
                versions.append(address)
    return {a for versions in kept.values() for a in versions}


def versions_kept(*, commits: Mapping[str, Commit], branch_heads: Mapping[str, str],
                  policies: Iterable[CleaningPolicy], range_ids_of: Callable[[str], list[str]],
                  entries_of: Callable[[str, set[bytes]], Iterable[tuple[str, str]]]) -> set[str]:
    """KEEP_LATEST_FILE_VERSIONS on every matching branch: each path's N most recent distinct versions over the
    branch's first-parent history (N: the largest of the matching policies). The ranges come from the caller's
    source (the files, or the mark cache): ``range_ids_of(metarange id)``, and ``entries_of(range id, seen
    blocks)``: the (path, namespace-relative key) pairs of the range, of its data blocks not in ``seen blocks`` at
    least (a source may give them all: a pair met again adds no distinct version). Asks for each distinct range
    of a branch's line once."""
    policies = list(policies)

    def new_entries(meta_range_id: str, seen_ranges: set[str], seen_blocks: set[bytes]) -> list[tuple[str, str]]:
        # Newest first, a (path, version) pair met again adds no distinct version: a range, or a data block of a
        # range version, already walked on this line holds only such pairs, so only what is new is decoded.
        out: list[tuple[str, str]] = []
        for range_id in range_ids_of(meta_range_id) if meta_range_id else []:
            if range_id not in seen_ranges:
                seen_ranges.add(range_id)
                out += entries_of(range_id, seen_blocks)
        return out

    kept: set[str] = set()
    for branch_id, head in sorted(branch_heads.items()):
        matching = [p for p in policies if p.matches(branch_id) and p.keep_versions]
        if matching:
            seen_ranges: set[str] = set()
            seen_blocks: set[bytes] = set()
            line = first_parent_line(commits, head)
            kept |= latest_versions((new_entries(commits[c].meta_range_id, seen_ranges, seen_blocks) for c in line),
                                    _versions_for(matching))
    return kept


def version_lines(*, commits: Mapping[str, Commit], branch_heads: Mapping[str, str],
                  policies: Iterable[CleaningPolicy]) -> list[tuple[tuple[CleaningPolicy, ...], list[str]]]:
    """KEEP_LATEST_FILE_VERSIONS as datasets, first half: each branch some keep_versions policy matches (in branch
    order), its matching policies and its first-parent line, newest first."""
    policies = list(policies)
    out = []
    for branch_id, head in sorted(branch_heads.items()):
        matching = tuple(p for p in policies if p.matches(branch_id) and p.keep_versions)
        if matching:
            out.append((matching, first_parent_line(commits, head)))
    return out


def first_positions(line: Iterable[str], *, commits: Mapping[str, Commit],
                    range_ids_of: Callable[[str], Iterable[str]]) -> dict[str, int]:
    """Each range of a line with the position (0: the newest commit) of the newest commit holding it. An entry's
    first position on the line is the least of its ranges': a path's distinct versions, newest first, are its
    keys by that position (no two versions of a path share one: a commit holds one entry per path), which is
    ``latest_versions``'s order."""
    first: dict[str, int] = {}
    for at, commit_id in enumerate(line):
        if meta := commits[commit_id].meta_range_id:
            for range_id in range_ids_of(meta):
                first.setdefault(range_id, at)
    return first


def versions_limit(path: str, matching: Iterable[CleaningPolicy]) -> int:
    """How many versions of ``path`` the matching keep_versions policies keep (``_versions_for``'s rule)."""
    return max((p.keep_versions or 0 for p in matching if p.covers(path)), default=0)


def _versions_for(matching: list[CleaningPolicy]) -> int | Callable[[str], int]:
    """How many versions of a path the matching policies keep: the most any policy covering the path keeps."""
    if not any(p.paths for p in matching):
        return max(p.keep_versions or 0 for p in matching)
    return lambda path: max((p.keep_versions or 0 for p in matching if p.covers(path)), default=0)
