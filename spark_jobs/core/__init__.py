"""Pure GC logic shared by the in-process and the Spark engines: retention, SSTables, mark, plan, storage.

Imports nothing from workers/ or webhook/: it ships alone to Spark executors."""
