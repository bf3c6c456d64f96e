"""The store contract's listing, page by page (``Namespace.list_unit_batches``), on every store's real server
(the places of test_store_contract.py): a slice and a root longer than a page are listed whole, each object once
(no page dropped, none read twice), in batches no longer than a page, exactly as fsspec's own listing of the unit
describes them (key, size, modification time); a page the store throttles is asked again, not the listing."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from spark_jobs.core.columns import LISTING_SCHEMA
from spark_jobs.engine.stores import Namespace
from tests.integration.stores.test_store_contract import CLOUDS, KINDS, Place, new_place
from tests.services import FaultProxy

SLICE = {**{f"data/aa/k{i:02d}": i for i in range(11)}, "data/aa/sub/one": 21, "data/aa/sub/deeper/two": 22,
         "data/aa/zz": 0}
ROOT = {f"legacy-{i}": 30 + i for i in range(7)}
ELSEWHERE = {"dummy": 1, "_lakefs/range-1": 2, "_lakefs/aa/x": 3, "data/ab/k": 4, "data/a/k": 5, "other/deep": 6}


@pytest.fixture(params=KINDS)
def place(request, store_of) -> Place:
    return new_place(store_of(request.param))


def rows(ns: Namespace, unit: str) -> tuple[list[tuple[str, int, float]], list[int]]:
    """Every (key, size, mtime) the unit's batches hold, repeats kept and sorted, and each batch's length."""
    batches = list(ns.list_unit_batches(unit))
    assert all(b.schema == LISTING_SCHEMA for b in batches)
    found = [row for b in batches for row in zip(*(c.to_pylist() for c in b.columns), strict=True)]
    return sorted(found), [b.num_rows for b in batches]


def put(place: Place, files: dict[str, int]) -> None:
    place.put({key: b"x" * size for key, size in files.items()})


def test_a_unit_longer_than_a_page_is_listed_whole_each_object_once(place):
    put(place, {**SLICE, **ROOT, **ELSEWHERE})
    if place.store.kind == "local":  # what fsspec's local store lists too: a link (the size of what it points at)
        os.symlink(place.path("data/aa/k10"), place.path("data/aa/link"))
    ns = place.open()
    ns.page_size = 3
    slice_rows, lengths = rows(ns, "data/aa/")
    want = dict(SLICE, **({"data/aa/link": 10} if place.store.kind == "local" else {}))
    assert [(k, s) for k, s, _ in slice_rows] == sorted(want.items())  # none dropped, none twice
    assert max(lengths) <= 3 and len(lengths) >= len(want) // 3
    root_rows, lengths = rows(ns, "")
    assert [(k, s) for k, s, _ in root_rows] == sorted(ROOT.items())
    assert max(lengths) <= 3
    assert sorted((o.key, o.size, o.mtime) for o in ns.list_unit("data/aa/")) == slice_rows
    assert rows(ns, "data/zz/") == ([], [])
    # exactly what the unit's fsspec listing (the store's library, the whole unit at once) says of each object
    ns._unit_pages = functools.partial(Namespace._unit_pages, ns)  # noqa: SLF001
    assert rows(ns, "data/aa/")[0] == slice_rows
    assert rows(ns, "")[0] == root_rows


@pytest.mark.parametrize("kind", CLOUDS)
def test_a_throttled_page_is_asked_again(kind, store_of):
    place = new_place(store_of(kind))
    put(place, SLICE)
    proxy = FaultProxy(place.store.endpoint, kind, every=2, match=lambda method, target: method == "GET").start()
    try:  # every second listing page answered "slow down": that page again after a back-off
        ns = place.open(proxy.url, max_in_flight=3)
        ns.page_size = 4
        found, lengths = rows(ns, "data/aa/")
    finally:
        proxy.cleanup()
    assert [(k, s) for k, s, _ in found] == sorted(SLICE.items())
    assert len(lengths) >= 4 and proxy.throttled >= 2 and ns.throttle.stats.backoffs >= 2


def test_a_local_folder_that_cannot_be_read_is_left_out_as_fsspec_leaves_it(store_of):
    place = new_place(store_of("local"))
    put(place, {"data/aa/k": 1, "data/aa/locked/k": 2})
    locked = Path(place.path("data/aa/locked"))
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("this user reads any folder (root)")
        ns = place.open()
        assert [k for k, _, _ in rows(ns, "data/aa/")[0]] == ["data/aa/k"]
        ns._unit_pages = functools.partial(Namespace._unit_pages, ns)  # noqa: SLF001
        assert [k for k, _, _ in rows(ns, "data/aa/")[0]] == ["data/aa/k"]
    finally:
        locked.chmod(0o755)
