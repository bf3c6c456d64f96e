"""The store layer's pure parts: the adaptive rate, throttling answers, and which namespaces reach which store."""

from __future__ import annotations

import pytest

from spark_jobs.engine.storage import StorageError, is_throttling, locate
from spark_jobs.engine.throttle import Throttle, Throttled, next_rate


def test_the_rate_halves_on_throttling_and_creeps_back():
    rate = 64.0
    rate = next_rate(rate, throttled=True, floor=1, ceiling=100, step=5)
    assert rate == 32
    assert next_rate(1.5, throttled=True, floor=1, ceiling=100, step=5) == 1
    assert next_rate(98, throttled=False, floor=1, ceiling=100, step=5) == 100


def test_a_throttled_call_backs_off_retries_and_counts():
    slept: list[float] = []
    answers = iter([Throttled("SlowDown"), Throttled("SlowDown"), "ok"])

    def call():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    throttle = Throttle(sleep=slept.append, clock=lambda: 0.0, start_rate=10)
    assert throttle.call(call) == "ok"
    assert throttle.stats.backoffs == 2 and throttle.stats.requests == 3 and throttle.rate < 10
    with pytest.raises(Throttled, match="still throttling"):
        Throttle(sleep=slept.append, clock=lambda: 0.0, max_attempts=2).call(lambda: (_ for _ in ()).throw(
            Throttled("503")))


def test_throttling_answers_are_recognised():
    class Http(Exception):
        status_code = 503

    assert is_throttling(Http("ServerBusy"))
    assert is_throttling(OSError("An error occurred (SlowDown) when calling DeleteObjects"))
    assert not is_throttling(PermissionError("AccessDenied"))


@pytest.mark.parametrize(("namespace", "store", "root"), [
    ("s3://bucket/repo", "s3", "bucket/repo"),
    ("s3a://bucket/repo/", "s3", "bucket/repo"),
    ("gs://bucket/a/b", "gcs", "bucket/a/b"),
    ("https://acct1.blob.core.windows.net/container/repo", "azure", "container/repo"),
    ("https://acct1.dfs.core.windows.net/container/repo", "azure", "container/repo"),
])
def test_namespaces_of_every_store(namespace, store, root):
    where = locate(namespace)
    assert (where.store, where.root) == (store, root)


def test_local_and_unsupported_namespaces_say_what_to_set():
    assert locate("local://repo", "/srv/block").root == "/srv/block/repo"
    with pytest.raises(StorageError, match="LOCAL_BLOCKSTORE_PATH"):
        locate("local://repo")
    with pytest.raises(StorageError, match="supported are"):
        locate("https://example.com/container/repo")
    with pytest.raises(StorageError, match="supported are"):
        locate("ftp://host/x")
