"""Reach in process: the keys the retained ranges' entries point at (and the staged entries'), as Arrow tables on
the thread runner's pool (``reach/spark.py``: the same on executors)."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.core import columns
from spark_jobs.core.cleaning import CleaningPolicy
from spark_jobs.core.key_set import KeySet, hashes
from spark_jobs.engine.backends.arrow_base import ArrowSteps, table_of
from spark_jobs.engine.plan import units
from spark_jobs.engine.runtime.memory import released
from spark_jobs.engine.runtime.parallel import ThreadRunner


def worth_ranking(runner: ThreadRunner, version_units: Sequence[str], entries, *, rows, reached: pa.Table | None,
                  make_context) -> pa.Table:
    """The versions rows (``units.VERSIONS_SCHEMA``) of the paths that have a version whose key ``reached`` lacks,
    every row of each (so their ranks are exact). A path all of whose versions are reached keeps only reached keys,
    whatever its ranks: ``versions`` minus what is reached, and its union with it, are the same without it. Without
    ``reached`` (or with none reached), every unit's rows, in one pass.

    ``entries(ctx, unit, only)``: a unit's entries as (group, batch) pairs, each batch with ``path`` and ``key``
    columns, every group numbered the same way at every call (empty ones included), ``only`` the groups wanted (None:
    all), a group read through ``only`` the same as in a full read. ``rows(unit, batch)``: the versions rows of a
    batch of the unit's entries, row by row (a row's fate is its path's), so it may be given any subset of them.

    Two passes over the units, one unit per thread at a time, so that no more than the rows ranked is ever held: the
    first keeps the paths of each unit's unreached rows (and the hashes of each group's paths), the second decodes
    again only the groups that may hold one of those paths and keeps those paths' rows. A hash collision, or a path
    chosen on one line that another line's group holds without a policy covering it there, costs a decode, never a
    row; without the compiled hashes every group is decoded again. ``rows`` (keep_versions' limits: a regular
    expression per path pattern) sees only the unreached entries, then the chosen paths' entries. Both probe sets
    built once (``KeySet``): ``is_in`` per unit rebuilt the reached keys' table per range."""
    import numpy as np  # noqa: PLC0415

    if reached is None or not reached.num_rows:
        return table_of(runner.map_units(list(version_units), lambda ctx, unit: [
            rows(unit, batch) for _, batch in entries(ctx, unit, None)], make_context, partitions=0),
            units.VERSIONS_SCHEMA)
    held = KeySet(reached["key"])

    def first(ctx, unit: str) -> list[tuple[str, list[pa.Array], dict[int, np.ndarray | None]]]:
        found, spread = [], {}
        for group, batch in entries(ctx, unit, None):
            group_marks = hashes(batch.column("path"))
            spread[group] = None if group_marks is None else np.unique(group_marks)
            unreached = batch.filter(pc.invert(held.holds(batch.column("key"))))
            if unreached.num_rows and (unreached := rows(unit, unreached)).num_rows:
                found.append(pc.unique(unreached.column("path")))
        return [(unit, found, spread)]

    seen = runner.map_units(list(version_units), first, make_context, partitions=0)
    found = [paths for _, unit_paths, _ in seen for paths in unit_paths]
    if not found:
        return units.VERSIONS_SCHEMA.empty_table()
    worth = pa.chunked_array(found, pa.binary())
    paths, marks = KeySet(worth), hashes(worth)
    marks = None if marks is None else np.unique(marks)
    again = {}
    for unit, _, spread in seen:
        groups = {group for group, of_group in spread.items()
                  if of_group is None or marks is None or np.isin(of_group, marks, assume_unique=True).any()}
        if groups:
            again[unit] = groups
    del seen, found

    def of_paths(ctx, unit: str) -> list[pa.RecordBatch]:
        chosen = (batch.filter(paths.holds(batch.column("path"))) for _, batch in entries(ctx, unit, again[unit]))
        return [rows(unit, batch) for batch in chosen if batch.num_rows]

    return table_of(runner.map_units(list(again), of_paths, make_context, partitions=0), units.VERSIONS_SCHEMA)


class ArrowReach(ArrowSteps):
    def reach(self, range_ids: Sequence[str]) -> pa.Table:
        """Every key the ranges' entries point at (one row per entry). Decoding is CPU work: as many ranges at
        once as there are cores (at least two, so that one range's read overlaps another's decode), not one per
        pool thread: each range in flight holds its file and its decompressed blocks."""
        decoders = ThreadRunner(min(self.runner.threads, max(2, os.cpu_count() or 2)))
        batches = decoders.map_units(list(range_ids), lambda ctx, item: [units.range_keys(ctx, item)],
                                     self.config.open, partitions=0)
        table = table_of(batches, columns.KEYS_SCHEMA)
        del batches
        released()
        return table

    def reach_scoped(self, range_ids: Sequence[str], path_policies: tuple[CleaningPolicy, ...]) -> pa.Table:
        """Every key the ranges' entries point at, with its range's ordinal in ``range_ids`` and its path's scope
        (``units.range_scoped_keys``): what ``kept_of`` filters once the driver judged each (range, scope)."""
        decoders = ThreadRunner(min(self.runner.threads, max(2, os.cpu_count() or 2)))
        step = functools.partial(units.range_scoped_keys, path_policies=path_policies)
        batches = decoders.map_units([units.scoped_unit(i, r) for i, r in enumerate(range_ids)],
                                     lambda ctx, item: [step(ctx, item)], self.config.open, partitions=0)
        table = table_of(batches, units.SCOPED_SCHEMA)
        del batches
        released()
        return table

    def scope_pairs(self, scoped: pa.Table) -> list[tuple[int, int]]:
        """The distinct (range ordinal, scope mask) pairs: as many as ranges times the scopes their paths fall in."""
        pairs = scoped.group_by(["range", "scope"], use_threads=False).aggregate([])
        return list(zip(pairs["range"].to_pylist(), pairs["scope"].to_pylist(), strict=True))

    def kept_of(self, scoped: pa.Table, live: Sequence[tuple[int, int]]) -> pa.Table:
        """The keys of the rows whose (range, scope) is ``live``. ``reach_scoped``'s batches are a range each: a
        batch all of whose scopes are live gives its key column as it is (no copy: most ranges of a retained
        history), another only the keys of its live scopes; a batch of several ranges (none today) is joined."""
        scopes: dict[int, set[int]] = {}
        for at, mask in live:
            scopes.setdefault(at, set()).add(mask)
        wanted = pa.table({"range": pa.array([r for r, _ in live], pa.int64()),
                           "scope": pa.array([m for _, m in live], pa.int64())})
        parts = []
        for batch in scoped.to_batches():
            if not batch.num_rows:
                continue
            bounds = pc.min_max(batch.column("range")).as_py()
            if bounds["min"] != bounds["max"]:
                parts.extend(pa.Table.from_batches([batch]).join(wanted, keys=["range", "scope"],
                                                                 join_type="left semi")["key"].chunks)
                continue
            masks = scopes.get(bounds["min"], set())
            if not masks:
                continue
            if set(pc.unique(batch.column("scope")).to_pylist()) <= masks:
                parts.append(batch.column("key"))
            else:
                parts.append(batch.column("key").filter(
                    pc.is_in(batch.column("scope"), value_set=pa.array(sorted(masks), pa.int64()))))
        return pa.Table.from_arrays([pa.chunked_array(parts, pa.string())], schema=columns.KEYS_SCHEMA)

    def versions(self, version_units: Sequence[str], lines: tuple[tuple[CleaningPolicy, ...], ...], *,
                 reached: pa.Table | None = None) -> pa.Table:
        """What keep_versions keeps (of ``units.range_versions``' rows: ``units.versions_of`` the entries of every
        unit, ``units.range_entry_groups``): per line and path, its distinct keys ranked by the position where the
        line first holds them, the first ``keep`` of each (``latest``). With
        ``reached`` (the keys the retained commits reach), only the paths some version of which is not reached are
        ranked (``worth_ranking``): what the others keep is reached anyway, and ranking every path held the run's
        peak (at 1M objects with keep_versions on main, +500–860 MiB for a result of 59 MiB)."""
        decoders = ThreadRunner(min(self.runner.threads, max(2, os.cpu_count() or 2)))
        rows = worth_ranking(decoders, version_units,
                             lambda ctx, unit, only: units.range_entry_groups(ctx, units.version_range(unit),
                                                                              only=only),
                             rows=functools.partial(units.versions_of, lines=lines), reached=reached,
                             make_context=self.config.open)
        kept = self.latest(rows)
        del rows
        released()
        return kept

    def latest(self, rows: pa.Table) -> pa.Table:
        """The keys of ``units.VERSIONS_SCHEMA`` rows within their (line, path)'s first ``keep`` distinct versions,
        ranked by the least position of each."""
        import numpy as np  # noqa: PLC0415

        if not rows.num_rows:
            return columns.KEYS_SCHEMA.empty_table()
        first = rows.group_by(["line", "path", "key"], use_threads=False).aggregate([("at", "min"), ("keep", "max")])
        first = first.take(pc.sort_indices(first, sort_keys=[("line", "ascending"), ("path", "ascending"),
                                                             ("at_min", "ascending")]))
        line, path = first["line"].combine_chunks(), first["path"].combine_chunks()
        position = first["at_min"].to_numpy()
        starts = np.ones(len(first), bool)  # where a (line, path) group starts
        starts[1:] = pc.or_(pc.not_equal(line[1:], line[:-1]), pc.not_equal(path[1:], path[:-1])).to_numpy(
            zero_copy_only=False)
        ties = starts.copy()  # where a run of equal positions starts (none in lakeFS's data: they share a rank)
        ties[1:] |= position[1:] != position[:-1]
        row = np.arange(len(first))
        # SQL's rank(): 1 + the rows of the group before the first of its tie
        rank = np.maximum.accumulate(np.where(ties, row, 0)) - np.maximum.accumulate(np.where(starts, row, 0)) + 1
        kept = first.filter(pa.array(rank <= first["keep_max"].to_numpy()))
        return pa.table({"key": kept["key"].combine_chunks()}, schema=columns.KEYS_SCHEMA)

    def staged(self, files: Sequence[str]) -> pa.Table:
        return self._map(files, units.staged_keys, columns.KEYS_SCHEMA)
