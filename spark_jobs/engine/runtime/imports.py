"""Imports a run pays for once per process: begun early on a thread of their own so that they are not paid on the
run's critical path, or not paid at all where nothing in the process needs them."""

from __future__ import annotations

import sys

import pyarrow as pa

from spark_jobs.engine.runtime.parallel import in_background

_begun: list[bool] = []


def warm_arrow_conversion() -> None:
    """pyarrow imports pandas (when installed: PySpark's Arrow functions need it) the first time it converts Python
    values — its pandas shim asks whether a value is a pandas object: 0.2-0.3 s of module bodies in a fresh process
    (measured with py-spy in a daily run at 1M objects: bench/README.md), on whichever thread first builds an array.
    A run begins with requests to lakeFS for its history, which wait on the network; the import runs beside them
    instead of inside the day's listing or plan. Once per process; a thread that needs the import meanwhile waits
    for it (the import lock)."""
    if _begun:
        return
    _begun.append(True)
    in_background("gc-warm-arrow", pa.array, [0])  # a failure shows again where a run converts values


class _PandasNotNow:
    """A finder that answers "no such module" for pandas, for the one conversion ``arrow_without_pandas`` makes."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not needed by this process's Arrow conversions", name="pandas")


def arrow_without_pandas() -> None:
    """A process whose runs are in process (the thread runner: the CLI, a Celery worker) never hands pyarrow a
    pandas object, so pyarrow's question "is this a pandas object?" needs no pandas: the shim is told once that it
    cannot import pandas, and answers "no" from then on without importing it (0.3 s of a fresh process's CPU, under
    the GIL, and 44 MiB; measured in a daily run on versitygw, where the GIL is what the run waits on). Only that
    question is answered so: anything that asks pyarrow for pandas itself (``to_pandas``, ``from_pandas`` schemas)
    imports it then, and a plain ``import pandas`` is untouched. Nothing changes once pandas is imported, or when
    pyarrow has already looked for it. PySpark's driver imports pandas for its Arrow functions: a Spark run keeps
    ``warm_arrow_conversion``."""
    if _begun or "pandas" in sys.modules:
        return
    _begun.append(True)
    finder = _PandasNotNow()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # the shim looks for pandas once: now, while the finder says there is none
    finally:
        sys.meta_path.remove(finder)
