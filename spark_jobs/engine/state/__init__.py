"""State: what a run records and leaves for the next: its records in the namespace (``report``: summary, plan,
what the mark read) and the incremental state with its kept index (``incremental``)."""
