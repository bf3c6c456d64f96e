"""The plumbing every step uses: where the work runs (``parallel``: the runners) and what a unit of work opens
(``context``, with the copies of range files it keeps between daily runs: ``range_cache``), the lakeFS view
(``lakefs_api``, ``repository``), Redis (``redis_connect``, ``redis_ack``), and Python's collector paused in big
builds (``cyclic_gc``)."""
