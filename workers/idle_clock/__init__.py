"""The idle clock: hook events, the Redis store, the reconciler, `hooks install`, tasks, schedule and CLI."""
