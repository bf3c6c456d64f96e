"""A set of strings (or byte strings) built once and probed many times, as Arrow columns (pure).

Arrow's ``is_in`` builds a hash table of its value set at every call: probing a million reached keys against each
range's rows one range at a time rebuilt that table once per range, and the ways around it (probing in big blocks,
or making the few keys distinct and probing the big tables against them) held copies of the rows or of the keys.
``KeySet`` builds its table once, in
compiled code (``lakefs_rangewalk.keyset``, native/keyset.c): it reads the columns' buffers in place, copies no
string, and answers ``holds`` exactly (equal hashes are compared byte for byte) without the GIL, from many threads
at once. Without the compiled module it falls back to ``is_in`` (the same answers, a table built per call).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.core import range_arrow

_WIDE = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}


Strings = pa.Array | pa.ChunkedArray | Sequence[pa.Array | pa.ChunkedArray]


def _chunks(values: Strings) -> list[pa.Array]:
    if isinstance(values, pa.Array):
        chunks = [values]
    elif isinstance(values, pa.ChunkedArray):
        chunks = values.chunks
    else:
        chunks = [chunk for v in values for chunk in _chunks(v)]
    out = []
    for chunk in chunks:
        if chunk.type in _WIDE:
            chunk = chunk.cast(_WIDE[chunk.type])
        elif chunk.type not in (pa.string(), pa.binary()):
            raise TypeError(f"a key set holds strings or byte strings, not {chunk.type}")
        if len(chunk):
            out.append(chunk)
    return out


def _column(chunk: pa.Array) -> tuple[object, object, int, int]:
    """What the compiled set reads of a column: its offsets and bytes buffers, first row and rows."""
    _, offsets, data = chunk.buffers()
    return offsets, data if data is not None else b"", chunk.offset, len(chunk)


def hashes(values: Strings) -> np.ndarray | None:
    """Each row's 64-bit hash (equal strings, equal hashes; a null's is of whatever bytes its slot spans), or None
    without the compiled module: what can rule a string out of a set cheaply (a hash not among the set's rules it
    out; an equal hash proves nothing)."""
    native = range_arrow._native  # noqa: SLF001
    if native is None:
        return None
    chunks = _chunks(values)
    if not chunks:
        return np.empty(0, np.uint64)
    return np.concatenate([np.frombuffer(native.hashes(_column(c)), np.uint64) for c in chunks])


class KeySet:
    """The distinct non-null values of ``values`` (Arrow string or binary arrays, chunked or not, or a list of
    them)."""

    def __init__(self, values: Strings) -> None:
        chunks = [c.drop_null() if c.null_count else c for c in _chunks(values)]
        native = range_arrow._native  # noqa: SLF001
        self._native = native
        self._chunks = chunks  # the set reads their buffers in place: they live as long as it does
        if native is not None:
            self._set = native.keyset([_column(c) for c in chunks])
        else:
            self._values = pa.concat_arrays([c.cast(pa.binary()) for c in chunks]) if chunks else pa.array([], pa.binary())

    def __len__(self) -> int:
        if self._native is not None:
            return self._native.keyset_size(self._set)
        return len(pc.unique(self._values))

    def holds(self, values: pa.Array | pa.ChunkedArray) -> pa.BooleanArray:
        """For each row of ``values``, whether the set has it (false for a null)."""
        if isinstance(values, pa.ChunkedArray):
            parts = [self.holds(c) for c in values.chunks]
            return pa.concat_arrays(parts) if parts else pa.array([], pa.bool_())
        if not len(values):
            return pa.array([], pa.bool_())
        chunk = _chunks(values)[0]
        if self._native is None:
            found = pc.is_in(chunk.cast(pa.binary()), value_set=self._values)
        else:
            found = pa.array(np.frombuffer(self._native.holds(self._set, _column(chunk)), np.bool_))
        return pc.and_(found, chunk.is_valid()) if chunk.null_count else found
