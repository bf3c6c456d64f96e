"""Pure GC logic shared by the in-process and the Spark engines (no imports from workers/ or webhook/)."""
