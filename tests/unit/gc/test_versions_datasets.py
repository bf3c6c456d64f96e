"""keep_versions on the dataset plan: a line's ranges with the position where the line first holds them
(``core.mark.first_positions``), their entries with the path's limit (``units.range_versions``' rows), and each
(line, path)'s first distinct versions by that position (``ArrowReach.latest``) keep exactly what the object path's
history walk keeps (``core.mark.latest_versions``) on random histories with reverts, deletions and shared ranges."""

from __future__ import annotations

import hashlib
import random
from types import SimpleNamespace

import pyarrow as pa
import pytest

from spark_jobs.core import columns, range_arrow
from spark_jobs.core.cleaning import parse_cleaning_policies
from spark_jobs.core.mark import first_positions, latest_versions, versions_limit
from spark_jobs.engine.backends.arrow import ArrowBackend
from spark_jobs.engine.plan import units
from spark_jobs.engine.reach import arrow as reach_arrow
from spark_jobs.engine.reach.arrow import worth_ranking
from spark_jobs.engine.runtime.parallel import ThreadRunner
from tests.unit.gc.test_range_arrow import lakefs_ranges

PATHS = [f"{table}/p{i}" for table in ("a", "b", "c") for i in range(4)]


def random_line(rnd: random.Random, start: dict[str, str]) -> list[dict[str, str]]:
    """A line of commits (path -> key), oldest first: overwrites, deletions, now and then a revert."""
    states, state = [dict(start)], dict(start)
    for step in range(rnd.randint(1, 12)):
        if len(states) > 2 and rnd.random() < 0.15:
            state = dict(rnd.choice(states[:-1]))  # a revert: an earlier commit's ranges again
        else:
            for path in rnd.sample(PATHS, rnd.randint(1, 3)):
                state[path] = f"data/s/{path.replace('/', '-')}-{step}-{rnd.randint(0, 10**6)}"
            if rnd.random() < 0.3:
                state.pop(rnd.choice(PATHS), None)
        states.append(dict(state))
    return states


def ranges_of(commit: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """The commit's ranges: a table's entries each (the same entries: the same range id, as lakeFS's)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for table in ("a", "b", "c"):
        entries = sorted((p, k) for p, k in commit.items() if p.startswith(table + "/"))
        if entries:
            out[hashlib.sha256(repr(entries).encode()).hexdigest()] = entries
    return out


def rows_of(line_index: int, first: dict[str, int], ranges: dict[str, list[tuple[str, str]]], matching) -> list[dict]:
    return [{"line": line_index, "path": p.encode(), "key": k, "at": at, "keep": n}
            for range_id, at in first.items() for p, k in ranges[range_id]
            if (n := versions_limit(p, matching)) > 0]


def random_policies(rnd: random.Random):
    chosen = [{"id": f"v{i}", "patterns": ["*"], "keep_versions": rnd.randint(1, 4),
               **({"paths": [rnd.choice(["a/**", "b/**", "a/p1", "c/*"])]} if rnd.random() < 0.6 else {})}
              for i in range(rnd.randint(1, 3))]
    return tuple(parse_cleaning_policies({"policies": chosen}))


def case(seed: int):
    """Two lines (branches) over one random history each, sharing their first commit; rows and the expected keys."""
    rnd = random.Random(seed)
    base = {p: f"data/s/base-{p.replace('/', '-')}" for p in PATHS}
    ranges: dict[str, list[tuple[str, str]]] = {}
    rows, expected = [], set()
    for line_index in range(2):
        matching = random_policies(rnd)
        line = list(reversed(random_line(rnd, base)))  # newest first
        commits = {f"c{line_index}-{i}": SimpleNamespace(meta_range_id=f"m{line_index}-{i}") for i in range(len(line))}
        metaranges = {}
        for i, state in enumerate(line):
            held = ranges_of(state)
            ranges.update(held)
            metaranges[f"m{line_index}-{i}"] = list(held)
        first = first_positions(list(commits), commits=commits, range_ids_of=metaranges.__getitem__)
        rows += rows_of(line_index, first, ranges, matching)
        expected |= latest_versions(([(p, k) for r in metaranges[f"m{line_index}-{i}"] for p, k in ranges[r]]
                                     for i in range(len(line))), lambda path, m=matching: versions_limit(path, m))
    return rows, expected


@pytest.mark.parametrize("seed", range(40))
def test_the_latest_versions_by_first_position_are_the_history_walk_s(seed: int) -> None:
    rows, expected = case(seed)
    table = pa.Table.from_pylist(rows, schema=units.VERSIONS_SCHEMA)
    backend = ArrowBackend(ThreadRunner(2), config=None)  # type: ignore[arg-type]
    got = backend.latest(table)
    assert set(got["key"].to_pylist()) == expected  # (a key two lines keep is there twice, as reach's repeats)


def test_versions_first_held_at_one_position_share_a_rank() -> None:
    """Not lakeFS's data (a commit holds one entry per path): if it ever were, neither version is dropped."""
    rows = [{"line": 0, "path": b"a", "key": k, "at": at, "keep": 1} for k, at in (("x", 0), ("y", 0), ("z", 1))]
    got = ArrowBackend(ThreadRunner(2), config=None).latest(  # type: ignore[arg-type]
        pa.Table.from_pylist(rows, schema=units.VERSIONS_SCHEMA))
    assert sorted(got["key"].to_pylist()) == ["x", "y"]


def test_the_random_histories_drop_versions() -> None:
    """The cases above are not trivial: most drop some versions the history holds, and keep some."""
    dropped = [bool({r["key"] for r in rows} - expected) and bool(expected) for rows, expected in map(case, range(40))]
    assert sum(dropped) >= 20


def in_pieces(rnd: random.Random, rows: list[dict], most: int) -> list[list[dict]]:
    """``rows`` cut in at most ``most`` pieces of random sizes, in order, with an empty piece here and there."""
    cuts = sorted(rnd.sample(range(1, max(2, len(rows))), k=min(most - 1, max(0, len(rows) - 1))))
    pieces = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    for _ in range(rnd.randint(0, 2)):
        pieces.insert(rnd.randint(0, len(pieces)), [])
    return pieces


@pytest.mark.parametrize("hashed", [True, False], ids=["hashed", "without-hashes"])
@pytest.mark.parametrize("seed", range(40))
def test_ranking_only_the_paths_with_an_unreached_version_keeps_the_same_beyond_reach(seed: int, hashed: bool,
                                                                                     monkeypatch) -> None:
    """``worth_ranking`` drops the paths all of whose versions are reached: what the rest keep beyond the reached
    keys, and their union with them, are what ranking every path gives, whatever is reached. The entries come in
    units of random sizes (a path's versions spread over several), each in groups of random sizes, decoded twice,
    on two threads: the second time only the groups holding a chosen path. Some paths are not covered (``rows``
    gives none of their rows: no policy keeps their versions), and they never make a group decoded again. ``rows``
    (the limits' regular expressions) sees only unreached entries and the chosen paths'. Some groups and some units
    are empty. Without the compiled hashes every group is decoded again, and the rows kept are the same."""
    assert range_arrow.compiled(), "lakefs_rangewalk did not build: run scripts/install.sh"
    if not hashed:
        monkeypatch.setattr(reach_arrow, "hashes", lambda _column: None)
    rows, _ = case(seed)
    rnd = random.Random(seed)
    uncovered = {p.encode() for p in rnd.sample(PATHS, rnd.randint(0, 4))}
    table = pa.Table.from_pylist(rows, schema=units.VERSIONS_SCHEMA)
    parts = {str(i): [pa.RecordBatch.from_pylist(group, schema=units.VERSIONS_SCHEMA)
                      for group in in_pieces(rnd, unit, 4)] for i, unit in enumerate(in_pieces(rnd, rows, 5))}
    parts[str(len(parts))] = []  # a unit of no group (a range with no block)
    decoded, given = [], []

    def entries(_ctx, unit, only):
        for group, batch in enumerate(parts[unit]):
            if only is None or group in only:
                decoded.append((unit, group))
                yield group, batch

    def covered(_unit, batch):
        given.extend(zip(batch.column("path").to_pylist(), batch.column("key").to_pylist(), strict=True))
        return batch.filter(pa.array([p not in uncovered for p in batch.column("path").to_pylist()], pa.bool_()))

    keys = sorted({r["key"] for r in rows})
    backend = ArrowBackend(ThreadRunner(2), config=None)  # type: ignore[arg-type]
    every = set(backend.latest(pa.Table.from_batches([covered(None, b) for unit in parts.values() for b in unit],
                                                     schema=units.VERSIONS_SCHEMA))["key"].to_pylist())
    groups = [(u, g) for u, unit in parts.items() for g in range(len(unit))]
    for share in (0.0, 0.3, 0.7, 0.95, 1.0):
        reached = set(rnd.sample(keys, int(len(keys) * share)))
        decoded.clear()
        given.clear()
        pruned = worth_ranking(ThreadRunner(2), list(parts), entries, rows=covered, make_context=lambda: None,
                               reached=pa.table({"key": pa.array(sorted(reached), pa.string())}))
        # every group once; again only the groups that hold a path ranked (one with a version not reached: told by
        # the compiled hashes, without which every group is decoded again)
        worth = {r["path"] for r in rows if r["key"] not in reached and r["path"] not in uncovered} if reached \
            else set()
        again = [(u, g) for u, g in groups if (worth & set(parts[u][g].column("path").to_pylist())
                                                if hashed else worth)]
        assert sorted(decoded) == sorted(groups + (again if reached else []))
        if reached:
            assert all(key not in reached or path in worth for path, key in given), "rows saw entries it need not"
        assert pruned.num_rows <= table.num_rows
        got = set(backend.latest(pruned)["key"].to_pylist())
        assert got - reached == every - reached and got | reached == every | reached, (share, got ^ every)
        if share == 1.0:
            assert pruned.num_rows == 0


class RangeFile:
    """What ``units.range_entry_groups`` reads of a context: one range file (lakeFS's own, from the fixtures)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.prefixes = data, ("local://ns",)

    def read_range(self, _range_id: str) -> bytes:
        return self.data


@pytest.mark.parametrize("blocks", [1, 2, 512])
def test_a_range_s_entry_groups_read_again_by_number_are_the_groups_of_a_whole_read(blocks: int) -> None:
    """``range_entry_groups``, as keep_versions' second pass reads it: every group numbered (empty ones too), the
    groups the whole range's entries in order; a read of some groups gives them as the whole read did. And
    ``range_versions`` (Spark's) is ``versions_of`` the range's entries at once."""
    rnd = random.Random(blocks)
    policies = tuple(parse_cleaning_policies({"policies": [
        {"id": "v", "patterns": ["*"], "keep_versions": 2, "paths": ["**/*.parquet"]}]}))
    covered = entries = 0
    for data in lakefs_ranges().values():
        ctx = RangeFile(data)
        whole = range_arrow.range_batch(data)
        keys = columns.relative_keys(whole.column("address"), whole.column("address_type"), ctx.prefixes)
        numbered = list(units.range_entry_groups(ctx, "r", blocks=blocks))
        assert [n for n, _ in numbered] == list(range(len(numbered)))
        got = pa.Table.from_batches([b for _, b in numbered], schema=units.ENTRIES_SCHEMA)
        assert got["path"].to_pylist() == whole.column("path").filter(keys.is_valid()).to_pylist()
        assert got["key"].to_pylist() == keys.drop_null().to_pylist()
        only = set(rnd.sample(range(len(numbered)), rnd.randint(0, len(numbered))))
        picked = list(units.range_entry_groups(ctx, "r", only=only, blocks=blocks))
        assert [n for n, _ in picked] == sorted(only)
        assert all(b.equals(numbered[n][1]) for n, b in picked)
        unit = units.version_unit(0, 3, "r")
        every = units.versions_of(unit, pa.Table.from_batches([b for _, b in numbered], schema=units.ENTRIES_SCHEMA)
                                  .combine_chunks().to_batches()[0] if numbered else
                                  pa.RecordBatch.from_pylist([], schema=units.ENTRIES_SCHEMA), lines=(policies,))
        assert units.range_versions(ctx, unit, lines=(policies,)).equals(every)
        covered, entries = covered + every.num_rows, entries + got.num_rows
    assert 0 < covered < entries, "the policy covers some of the fixtures' paths, not all"
