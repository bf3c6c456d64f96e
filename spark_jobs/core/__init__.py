"""The GC's pure decisions, the same on both runners: retention, cleaning policies, SSTables, the mark, the plan,
the mark cache's contents and the report (data and ``now`` in, decisions out; no I/O).

Imports nothing from workers/ or webhook/: it ships alone to Spark executors."""
