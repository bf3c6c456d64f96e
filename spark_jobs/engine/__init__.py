"""The one GC engine: a run (mark, sweep, report) over a ``Runner`` that spreads its per-unit work (threads in
process, executors on Spark), deciding with the pure functions of ``spark_jobs.core`` and reaching the world through
the lakeFS view (``lakefs_api``, a REST client usable on executors) and the namespace (the stores). ``workers.gc``
only wraps a run (lock, history, metrics); both runners run this same code."""
