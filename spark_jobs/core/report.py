"""The run's record in the namespace, where lakeFS's own GC writes it, so tools that read its reports work:
``_lakefs/retention/gc/unified/<run_id>/summary.json`` and ``deleted/`` (parquet, column ``address``).

The mark writes it (``success`` true once the plan is complete) before anything is deleted; the sweep executes
only a plan whose summary says it succeeded, and rewrites the summary with what it did.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass, field

from spark_jobs.core import parquet_bytes

REPORT_PREFIX = "_lakefs/retention/gc/unified"
FORMAT = 2  # the plan layout; a plan of another format is never swept


@dataclass
class Summary:
    run_id: str
    repository_id: str
    success: bool
    start_time: str
    cutoff_time: str
    num_deleted_objects: int
    deleted_bytes: int = 0
    retained_commits: int = 0
    kept_objects: int = 0
    candidates: int = 0
    too_new: int = 0
    phase: str = "mark"  # mark | swept
    swept: int = 0
    spared_by_recheck: int = 0
    capped: int = 0  # left for the next run by the per-run deletion cap
    dry_run: bool = False
    by_prefix: dict = field(default_factory=dict)  # physical: data/<slice> -> [objects, bytes]
    by_path: dict = field(default_factory=dict)  # logical path prefix -> [objects, bytes], when asked for
    oldest_retained: dict = field(default_factory=dict)  # branch -> oldest retained commit on its first-parent line
    policies: list = field(default_factory=list)  # "gc rules" and the ids of the cleaning policies applied
    error: str | None = None
    format: int = FORMAT
    marked: bool = False  # the mark completed and its plan is whole: the only plans a sweep executes
    runner: str = ""  # the runner: threads | spark (older versions wrote engine: inprocess | spark)
    storage_namespace: str = ""
    local_root: str | None = None  # the local blockstore's folder, for a local:// namespace
    min_age_seconds: float = 0.0
    commits: int = 0  # commits read
    lakefs_retained_commits: int = 0
    metaranges: int = 0
    ranges: int = 0  # distinct range files the mark read
    uncommitted_addresses: int = 0
    seconds: dict = field(default_factory=dict)  # phase -> seconds
    delete_requests: int = 0
    backoffs: int = 0  # times the store throttled the sweep and the rate backed off
    num_failed: int = 0
    failed: list = field(default_factory=list)  # the first failures of the sweep
    new_ranges_read: int = 0  # by the sweep's re-check
    # what the mark took from its cache: state used|empty|ignored|off, reason, {ranges,metaranges}_{cached,read},
    # stale_entries (dropped: their file is gone or changed size), written, write (appended|compacted|unchanged)
    cache: dict = field(default_factory=dict)
    swept_at: str | None = None
    # how the mark found the namespace's objects: kind full (listed: slices, objects) | inventory (report,
    # report_time, files, objects)
    listing: dict = field(default_factory=dict)
    # whether what the sweep deleted is freed (core.freeing.Verdict.as_dict), and the deleted bytes split by it:
    # freed at once, or still billed (noncurrent or soft-deleted) until pending_until (None: never, or unknown)
    freeing: dict = field(default_factory=dict)
    bytes_freed: int = 0
    bytes_pending: int = 0
    pending_until: str | None = None
    purged_versions: int = 0  # noncurrent versions removed by GC__PURGE_NONCURRENT, and their bytes
    purged_bytes: int = 0
    purge_failed: list = field(default_factory=list)  # the first versions the purge could not remove
    # A plan written in parts by the dataset steps: [part number, objects] of each, in key order (empty: the one
    # part-00000 of num_deleted_objects)
    plan_parts: list = field(default_factory=list)

    @classmethod
    def parse(cls, data: bytes) -> Summary:
        return cls.from_dict(json.loads(data))

    @classmethod
    def from_dict(cls, raw: dict) -> Summary:
        """Fields this class does not know (an engine's own extras) are left out; an older version's record reads
        as a new one (``upgrade_record``)."""
        raw = upgrade_record(raw)
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})

    def as_dict(self) -> dict:
        return asdict(self)

    def dumps(self) -> bytes:
        return json.dumps(self.as_dict(), indent=2, sort_keys=True).encode()


def upgrade_record(raw: dict) -> dict:
    """A summary or run-history record as this version writes it: older versions named the runner ``engine``
    (and its reason ``engine_reason``), and the thread runner ``inprocess``."""
    if "engine" not in raw and "engine_reason" not in raw:
        return raw
    new = {k: v for k, v in raw.items() if k not in ("engine", "engine_reason")}
    if "engine" in raw:
        new.setdefault("runner", "threads" if raw["engine"] == "inprocess" else raw["engine"])
    if "engine_reason" in raw:
        new.setdefault("runner_reason", raw["engine_reason"])
    return new


def describe_cache(cache: dict) -> str:
    """One line on what the mark took from its cache (empty for records without one, and for sweeps)."""
    state = cache.get("state")
    if not state:
        return ""
    if state == "off":
        return "mark cache: off (--no-cache): every range and metarange read"
    counts = (f"{cache.get('ranges_cached', 0):,} ranges and {cache.get('metaranges_cached', 0):,} metaranges from "
              f"the cache, {cache.get('ranges_read', 0):,} ranges and {cache.get('metaranges_read', 0):,} "
              "metaranges read")
    why = f" (cache ignored: {cache.get('reason')})" if state == "ignored" else \
        " (no cache yet)" if state == "empty" else \
        f" ({cache['stale_entries']:,} stale entries dropped)" if cache.get("stale_entries") else ""
    written = {"appended": "; what was read is appended to the cache", "compacted": "; the cache is written anew",
               "unchanged": "; the cache is unchanged"}.get(cache.get("write", ""), "")
    return f"mark cache: {counts}{why}" + (written if cache.get("written", True) else
                                          "; the new cache was not written")


def describe_listing(listing: dict) -> str:
    """How the mark found the namespace's objects, and why a full listing ran (empty for records without it, and
    for sweeps)."""
    if listing.get("kind") == "incremental":
        return (f"listing: incremental since {listing.get('since', '?')[:19]} (run {listing.get('previous_run')}): "
                f"{listing.get('objects', 0):,} objects in {listing.get('slices', 0):,} of "
                f"{listing.get('slices_total', 0):,} slices and the root, {listing.get('found_without_listing', 0):,} "
                f"found without listing ({listing.get('checked', 0):,} asked for)")
    if listing.get("kind") == "inventory":
        store = "Azure Blob" if ".core.windows.net/" in str(listing.get("report", "")) else "S3"
        line = (f"listing: none, {listing.get('objects', 0):,} objects from the {store} Inventory report of "
                f"{listing.get('report_time', '?')} ({listing.get('files', 0):,} files, {listing.get('report')})")
    elif listing.get("kind") == "full":
        line = f"listing: full, {listing.get('objects', 0):,} objects in {listing.get('slices', 0):,} slices and the root"
    else:
        return ""
    if listing.get("reason"):
        line += f"; full because {listing['reason']}"
    if listing.get("missed_by_incremental") is not None:
        line += f"; {listing['missed_by_incremental']:,} deleted objects an incremental run would have missed"
    return line


def run_dir(run_id: str) -> str:
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise ValueError(f"bad GC run id {run_id!r}")
    return f"{REPORT_PREFIX}/{run_id}"


def summary_key(run_id: str) -> str:
    return f"{run_dir(run_id)}/summary.json"


def deleted_key(run_id: str) -> str:
    return plan_part_key(run_id, 0)


def plan_part_key(run_id: str, part: int) -> str:
    """One part of a plan's deleted list; a plan in parts names them in ``Summary.plan_parts``."""
    return f"{run_dir(run_id)}/deleted/part-{part:05d}.parquet"


def ranges_key(run_id: str) -> str:
    """The ranges a mark read (so the sweep's re-check reads only new ones); absent from older plans."""
    return f"{run_dir(run_id)}/ranges.json"


def retained_key(run_id: str) -> str:
    """The commits the mark retained (so the sweep's re-check reads only HEADs that moved off them)."""
    return f"{run_dir(run_id)}/retained.json"


def pending_state_key(run_id: str) -> str:
    """The incremental state the plan's sweep stores (``engine.state.incremental.promote``); absent from dry runs."""
    return f"{run_dir(run_id)}/incremental-state.json.gz"


def pending_index_key(run_id: str) -> str:
    """The kept index's base beside it, when the mark built one."""
    return f"{run_dir(run_id)}/incremental-kept-index.bin"


def index_part_key(run_id: str, part: int) -> str:
    """One part of the kept index's base a run built (``core.kept_index``, in parts); the state names the run."""
    return f"{run_dir(run_id)}/kept-index/part-{part:05d}.bin"


def pending_delta_key(run_id: str) -> str:
    """The kept index's delta beside it, when the mark brought the stored index up to date."""
    return f"{run_dir(run_id)}/incremental-kept-delta.bin"


def deleted_parquet(addresses: list[str], sizes: list[int]) -> bytes:
    import pyarrow as pa  # noqa: PLC0415 - only when a report is written
    import pyarrow.parquet as pq  # noqa: PLC0415

    table = pa.table({"address": pa.array(addresses, pa.string()), "size": pa.array(sizes, pa.int64())})
    out = io.BytesIO()
    pq.write_table(table, out, compression="snappy")
    return out.getvalue()


def read_deleted(data: bytes) -> tuple[list[str], list[int]]:
    table = parquet_bytes.read(data)
    sizes = table.column("size").to_pylist() if "size" in table.column_names else [0] * table.num_rows
    return table.column("address").to_pylist(), sizes


def plan_fingerprint(summary: Summary, deleted: list[str]) -> dict:
    """What both runners must agree on: the deleted set and the decision's fields (not the run id, the runner,
    nor timings)."""
    skip = {"run_id", "runner", "seconds", "by_path", "start_time", "cutoff_time", "cache", "listing", "plan_parts"}
    fields = summary.as_dict()
    return {"deleted": sorted(deleted), **{k: fields[k] for k in sorted(fields) if k not in skip}}
