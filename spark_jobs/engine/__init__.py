"""The Spark-side GC engine: one run over a ``Runner`` (threads in-process, executors on Spark), with a REST
lakeFS client usable on executors. A second implementation of the steps in ``spark_jobs/core`` + ``workers/gc``,
kept while the two are unified (see the session notes): ``gc run --engine spark`` uses it."""
