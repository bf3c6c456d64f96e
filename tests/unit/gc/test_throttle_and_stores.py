"""The store layer's pure parts: the adaptive rate, throttling answers, and which namespaces reach which store."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from botocore import UNSIGNED
from botocore.utils import parse_timestamp

from spark_jobs.engine.stores import Location, StorageError, is_throttling, is_unreachable, locate
from spark_jobs.engine.stores.s3 import S3Namespace
from spark_jobs.engine.stores.s3_client import iso_timestamp, listing_page, model_loader, plain_s3_arguments, s3_session
from spark_jobs.engine.stores.throttle import Throttle, Throttled, Unreachable, next_rate


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


def test_requests_are_not_paced_until_the_store_throttles_and_again_once_recovered():
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    throttle = Throttle(sleep=sleep, clock=lambda: clock[0], ceiling=400, step=50)
    for _ in range(100):  # 200 requests/s, the store never throttles: no waiting for turns at all
        clock[0] += 0.005
        assert throttle.call(lambda: "ok") == "ok"
    assert slept == [] and throttle.rate is None

    answers = iter([Throttled("SlowDown"), "ok"])

    def throttled_once():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert throttle.call(throttled_once) == "ok"
    # paced from half the 200/s it was achieving; the back-off sleep is the first one
    assert throttle.rate == pytest.approx(100 + 50, rel=0.05) and len(slept) == 1
    before = len(slept)
    for _ in range(3):  # paced now: calls arriving at once wait for their turns at the lowered rate
        throttle.call(lambda: "ok")
    assert len(slept) > before and all(0 < s <= 1 / 100 + 1e-9 for s in slept[before:])
    for _ in range(10):  # +50/s per success up to the ceiling, then no pacing again
        throttle.call(lambda: "ok")
    assert throttle.rate is None


def test_a_store_that_does_not_answer_is_retried_a_few_times_only():
    slept: list[float] = []
    calls = []

    def gone():
        calls.append(1)
        raise Unreachable("ConnectTimeoutError")

    throttle = Throttle(sleep=slept.append, clock=lambda: 0.0, max_unreachable=5)
    with pytest.raises(Unreachable, match="did not answer 5 times"):
        throttle.call(gone, "listing data/")
    assert len(calls) == 5 and throttle.stats.backoffs == 4  # no back-off after the last attempt
    answers = iter([Unreachable("reset"), Throttled("SlowDown"), Unreachable("reset"), "ok"])

    def flaky():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert Throttle(sleep=slept.append, clock=lambda: 0.0, max_unreachable=3).call(flaky) == "ok"


def test_timeouts_and_failed_connections_are_recognised():
    class ReadTimeoutError(Exception):
        pass

    class ServerDisconnectedError(Exception):
        pass

    assert is_unreachable(ReadTimeoutError("Read timeout on endpoint URL"))
    assert is_unreachable(ServerDisconnectedError("Server disconnected"))
    assert is_unreachable(ConnectionRefusedError(111, "Connection refused"))
    assert is_unreachable(TimeoutError())
    wrapped = OSError("listing failed")
    wrapped.__cause__ = ConnectionResetError(104, "reset by peer")
    assert is_unreachable(wrapped)
    assert not is_unreachable(PermissionError("AccessDenied"))
    assert not is_unreachable(FileNotFoundError("no such key"))
    assert StorageError("x", "storage-unavailable").__reduce__()[1] == ("x", "storage-unavailable")


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


def test_s3_timestamps_read_as_botocore_reads_them():
    """iso_timestamp (the engine's S3 timestamp parser, for speed) gives what botocore's own parser gives for every
    form a store or a header sends: ISO 8601 with or without fractions and zones, HTTP dates, epoch seconds."""
    rng = random.Random(20261123)
    values: list[object] = ["2026-11-23T23:58:03.000Z", "2026-11-23T23:58:03Z", "2026-11-23T23:58:03+02:00",
                            "2026-11-23T23:58:03.123456-05:30", "2026-11-23T23:58:03", "2026-11-23",
                            "Mon, 23 Nov 2026 23:58:03 GMT", "1795478283", "1795478283.25", 1795478283, 1795478283.5]
    for _ in range(300):
        when = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.uniform(0, 40 * 365 * 86400))
        zone = timezone(timedelta(minutes=rng.choice([0, 60, -300, 330, 765])))
        local = when.astimezone(zone)
        values += [local.isoformat(timespec=rng.choice(["seconds", "milliseconds", "microseconds"])),
                   when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z", when.strftime("%a, %d %b %Y %H:%M:%S GMT"),
                   str(int(when.timestamp()))]
    for value in values:
        ours, theirs = iso_timestamp(value), parse_timestamp(value)
        assert ours == theirs and (ours.tzinfo is None) == (theirs.tzinfo is None), value
        if ours.tzinfo is not None:
            assert ours.utcoffset() == theirs.utcoffset(), value
    with pytest.raises(ValueError):
        iso_timestamp("not a date")


def test_s3_namespaces_share_one_session_unless_their_options_need_their_own():
    where = Location("s3", "s3", "bucket/prefix")
    plain = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}
    assert S3Namespace.filesystem(where, plain).session is s3_session()
    # s3fs builds its own session from a profile; an injected one would silently drop it
    assert S3Namespace.filesystem(where, {**plain, "profile": "analytics"}).session is not s3_session()


def test_s3_reads_go_through_a_plain_client_only_when_its_arguments_say_all_the_options_say():
    plain = {"key": "k", "secret": "s", "token": "t", "use_listings_cache": False,
             "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1", "verify": False},
             "config_kwargs": {"connect_timeout": 7, "read_timeout": 9, "s3": {"addressing_style": "path"}}}
    args = plain_s3_arguments(plain, max_in_flight=32)
    config = args.pop("config")
    assert args == {"aws_access_key_id": "k", "aws_secret_access_key": "s", "aws_session_token": "t",
                    "endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1", "verify": False,
                    "use_ssl": True}
    assert (config.connect_timeout, config.read_timeout, config.s3) == (7, 9, {"addressing_style": "path"})
    # every throttling answer reaches the throttle; a connection per request in flight
    assert config.retries == {"total_max_attempts": 1} and config.max_pool_connections == 32
    # no credentials: botocore's own chain, as s3fs; anonymous: unsigned requests
    assert "aws_access_key_id" not in plain_s3_arguments({}, 8)
    assert plain_s3_arguments({"anon": True}, 8)["config"].signature_version is UNSIGNED
    assert plain_s3_arguments({"endpoint_url": "http://127.0.0.1:9"}, 8)["endpoint_url"] == "http://127.0.0.1:9"
    # anything without a plain equivalent keeps s3fs for every request
    for other in ({"profile": "analytics"}, {"requester_pays": True}, {"s3_additional_kwargs": {"ACL": "private"}},
                  {"client_kwargs": {"aws_account_id": "1"}}, {"client_kwargs": "endpoint"}, {"config_kwargs": []}):
        assert plain_s3_arguments({**plain, **other}, 8) is None, other
    with pytest.raises(StorageError, match="s3 storage settings are unusable"):
        plain_s3_arguments({"config_kwargs": {"no_such_setting": 1}}, 8)


def test_a_listing_page_is_read_for_key_size_and_time_and_anything_else_is_left_to_botocore():
    page = (b'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            b"<Name>b</Name><Prefix>ns/_lakefs/</Prefix><KeyCount>3</KeyCount><MaxKeys>2</MaxKeys>"
            b"<Delimiter>/</Delimiter><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
            b"<NextContinuationToken>tok+1</NextContinuationToken>"
            b"<Contents><Key>ns/_lakefs/a%20b</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>"
            b"<ETag>&quot;x&quot;</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass></Contents>"
            b"<Contents><Key>ns/_lakefs/c</Key><Size>0</Size></Contents>"
            b"<CommonPrefixes><Prefix>ns/_lakefs/retention/</Prefix></CommonPrefixes></ListBucketResult>")
    response, custom = {"status_code": 200, "body": page}, {}
    listing_page(response_dict=response, customized_response_dict=custom)
    assert response["body"] == b""  # botocore's parser then reads nothing
    assert custom == {"IsTruncated": True, "NextContinuationToken": "tok+1", "KeyCount": 3, "Name": "b",
                      "Prefix": "ns/_lakefs/", "Delimiter": "/", "EncodingType": "url",  # botocore decodes keys
                      "Contents": [{"Key": "ns/_lakefs/a%20b", "Size": 12,
                                    "LastModified": datetime(2026, 1, 1, tzinfo=UTC)},
                                   {"Key": "ns/_lakefs/c", "Size": 0}],
                      "CommonPrefixes": [{"Prefix": "ns/_lakefs/retention/"}]}
    for untouched in ({"status_code": 503, "body": b"<Error><Code>SlowDown</Code></Error>"},
                      {"status_code": 200, "body": b"not xml"}, {"status_code": 200, "body": b"<Other/>"},
                      {"status_code": 200, "body": b""}):
        before, custom = dict(untouched), {}
        listing_page(response_dict=untouched, customized_response_dict=custom)
        assert untouched == before and custom == {}


def test_the_model_loader_gives_botocores_models_and_services():
    """The S3 client's loader reads the same models as botocore's own (plain dicts, the service looked up in its
    own folder) and lists the same services when asked for all of them; an unknown service is refused as botocore
    refuses it, naming the known ones."""
    from botocore.exceptions import UnknownServiceError  # noqa: PLC0415
    from botocore.loaders import Loader  # noqa: PLC0415

    ours, theirs = model_loader(None), Loader()
    for service in ("s3", "sts"):
        assert ours.load_service_model(service, "service-2") == theirs.load_service_model(service, "service-2")
        assert ours.load_service_model(service, "endpoint-rule-set-1") == \
            theirs.load_service_model(service, "endpoint-rule-set-1")
    assert ours.load_data("endpoints") == theirs.load_data("endpoints")
    known = ours.list_available_services("service-2")
    assert "s3" in known and "no-such-service" not in known and 3 not in known
    assert list(known) == theirs.list_available_services("service-2") and len(known) > 300
    with pytest.raises(UnknownServiceError, match="no-such-service.*Valid service names are: .*s3"):
        model_loader(None).load_service_model("no-such-service", "service-2")
    # AWS_DATA_PATH's folders come first, as in botocore's own loader
    assert model_loader("/tmp/models-a:/tmp/models-b").search_paths[:2] == ["/tmp/models-a", "/tmp/models-b"]


def test_azure_and_gcs_errors_are_classified_as_the_throttle_needs():
    """The libraries' own exception types (their retries off, each reaches the throttle): a 429 / 503 is
    throttling, a refused or dropped connection and a time-out are unreachable, a 403 is neither."""
    from aiohttp.client_exceptions import ServerDisconnectedError  # noqa: PLC0415
    from azure.core.exceptions import (  # noqa: PLC0415
        HttpResponseError,
        ServiceRequestError,
        ServiceResponseError,
        ServiceResponseTimeoutError,
    )
    from gcsfs.retry import HttpError  # noqa: PLC0415

    from spark_jobs.engine.stores.gcs_client import GCSFileSystem  # noqa: PLC0415

    busy = HttpResponseError("The server is busy.")
    busy.status_code = 503
    assert is_throttling(busy) and is_throttling(HttpError({"code": 429, "message": "rateLimitExceeded"}))
    assert is_throttling(HttpError({"code": 503, "message": "Backend Error"}))
    for gone in (ServiceRequestError("Cannot connect to host"), ServiceResponseError("Connection closed"),
                 ServiceResponseTimeoutError("Timeout on reading data from socket"),
                 ServerDisconnectedError("Server disconnected")):
        assert is_unreachable(gone) and not is_throttling(gone), gone
    denied = HttpError({"code": 403, "message": "Forbidden"})
    assert not is_throttling(denied) and not is_unreachable(denied)
    # gcsfs's own retry loop is not in the request our filesystem sends
    assert GCSFileSystem._request is not GCSFileSystem.__mro__[1]._request  # noqa: SLF001
    assert not hasattr(GCSFileSystem._request, "__wrapped__")  # noqa: SLF001


def test_azure_clients_make_one_attempt_with_the_time_outs_on_every_request():
    from spark_jobs.engine.stores import StorageConfig, open_namespace  # noqa: PLC0415

    connection = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
                  "BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;")
    options = json.dumps({"azure": {"connection_string": connection, "connection_timeout": 7, "read_timeout": 8}})
    ns = open_namespace(StorageConfig("https://devstoreaccount1.blob.core.windows.net/c/repo", None, options))
    client = ns.fs.service_client
    assert client._config.retry_policy.total_retries == 0  # noqa: SLF001
    transport = client._config.transport.connection_config  # noqa: SLF001
    assert (transport.timeout, transport.read_timeout) == (7, 8)
    assert client.url.rstrip("/") == "http://127.0.0.1:9/devstoreaccount1"
    assert client.credential.account_name == "devstoreaccount1"


def test_a_storage_error_read_back_from_a_tracebacks_text_keeps_its_reason():
    """What the Spark driver gets for a failed task is the executor's traceback as text (Py4J), which
    ``jobs.gc.executor_error`` turns back into a StorageError: with the reason the thread runner raises."""
    from spark_jobs.jobs.gc import executor_error  # noqa: PLC0415

    def traceback(message: str) -> Exception:
        return RuntimeError("org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
                            '  File "/x/spark_jobs/engine/stores/base.py", line 1, in _call\n'
                            f"spark_jobs.engine.stores.base.StorageError: {message}\n\tat org.apache.spark...\n")

    unavailable = executor_error(traceback(
        "listing data/ on s3://b/r: the store is unreachable (a request times out after GC__STORE_TIMEOUT_SECONDS)"
        ": listing: the store did not answer 5 times"))
    assert isinstance(unavailable, StorageError) and unavailable.reason == "storage-unavailable"
    assert str(unavailable).startswith("listing data/ on s3://b/r")
    throttled = executor_error(traceback("batch delete on gs://b/r: batch delete: the store was still throttling "
                                         "after 12 attempts"))
    assert throttled.reason == "storage-throttled"
    assert executor_error(traceback("reading _lakefs/x failed: AccessDenied")).reason == "storage"
    assert StorageError("x", "storage-unavailable").reason == "storage-unavailable"
    # a step names its own reason, unless the store did not answer or kept throttling
    assert unavailable.reason_or("storage-read") == "storage-unavailable"
    assert throttled.reason_or("storage-delete") == "storage-throttled"
    assert StorageError("AccessDenied").reason_or("storage-delete") == "storage-delete"
