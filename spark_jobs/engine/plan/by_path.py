"""A plan's objects named by the logical path some commit gave them (``--by-path``, ``gc show --by-prefix``: Hudi's
partitions rather than the store's ``data/<slice>/``), read from the ranges of the whole history."""

from __future__ import annotations

from spark_jobs.core import sstable
from spark_jobs.core.retention import commit_from_api
from spark_jobs.engine.runtime.context import OpenContext
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi
from spark_jobs.engine.runtime.repository import Graph


def history_metaranges(api: LakeFSApi, repository_id: str, graph: Graph) -> list[str]:
    """The metaranges of every commit of every branch's whole log (merged lines too) and of every commit the mark
    already knows (commits only: read on the driver)."""
    known = dict(graph.commits)
    for head in sorted(set(graph.heads.values())):
        for body in api.log(repository_id, head):
            known.setdefault(body["id"], commit_from_api(body))
    return sorted({c.meta_range_id for c in known.values() if c.meta_range_id})


def paths_of(api: LakeFSApi, ctx: OpenContext, graph: Graph, *, keys: set[str]) -> dict[str, str]:
    """The path some commit gave each of ``keys`` (Hudi's partitions for `--by-prefix`): the first path found in
    the ranges of the history (``history_metaranges``) in range id order, each distinct range read once. (The
    dataset plan's ``by_path`` step names them the same way on its backend.)"""
    import pyarrow as pa  # noqa: PLC0415 - only `--by-path` naming reads ranges as Arrow here
    import pyarrow.compute as pc  # noqa: PLC0415

    from spark_jobs.core import range_arrow  # noqa: PLC0415

    if not keys:
        return {}
    metaranges = history_metaranges(api, ctx.config.repository_id, graph)
    ranges = sorted({r for m in metaranges for r in sstable.metarange_range_ids(ctx.read_metarange(m))})
    paths: dict[str, str] = {}
    asked = pa.array(sorted(keys), pa.string())
    for range_id in ranges:
        batch = range_arrow.range_batch(ctx.read_range(range_id))
        found = range_arrow.relative_keys(batch, ctx.prefixes)
        hit = pc.is_in(found, value_set=asked)  # the few entries asked for, out of the range's thousands
        for path, key in zip(pc.filter(batch.column(0), hit).to_pylist(), pc.filter(found, hit).to_pylist(),
                             strict=True):
            if key not in paths:
                paths[key] = path.decode(errors="replace")
        if len(paths) == len(keys):
            break
    return paths
