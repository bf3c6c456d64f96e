"""The GC's pure decisions, the same on both runners (data and ``now`` in, decisions out; no I/O): retention,
cleaning (policies), durations, addresses, sstable (range and metarange files), range_arrow (a range as Arrow
columns), range_changes (a day's change between dead and new ranges), columns (the rules over Arrow columns),
mark, plan, mark_cache and cache_segments (the cache's contents and how it is stored), incremental (what a run leaves for the next),
kept_index (in parts), slices, inventory_url, freeing (whether deleted bytes are freed), report (lakeFS's report
layout) and parquet_bytes (a Parquet file in memory, read on the calling thread).

Imports nothing from workers/ or webhook/: it ships alone to Spark executors."""
