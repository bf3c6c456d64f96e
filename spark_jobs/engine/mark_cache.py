"""The mark's memory: what each range file and metarange held, kept in the repository's namespace so a run reads
only the metadata files it has not seen before (range files and metaranges are immutable and named by content).

Use: on by default (``RunRequest(cache=True)``, ``MarkRequest(cache=True)``, ``tests.gc_engine.Collector(..., cache=True)``);
``gc run --no-cache`` / ``RunRequest(cache=False)`` / ``Collector(endpoint, cache=False)`` reads everything as before.
What the mark took from it is in the run's record: ``Summary.cache`` (summary.json; ``gc show`` prints it).
"""
