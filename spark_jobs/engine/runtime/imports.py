"""What a run's process need not import: pyarrow asks, the first time it converts Python values, whether a value is
a pandas object, and imports pandas to answer (0.3 s of a fresh process's CPU under the GIL, 44 MiB)."""

from __future__ import annotations

import sys

import pyarrow as pa

_done: list[bool] = []


class _PandasNotNow:
    """A finder that answers "no such module" for pandas, for the one conversion ``arrow_without_pandas`` makes."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not needed by this process's Arrow conversions", name="pandas")


def arrow_without_pandas() -> None:
    """The engine never hands pyarrow a pandas object, so pyarrow's question "is this a pandas object?" needs no
    pandas: its shim is told once, at a run's start, that it cannot import pandas, and answers "no" from then on
    without importing it. Measured in a daily run at 1M objects on versitygw, where the GIL is what the run waits
    on: 1.47 → 1.14 s (bench/README.md). Only that question is answered so: whatever asks pyarrow for pandas itself
    (``to_pandas``, ``from_pandas`` schemas) imports it then, and a plain ``import pandas`` (PySpark's, for its
    Arrow functions) is untouched. Nothing changes once pandas is imported, or once pyarrow has looked for it."""
    if _done or "pandas" in sys.modules:
        return
    _done.append(True)
    finder = _PandasNotNow()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # the shim looks for pandas once: now, while the finder says there is none
    finally:
        sys.meta_path.remove(finder)
