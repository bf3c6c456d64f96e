"""A GC run as datasets, not Python objects: what retained commits reach (``reach``), what the store holds
(``listing``), their difference under the safety rules (``core.columns.judge``), the plan written in parts, the
sweep of those parts, and the kept index for the next run. One logical plan (``plan.py``), two backends side by
side: ``arrow.py`` in process (pyarrow tables and compute, on the thread runner), ``spark.py`` on executors (Spark
DataFrames: ``mapInArrow``, an anti-join, the plan written and swept by executors). Both call the per-unit steps
of ``units.py``, so that both give the same plan; the driver keeps only what grows with commits and ranges."""
