"""A GC run as datasets, not Python objects: what retained commits reach, what the store holds, their difference
under the safety rules (``core.columns.judge``), the plan written in parts, and the kept index for the next run. One
logical plan (``plan/datasets.py``), two backends: ``arrow`` in process (pyarrow tables and compute, on the thread
runner), ``spark`` on executors (Spark DataFrames: ``mapInArrow``, an anti-join, the plan written by executors).

Each step's two halves sit side by side in the step's package (``reach/arrow.py`` and ``reach/spark.py``,
``listing/…``, ``plan/…``, ``state/…``); here each backend class puts its halves together over a base of what its
steps share (``arrow_base``, ``spark_base``). Both call the per-unit steps of ``plan/units.py``, so that both give
the same plan; the driver keeps only what grows with commits and ranges."""
