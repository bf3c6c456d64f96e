"""Committed garbage collection as a service: what wraps a run of the one engine (``spark_jobs``) — GC rules,
cleaning policies and savepoints, the runner's choice, Spark submission, the lease, run history, metrics, tasks,
schedule and CLI. No engine of its own."""
