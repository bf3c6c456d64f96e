"""Pure GC logic shared by the in-process engine and the PySpark jobs: retention, SSTables, mark, plan, storage."""
