"""The dataset plan's two backends decide alike: the Spark backend's judge (an anti-join and aggregates on
executors) equals the Arrow one (core.columns.judge, itself equal to core.plan.plan_deletions) on random listings,
kept keys, cutoffs and prefix depths, and so do the counts that prove the incremental rule (missed)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from spark_jobs.core import columns
from spark_jobs.engine.backends.arrow import ArrowBackend
from spark_jobs.engine.backends.spark import SparkBackend
from spark_jobs.engine.runtime.parallel import ThreadRunner
from tests.unit.gc.test_columns import random_key

pytestmark = pytest.mark.spark


def frame(spark, table: pa.Table):
    return spark.createDataFrame(table.to_pylist(), ", ".join(
        f"{f.name} {'string' if f.type == pa.string() else 'bigint' if f.type == pa.int64() else 'double'}"
        for f in table.schema)) if table.num_rows else spark.createDataFrame([], "key string, size bigint, "
                                                                                 "mtime double"
                                                                          if "mtime" in table.schema.names
                                                                          else "key string")


@pytest.mark.parametrize("seed", range(4))
def test_spark_judge_equals_arrow_judge(spark_context, seed: int) -> None:
    rnd = random.Random(seed)
    keys = sorted({random_key(rnd) for _ in range(rnd.randint(0, 300))} | {f"data/s{i % 5}/o{i}" for i in range(80)})
    listed = pa.table({"key": keys, "size": [rnd.randint(0, 10**6) for _ in keys],
                       "mtime": [rnd.uniform(0, 100) for _ in keys]}, schema=columns.LISTING_SCHEMA)
    reached = pa.table({"key": pa.array([k for k in keys if rnd.random() < 0.3] * 2, pa.string())})
    staged = pa.table({"key": pa.array([k for k in keys if rnd.random() < 0.1] + ["data/x/never-listed"],
                                       pa.string())})
    cutoff, depth = rnd.uniform(0, 100), rnd.randint(1, 3)
    arrow = ArrowBackend(ThreadRunner(2), config=None)  # type: ignore[arg-type]
    spark = SparkBackend(spark_context, config=None, partitions=2)  # type: ignore[arg-type]
    expected_table, expected = arrow.judge(listed, [reached, staged], cutoff=cutoff, prefix_depth=depth)
    deleted, got = spark.judge(frame(spark.spark, listed), [frame(spark.spark, reached), frame(spark.spark, staged)],
                               cutoff=cutoff, prefix_depth=depth)
    try:
        assert got == expected
        assert sorted(r["address"] for r in deleted.collect()) == expected_table["address"].to_pylist()
        # the kept side is never collected to the driver to be broadcast, however small (AQE would under 10 MB)
        executed = deleted._jdf.queryExecution().executedPlan().toString()
        assert "Join" in executed and "Broadcast" not in executed, executed
        assert spark.count_distinct(frame(spark.spark, staged)) == arrow.count_distinct(staged)
        assert spark.slices_of(deleted) == arrow.slices_of(expected_table)
        # the counts the judge's jobs left for later steps equal what a job of their own finds (a frame the judge
        # did not return is counted anew)
        again = deleted.select("address", "size")
        assert spark.slices_of(again) == arrow.slices_of(expected_table)
        assert spark.count(deleted) == spark.count(again) == expected_table.num_rows
        listed_frame = frame(spark.spark, listed)
        spark.judge(listed_frame, [frame(spark.spark, reached)], cutoff=cutoff, prefix_depth=depth)
        assert spark.count(listed_frame) == spark.count(listed_frame.select("*")) == listed.num_rows
        recent = {"", *arrow.slices_of(expected_table)[:2]}
        checked = keys[::3]  # (the keys the state carries; dead ranges: tests/integration/gc)
        assert spark.missed(deleted, recent=recent, dead=[], carried=checked) == arrow.missed(
            expected_table, recent=recent, dead=[], carried=checked)
        only = arrow.keys_not_in(staged, reached, most=10**6)
        assert spark.keys_not_in(frame(spark.spark, staged), frame(spark.spark, reached), most=len(only)) == only
        assert spark.keys_not_in(frame(spark.spark, staged), frame(spark.spark, reached), most=len(only) - 1) is None
    finally:
        spark.release()


@pytest.mark.parametrize("seed", range(3))
def test_spark_scoped_reach_equals_arrow(spark_context, seed: int) -> None:
    """Path policies on the dataset plan: the distinct (range, scope) pairs and the keys of the live ones."""
    from spark_jobs.engine.plan import units  # noqa: PLC0415

    rnd = random.Random(seed)
    rows = [{"key": f"data/s{rnd.randint(0, 3)}/k{rnd.randint(0, 300)}", "range": rnd.randint(0, 7),
             "scope": rnd.choice([0, 1, 3, 4])} for _ in range(rnd.randint(1, 400))]
    scoped = pa.Table.from_pylist(rows, schema=units.SCOPED_SCHEMA)
    arrow = ArrowBackend(ThreadRunner(2), config=None)  # type: ignore[arg-type]
    spark = SparkBackend(spark_context, config=None, partitions=2)  # type: ignore[arg-type]
    try:
        scoped_frame = spark.spark.createDataFrame(rows, "key string, range bigint, scope bigint")
        pairs = sorted(spark.scope_pairs(scoped_frame))
        assert pairs == sorted(arrow.scope_pairs(scoped))
        for live in ([], pairs, [p for p in pairs if rnd.random() < 0.5]):
            got = sorted(r["key"] for r in spark.kept_of(scoped_frame, live).collect())
            assert got == sorted(arrow.kept_of(scoped, live)["key"].to_pylist())
    finally:
        spark.release()


@pytest.mark.parametrize("seed", range(3))
def test_spark_latest_versions_equal_arrow(spark_context, seed: int) -> None:
    """keep_versions on the dataset plan: the first distinct versions of each (line, path), a window on executors."""
    from spark_jobs.engine.plan import units  # noqa: PLC0415
    from tests.unit.gc.test_versions_datasets import case  # noqa: PLC0415

    rows, expected = case(seed)
    arrow = ArrowBackend(ThreadRunner(2), config=None)  # type: ignore[arg-type]
    spark = SparkBackend(spark_context, config=None, partitions=2)  # type: ignore[arg-type]
    try:
        frame = spark.spark.createDataFrame([(r["line"], bytearray(r["path"]), r["key"], r["at"], r["keep"])
                                             for r in rows], "line bigint, path binary, key string, at bigint, "
                                                             "keep bigint")
        got = [r["key"] for r in spark.latest(frame).collect()]
        assert set(got) == expected == set(arrow.latest(pa.Table.from_pylist(rows, schema=units.VERSIONS_SCHEMA))
                                           ["key"].to_pylist())
    finally:
        spark.release()


@pytest.mark.parametrize("seed", range(3))
def test_spark_asked_equals_arrow(spark_context, tmp_path, seed: int) -> None:
    """A daily run's keys that may have become garbage: of the checked keys (a range's entries and carried keys,
    repeats among them), those not kept and outside the listed slices are asked for, and the objects still in the
    store come back with their sizes — alike on both backends, and as the rule says."""
    from spark_jobs.engine.runtime.context import JobConfig  # noqa: PLC0415
    from spark_jobs.engine.stores import StorageConfig  # noqa: PLC0415

    rnd = random.Random(seed)
    keys = sorted({f"data/s{rnd.randint(0, 4)}/k{rnd.randint(0, 400)}" for _ in range(300)} | {"root-object"})
    stored = {k: rnd.randint(0, 50) for k in keys if rnd.random() < 0.7}
    for key, size in stored.items():
        path = tmp_path / "ns" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    (tmp_path / "ns" / "_lakefs").mkdir()
    (tmp_path / "ns" / "_lakefs" / "k").write_bytes(b"metadata")  # never a candidate, even when asked for
    config = JobConfig(None, StorageConfig("local://ns", str(tmp_path)), "repo")  # type: ignore[arg-type]
    checked = pa.table({"key": pa.array([k for k in keys if rnd.random() < 0.6] * 2 + ["_lakefs/k"], pa.string())})
    kept = [pa.table({"key": pa.array([k for k in keys if rnd.random() < 0.3], pa.string())}),
            pa.table({"key": pa.array([k for k in keys if rnd.random() < 0.1], pa.string())})]
    skip = ["", "data/s1/"]  # the recent slices (and the root), listed whole
    arrow = ArrowBackend(ThreadRunner(3), config)
    spark = SparkBackend(spark_context, config, partitions=3)
    wanted = set(checked["key"].to_pylist()) - {k for t in kept for k in t["key"].to_pylist()}
    wanted = {k for k in wanted if k.startswith("data/") and not k.startswith("data/s1/")}
    try:
        table, count = arrow.asked(checked, kept=kept, skip=skip)
        frame_, spark_count = spark.asked(frame(spark.spark, checked), kept=[frame(spark.spark, t) for t in kept],
                                          skip=skip)
        assert count == spark_count == len(wanted) > 0
        expected = sorted((k, stored[k]) for k in wanted if k in stored)
        assert sorted(zip(table["key"].to_pylist(), table["size"].to_pylist(), strict=True)) == expected
        assert sorted((r["key"], r["size"]) for r in frame_.collect()) == expected
        assert spark.count(frame_) == len(expected)
        # the checked keys of dead ranges and carried keys alike: no range here, only carried keys
        carried = sorted(wanted)[:5]
        assert sorted(arrow.checked([], carried)["key"].to_pylist()) == carried
        assert sorted(r["key"] for r in spark.checked([], carried).collect()) == carried
    finally:
        spark.release()


def jobs_of(sc, group: str) -> list[int]:
    """The jobs run in ``group`` so far: Spark's status tracker learns of jobs through its listener bus, after they
    ran, so a job of a group of its own is run first and waited for (its events come after every earlier job's)."""
    import time  # noqa: PLC0415

    barrier = f"{group}-barrier"
    sc.setJobGroup(barrier, "waits for the tracker")
    sc.parallelize([1]).count()
    deadline = time.monotonic() + 60
    while not sc.statusTracker().getJobIdsForGroup(barrier):
        assert time.monotonic() < deadline, "Spark's status tracker never saw a job"
        time.sleep(0.05)
    return sc.statusTracker().getJobIdsForGroup(group)


def test_known_empty_datasets_skip_their_jobs_and_lose_no_key(spark_context) -> None:
    """A run with no staged file, no dead range or nothing carried makes empty datasets: the steps that read them
    answer without a Spark job (a daily run of a small lake was mostly such jobs), and a known-empty dataset beside
    rows never hides those rows. A frame that merely holds no rows (not made empty by the backend) is still read."""
    arrow = ArrowBackend(ThreadRunner(2), config=None)  # type: ignore[arg-type]
    spark = SparkBackend(spark_context, config=None, partitions=2)  # type: ignore[arg-type]
    keys = pa.table({"key": pa.array(["data/a/1", "data/a/2", "data/b/3"], pa.string())})
    rows = frame(spark.spark, keys)
    none_listed = frame(spark.spark, pa.table({"key": pa.array([], pa.string())}))
    deleted = pa.table({"address": pa.array(["data/a/1", "data/b/3", "root"], pa.string()),
                        "size": pa.array([1, 2, 3], pa.int64())})
    try:
        spark_context.setJobGroup("known-empty", "steps over known-empty datasets")
        staged, carried, dead = spark.staged([]), spark.from_keys([]), spark.reach([])
        checked = spark.checked([], [])
        assert spark.keys_not_in(staged, rows, most=0) == set()
        assert spark.count_distinct(staged) == spark.count_distinct(spark.union([staged, carried, dead])) == 0
        asked, count = spark.asked(checked, kept=[rows, staged], skip=[""])
        assert count == 0 and spark.count(asked) == 0
        assert jobs_of(spark_context, "known-empty") == [], "a step ran a Spark job over a known-empty dataset"
        spark_context.setJobGroup("beside", "known-empty datasets beside rows")
        # beside rows, whichever side the empty dataset is on, the rows are all there
        assert spark.count_distinct(spark.union([staged, rows, dead])) == 3
        assert spark.keys_not_in(spark.union([carried, rows]), staged, most=5) == set(keys["key"].to_pylist())
        assert spark.keys_not_in(rows, spark.union([dead, rows]), most=5) == set()
        assert spark.keys_not_in(spark.from_keys(["data/a/1", "x"]), spark.from_keys([]), most=5) == \
            arrow.keys_not_in(pa.table({"key": pa.array(["data/a/1", "x"], pa.string())}),
                              pa.table({"key": pa.array([], pa.string())}), most=5)
        # nothing died and nothing is carried: what the incremental rule would have missed is every deleted object
        # outside the recent slices, as on Arrow
        assert spark.missed(frame(spark.spark, deleted), recent={"data/a/"}, dead=[], carried=[]) == \
            arrow.missed(deleted, recent={"data/a/"}, dead=[], carried=[]) == 2
        spark_context.setJobGroup("no-rows", "a frame that holds no rows, not made empty by the backend")
        assert spark.keys_not_in(none_listed, rows, most=5) == set() and spark.count_distinct(none_listed) == 0
        assert jobs_of(spark_context, "no-rows"), "a frame the backend did not make empty was answered unread"
    finally:
        spark_context._jsc.clearJobGroup()
        spark.release()
