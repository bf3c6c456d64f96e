"""The range cache (engine/runtime/range_cache.py) on a real folder: what it keeps, what it gives back, what it
trims, and that nothing it cannot do fails a run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from spark_jobs.engine.runtime.range_cache import RangeCache, RangeCacheSettings

MIB = 1 << 20


def rid(n: int) -> str:
    return f"{n:064x}"


def cache_at(folder: Path, namespace: str = "s3://bucket/repo", mib: int = 1) -> RangeCache:
    cache = RangeCache.open(RangeCacheSettings(str(folder), mib), namespace)
    assert cache is not None
    return cache


def test_a_kept_copy_comes_back_mapped_and_equal(tmp_path):
    cache = cache_at(tmp_path)
    assert cache.get(rid(1)) is None
    data = os.urandom(5000)
    cache.put(rid(1), data)
    copy = cache.get(rid(1))
    assert copy is not None and copy[:] == data and copy[100:200] == data[100:200]
    assert not [p for p in cache.folder.iterdir() if p.name.startswith(".tmp-")]  # renamed, nothing half-written


def test_namespaces_do_not_share_copies(tmp_path):
    a, b = cache_at(tmp_path, "s3://bucket/a"), cache_at(tmp_path, "s3://bucket/b")
    a.put(rid(1), b"from a")
    assert b.get(rid(1)) is None and a.get(rid(1))[:] == b"from a"


@pytest.mark.parametrize("name", ["../escape", "ABC", "", "0" * 8, "0" * 64 + "/x", "g" * 64])
def test_a_name_that_is_not_a_range_id_is_neither_kept_nor_looked_up(tmp_path, name):
    cache = cache_at(tmp_path)
    cache.put(name, b"data")
    assert cache.get(name) is None
    assert list(cache.folder.iterdir()) == []
    assert not (tmp_path / "escape").exists()


def test_the_least_recently_used_copies_go_first_when_the_folder_is_full(tmp_path):
    cache = cache_at(tmp_path, mib=1)
    other = cache_at(tmp_path, "gs://elsewhere/repo", mib=1)
    chunk = os.urandom(300 * 1024)
    for n in range(3):  # 900 KiB: fits
        cache.put(rid(n), chunk)
        os.utime(cache.folder / rid(n), (time.time() - 100 + n, time.time() - 100 + n))
    assert cache.get(rid(0)) is not None  # used now: the most recent
    other.put(rid(9), chunk)  # 1.2 MiB over both namespaces: the least recent (rid 1) goes
    kept = {p.name for p in cache.folder.iterdir()}
    assert kept == {rid(0), rid(2)}, kept
    assert (other.folder / rid(9)).exists()
    assert sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()) <= MIB


def test_the_trim_touches_nothing_but_its_own_files(tmp_path):
    mine = tmp_path / "unrelated.txt"
    mine.write_bytes(b"x" * (2 * MIB))  # the folder was pointed at a place that holds other things
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / rid(5)).write_bytes(b"y" * (2 * MIB))
    cache = cache_at(tmp_path, mib=1)
    cache.put(rid(1), b"z" * 1000)
    assert mine.exists() and (folder / rid(5)).exists() and cache.get(rid(1)) is not None


def test_a_stale_temporary_file_is_removed_and_a_fresh_one_left(tmp_path):
    cache = cache_at(tmp_path)
    stale, fresh = cache.folder / ".tmp-1-dead", cache.folder / ".tmp-2-live"
    for f in (stale, fresh):
        f.write_bytes(b"partial")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    cache.put(rid(1), b"data")
    assert not stale.exists() and fresh.exists()


def test_a_file_bigger_than_the_cache_is_not_kept(tmp_path):
    cache = cache_at(tmp_path, mib=1)
    cache.put(rid(1), b"x" * (MIB + 1))
    assert cache.get(rid(1)) is None


def test_an_empty_copy_is_dropped(tmp_path):
    cache = cache_at(tmp_path)
    (cache.folder / rid(1)).write_bytes(b"")
    assert cache.get(rid(1)) is None and not (cache.folder / rid(1)).exists()


def test_a_folder_that_cannot_be_made_turns_the_cache_off(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    assert RangeCache.open(RangeCacheSettings(str(blocker / "ranges"), 1), "s3://b/r") is None
    assert RangeCache.open(None, "s3://b/r") is None


def test_a_copy_that_cannot_be_written_is_only_not_kept(tmp_path):
    cache = cache_at(tmp_path)
    (cache.folder / rid(1)).mkdir()  # a folder where the copy goes: the rename fails, as on a full disk
    (cache.folder / rid(1) / "x").write_bytes(b"")
    cache.put(rid(1), b"data")  # no error
    assert cache.get(rid(1)) is None
    assert not [p for p in cache.folder.iterdir() if p.name.startswith(".tmp-")]


def test_home_is_each_process_own(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    cache = RangeCache.open(RangeCacheSettings("~/ranges", 1), "s3://b/r")
    assert cache is not None and cache.folder.parent == tmp_path / "ranges"


@pytest.mark.parametrize(("folder", "mib"), [("", 1), ("x", 0), ("x", -1)])
def test_settings_that_cannot_work_are_refused(folder, mib):
    with pytest.raises(ValueError, match="range cache"):
        RangeCacheSettings(folder, mib)


def test_a_folder_others_can_write_into_is_not_used(tmp_path):
    """Copies decide what a run deletes: a namespace folder another account could write into is refused."""
    cache = cache_at(tmp_path)
    cache.put(rid(1), b"data")
    cache.folder.chmod(0o777)
    assert RangeCache.open(RangeCacheSettings(str(tmp_path), 1), "s3://bucket/repo") is None
    cache.folder.chmod(0o700)
    assert RangeCache.open(RangeCacheSettings(str(tmp_path), 1), "s3://bucket/repo").get(rid(1))[:] == b"data"
    assert cache.folder.stat().st_mode & 0o777 == 0o700  # as it makes it
