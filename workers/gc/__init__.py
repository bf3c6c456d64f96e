"""Committed garbage collection: GC rules, the in-process engine (mark, plan, sweep), Spark submission, run history, tasks, schedule, CLI."""
