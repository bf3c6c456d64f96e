"""Imports a run pays for once per process, begun early on a thread of their own so that they are not paid on the
run's critical path."""

from __future__ import annotations

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
