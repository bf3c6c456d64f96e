"""Whether deleted bytes are freed, from a bucket's settings (spark_jobs.core.freeing): every kind of rule."""

import json

import pytest

from spark_jobs.core.freeing import (
    DELAYED,
    FREED,
    NEVER,
    UNKNOWN,
    Verdict,
    azure_verdict,
    describe,
    gcs_verdict,
    local_verdict,
    s3_rule_scope,
    s3_verdict,
    unreadable,
)

NS = "lake/repo1"


def noncurrent(days, *, rule_id="r", status="Enabled", newer=None, **selection):
    expiring = {"NoncurrentDays": days, **({"NewerNoncurrentVersions": newer} if newer is not None else {})}
    return {"ID": rule_id, "Status": status, **selection, "NoncurrentVersionExpiration": expiring}


def test_s3_unversioned_frees_at_once():
    for status in (None, ""):
        verdict = s3_verdict(status, [], NS)
        assert verdict.state == FREED and verdict.versioned is False and not verdict.pending


@pytest.mark.parametrize("selection, scope", [
    ({}, "all"),
    ({"Filter": {}}, "all"),
    ({"Filter": {"Prefix": ""}}, "all"),
    ({"Filter": {"Prefix": "lake/"}}, "all"),
    ({"Filter": {"Prefix": "lake/repo1/"}}, "all"),
    ({"Filter": {"Prefix": "lake/repo1/data/"}}, "part"),
    ({"Filter": {"Prefix": "lake/repo2/"}}, "none"),
    ({"Prefix": "lake/"}, "all"),  # the legacy top-level prefix
    ({"Prefix": "other/"}, "none"),
    ({"Filter": {"Tag": {"Key": "k", "Value": "v"}}}, "none"),
    ({"Filter": {"And": {"Prefix": "lake/", "Tags": [{"Key": "k", "Value": "v"}]}}}, "none"),
    ({"Filter": {"And": {"Prefix": "lake/", "ObjectSizeGreaterThan": 1000}}}, "part"),
    ({"Filter": {"ObjectSizeLessThan": 1000}}, "part"),
    ({"Filter": {"And": {"Prefix": "lake/repo1/"}}}, "all"),
])
def test_s3_rule_scope(selection, scope):
    assert s3_rule_scope(noncurrent(1, **selection), "lake/repo1/") == scope


def test_s3_versioned_without_rules_is_never_freed_and_prints_the_rule():
    verdict = s3_verdict("Enabled", [], NS)
    assert verdict.state == NEVER and verdict.pending
    fix = json.loads(verdict.fix)["Rules"][0]
    assert fix["Filter"] == {"Prefix": "lake/repo1/"} and fix["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}
    assert fix["Expiration"] == {"ExpiredObjectDeleteMarker": True}
    assert "rule to add" in describe(verdict)


def test_s3_the_shortest_covering_rule_decides():
    rules = [noncurrent(30, rule_id="month"), noncurrent(7, rule_id="week", Filter={"Prefix": "lake/"}),
             noncurrent(1, rule_id="off", status="Disabled"),
             noncurrent(1, rule_id="part", Filter={"Prefix": "lake/repo1/data/"}),
             noncurrent(1, rule_id="tagged", Filter={"Tag": {"Key": "a", "Value": "b"}}),
             noncurrent(1, rule_id="keeps", newer=1)]
    verdict = s3_verdict("Enabled", rules, NS)
    assert (verdict.state, verdict.days, verdict.rule) == (DELAYED, 7, "week")
    text = " ".join(verdict.notes)
    for why in ("rule off is disabled", "rule part selects only part", "rule tagged selects none",
                "rule keeps keeps the newest 1"):
        assert why in text


def test_s3_rules_that_do_not_cover_leave_it_never_freed():
    rules = [noncurrent(1, status="Disabled"), noncurrent(1, newer=3), noncurrent(1, Filter={"Prefix": "x/"}),
             {"ID": "current-only", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 3}}]
    assert s3_verdict("Enabled", rules, NS).state == NEVER


def test_s3_newer_noncurrent_zero_still_frees():
    assert s3_verdict("Enabled", [noncurrent(2, newer=0)], NS).days == 2


def test_s3_suspended_versioning_still_leaves_versions():
    verdict = s3_verdict("Suspended", [], NS)
    assert verdict.state == NEVER and "suspended" in verdict.message


def test_s3_unreadable_rules():
    verdict = s3_verdict("Enabled", None, NS)
    assert verdict.state == UNKNOWN and verdict.fix


def test_s3_delete_markers_and_multipart_uploads_notes():
    rule = {**noncurrent(3), "Expiration": {"ExpiredObjectDeleteMarker": True},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}}
    notes = " ".join(s3_verdict("Enabled", [rule], NS).notes)
    assert "delete markers removed by rule r" in notes and "aborted 2 days after" in notes
    notes = " ".join(s3_verdict("Enabled", [noncurrent(3)], NS).notes)
    assert "never removed" in notes and "never aborted" in notes


def gcs_rule(**condition):
    return {"action": {"type": "Delete"}, "condition": condition}


def test_gcs_unversioned():
    assert gcs_verdict(False, 0, [], prefix=NS).state == FREED
    verdict = gcs_verdict(False, 7 * 86400, [], prefix=NS)
    assert (verdict.state, verdict.days, verdict.rule) == (DELAYED, 7, "softDeletePolicy")
    assert gcs_verdict(None, 0, [], prefix=NS).state == UNKNOWN


@pytest.mark.parametrize("condition, days", [
    ({"isLive": False, "daysSinceNoncurrentTime": 3}, 3),
    ({"isLive": False, "age": 10}, 10),
    ({"daysSinceNoncurrentTime": 5}, 5),
    ({"isLive": False}, 0),
    ({"isLive": False, "daysSinceNoncurrentTime": 2, "matchesPrefix": ["lake/"]}, 2),
    ({"isLive": False, "daysSinceNoncurrentTime": 2, "matchesPrefix": ["x/", "lake/repo1/"]}, 2),
    ({"isLive": False, "daysSinceNoncurrentTime": 2, "numNewerVersions": 0}, 2),
    ({"isLive": False, "daysSinceNoncurrentTime": 2, "age": 4}, 4),
    ({"isLive": True, "age": 1}, None),
    ({"isLive": False, "numNewerVersions": 1}, None),
    ({"isLive": False, "age": 1, "matchesPrefix": ["lake/repo1/data/"]}, None),
    ({"isLive": False, "age": 1, "matchesPrefix": ["other/"]}, None),
    ({"isLive": False, "age": 1, "matchesSuffix": [".parquet"]}, None),
    ({"isLive": False, "createdBefore": "2020-01-01"}, None),
    ({}, None),
])
def test_gcs_rules(condition, days):
    verdict = gcs_verdict(True, 0, [gcs_rule(**condition)], prefix=NS)
    assert verdict.days == days and verdict.state == (DELAYED if days is not None else NEVER)


def test_gcs_soft_delete_adds_to_the_rule_and_fix():
    verdict = gcs_verdict(True, 2 * 86400, [gcs_rule(isLive=False, daysSinceNoncurrentTime=3),
                                            {"action": {"type": "SetStorageClass"}, "condition": {"age": 1}}], prefix=NS)
    assert verdict.days == 5 and "soft-delete" in verdict.message
    never = gcs_verdict(True, 0, [], prefix=NS)
    assert json.loads(never.fix)["lifecycle"]["rule"][0]["condition"] == {
        "isLive": False, "daysSinceNoncurrentTime": 1, "matchesPrefix": ["lake/repo1/"]}
    assert gcs_verdict(True, 0, None, prefix=NS).state == UNKNOWN


def test_azure():
    assert azure_verdict(0, False, container="c", prefix="p").state == FREED
    unknown_versioning = azure_verdict(0, None, container="c", prefix="p")
    assert unknown_versioning.state == FREED and "Resource Manager" in unknown_versioning.notes[0]
    soft = azure_verdict(7, False, container="c", prefix="p")
    assert (soft.state, soft.days, soft.rule) == (DELAYED, 7, "blob soft delete")
    versioned = azure_verdict(7, True, container="c", prefix="p")
    assert versioned.state == NEVER
    assert json.loads(versioned.fix)["rules"][0]["definition"]["filters"]["prefixMatch"] == ["c/p/"]
    assert azure_verdict(None, None, container="c", prefix="p").state == UNKNOWN


def test_local_and_unreadable_and_round_trip():
    assert local_verdict().state == FREED
    denied = unreadable("s3", "bucket's versioning", permission="s3:GetBucketVersioning", error="AccessDenied")
    assert denied.state == UNKNOWN and "needs s3:GetBucketVersioning" in denied.message
    verdict = s3_verdict("Enabled", [noncurrent(3)], NS)
    assert Verdict.from_dict(json.loads(json.dumps(verdict.as_dict()))) == verdict


def test_the_metrics_split_the_bytes_deleted():
    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    from spark_jobs.core.report import Summary  # noqa: PLC0415
    from workers.gc.run import GCRequest, _observe  # noqa: PLC0415
    from workers.shared.metrics import Metrics  # noqa: PLC0415

    registry = CollectorRegistry()
    summary = Summary("r1", "repo", True, "", "", 3, deleted_bytes=30, phase="swept", swept=3, bytes_freed=10,
                      bytes_pending=20)
    _observe(Metrics(registry), "repo", GCRequest("repo"), summary)
    value = registry.get_sample_value
    assert value("lakefs_janitor_gc_bytes_deleted_total", {"repository": "repo"}) == 30
    assert value("lakefs_janitor_gc_bytes_freed_total", {"repository": "repo"}) == 10
    assert value("lakefs_janitor_gc_bytes_pending_total", {"repository": "repo"}) == 20


def test_purged_generations_stay_billed_while_a_soft_delete_policy_keeps_them():
    from spark_jobs.core.report import Summary  # noqa: PLC0415
    from spark_jobs.engine.sweep.sweep import split_bytes  # noqa: PLC0415

    def split(verdict, purged):
        summary = Summary("r1", "repo", True, "", "", 3, phase="swept", swept=3, swept_at="2026-11-27T00:00:00+00:00")
        summary.purged_bytes = purged
        split_bytes(summary, verdict, 30)
        return summary.bytes_freed, summary.bytes_pending, summary.pending_until

    no_rule = gcs_verdict(True, 0, [], prefix=NS)
    assert split(no_rule, 30) == (30, 0, None)  # purged: freed at once
    assert split(no_rule, 0) == (0, 30, None)  # never freed
    soft = gcs_verdict(True, 7 * 86400, [], prefix=NS)
    assert soft.purge_keeps_days == 7
    assert split(soft, 30) == (0, 30, "2026-12-04T00:00:00+00:00")
