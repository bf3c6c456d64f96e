"""Reach: what the retained commits keep alive. The committed metadata read as files or through the mark cache
(``mark_source``, ``mark_cache``), or, on a daily run, only what changed applied to the previous run's kept index
(``lean_mark``)."""
