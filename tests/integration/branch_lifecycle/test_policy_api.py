"""The policy API at the lakeFS Enterprise paths, authenticated with the caller's lakeFS credentials."""

from __future__ import annotations

import requests

from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY

AUTH = (ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
BODY = {"policies": [{"patterns": ["feature-*"], "max_age": "7d", "max_idle_age": "3d"}]}


def url(receiver, repo: str) -> str:
    return f"{receiver.url}/api/v1/repositories/{repo}/settings/branch_lifecycle/policies"


def test_put_get_delete_with_etags(receiver, repo):
    empty = requests.get(url(receiver, repo), auth=AUTH, timeout=10)
    assert empty.status_code == 200 and empty.json() == {"policies": []}
    put = requests.put(url(receiver, repo), json=BODY, auth=AUTH, headers={"If-Match": empty.headers["ETag"]},
                       timeout=10)
    assert put.status_code == 200, put.text
    assert put.json()["policies"][0]["id"].startswith("pol-")
    got = requests.get(url(receiver, repo), auth=AUTH, timeout=10)
    assert got.json() == put.json() and got.headers["ETag"] == put.headers["ETag"] != empty.headers["ETag"]
    stale = requests.put(url(receiver, repo), json={"policies": [{"patterns": ["x-*"], "max_age": "1d"}]},
                         auth=AUTH, headers={"If-Match": empty.headers["ETag"]}, timeout=10)
    assert stale.status_code == 412 and stale.headers["ETag"] == put.headers["ETag"]
    assert requests.get(url(receiver, repo), auth=AUTH, timeout=10).json() == put.json()
    assert requests.delete(url(receiver, repo), auth=AUTH, timeout=10).status_code == 204
    assert requests.delete(url(receiver, repo), auth=AUTH, timeout=10).status_code == 204  # idempotent
    assert requests.get(url(receiver, repo), auth=AUTH, timeout=10).json() == {"policies": []}


def test_enterprise_shape_is_accepted(receiver, repo):
    body = {"policies": [{"id": "ci", "name_patterns": ["ci-*"], "max_inactivity_time": 3600}]}
    put = requests.put(url(receiver, repo), json=body, auth=AUTH, timeout=10)
    assert put.status_code == 200
    assert put.json() == {"policies": [{"id": "ci", "patterns": ["ci-*"], "max_idle_age": "1h"}]}


def test_invalid_policies_are_400_with_every_error(receiver, repo):
    body = {"policies": [{"patterns": ["*"], "max_age": "soon"}, {"patterns": ["a-*"]}]}
    r = requests.put(url(receiver, repo), json=body, auth=AUTH, timeout=10)
    assert r.status_code == 400
    assert [(d["index"], d["field"]) for d in r.json()["details"]] == [(0, "patterns[0]"), (0, "max_age"), (1, None)]
    assert requests.get(url(receiver, repo), auth=AUTH, timeout=10).json() == {"policies": []}


def test_credentials_are_checked_by_lakefs(receiver, repo):
    none = requests.get(url(receiver, repo), timeout=10)
    assert none.status_code == 401 and none.headers["WWW-Authenticate"].startswith("Basic")
    wrong = requests.put(url(receiver, repo), json=BODY, auth=(ADMIN_ACCESS_KEY, "not-the-secret"), timeout=10)
    assert wrong.status_code == 401
    assert requests.get(url(receiver, repo), auth=AUTH, timeout=10).json() == {"policies": []}


def test_unknown_repository_and_bad_body(receiver):
    missing = requests.get(url(receiver, "no-such-repo"), auth=AUTH, timeout=10)
    assert missing.status_code == 404 and "not found" in missing.json()["error"]
    bad = requests.put(url(receiver, "no-such-repo"), data=b"{{", auth=AUTH, timeout=10,
                       headers={"Content-Type": "application/json"})
    assert bad.status_code == 400 and "JSON" in bad.json()["error"]


def test_concurrent_puts_with_the_same_etag_let_exactly_one_win(receiver, repo):
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    etag = requests.get(url(receiver, repo), auth=AUTH, timeout=10).headers["ETag"]

    def put(i: int) -> int:
        body = {"policies": [{"patterns": [f"team{i}-*"], "max_age": "1d"}]}
        return requests.put(url(receiver, repo), json=body, auth=AUTH, headers={"If-Match": etag},
                            timeout=30).status_code

    with ThreadPoolExecutor(max_workers=6) as pool:
        statuses = sorted(pool.map(put, range(6)))
    assert statuses == [200] + [412] * 5


def cleaning_url(receiver, repo: str) -> str:
    return f"{receiver.url}/api/v1/repositories/{repo}/settings/gc_cleaning/policies"


def test_cleaning_policies_beside_the_lifecycle_policies(receiver, repo):
    body = {"policies": [{"id": "hot", "patterns": ["ingest-*"], "keep_commits": 5, "savepoints": ["release-*"]}]}
    empty = requests.get(cleaning_url(receiver, repo), auth=AUTH, timeout=10)
    assert empty.status_code == 200 and empty.json() == {"policies": []}
    put = requests.put(cleaning_url(receiver, repo), json=body, auth=AUTH,
                       headers={"If-Match": empty.headers["ETag"]}, timeout=10)
    assert put.status_code == 200 and put.json() == body
    stale = requests.put(cleaning_url(receiver, repo), json=body, auth=AUTH,
                         headers={"If-Match": empty.headers["ETag"]}, timeout=10)
    assert stale.status_code == 412
    bad = requests.put(cleaning_url(receiver, repo), json={"policies": [{"patterns": [], "keep_commits": 0}]},
                       auth=AUTH, timeout=10)
    assert bad.status_code == 400 and {d["field"] for d in bad.json()["details"]} >= {"patterns", "keep_commits"}
    assert requests.get(url(receiver, repo), auth=AUTH, timeout=10).json() == {"policies": []}  # separate documents
    assert requests.get(cleaning_url(receiver, repo), timeout=10).status_code == 401
    assert requests.delete(cleaning_url(receiver, repo), auth=AUTH, timeout=10).status_code == 204
