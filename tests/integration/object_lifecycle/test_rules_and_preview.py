"""Object lifecycle rules on a real lakeFS: set/get/clear through the CLI and the policy API, with ETags; bad input
leaves the stored rules as they were; ``preview`` lists the branch's objects and says what would go and when."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import requests

from tests.integration.conftest import commit, create_branch, upload
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY
from workers.object_lifecycle.rules import parse_rules
from workers.object_lifecycle.run import branch_objects
from workers.object_lifecycle.store import RULES as RULES_DOCUMENT
from workers.object_lifecycle.store import get_rules, set_rules

AUTH = (ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
RULES = {"rules": [
    {"id": "old-logs", "branches": ["main", "feature-*"], "paths": ["logs/**", "!logs/audit/**"], "max_age": "1d"},
    {"id": "raw", "branches": ["*"], "paths": ["raw/**"], "max_age": "30d", "description": "never on main"},
]}


def write(tmp_path, document, name="rules.yaml"):
    path = tmp_path / name
    path.write_text(json.dumps(document) if name.endswith(".json") else _yaml(document))
    return str(path)


def _yaml(document) -> str:
    import yaml  # noqa: PLC0415

    return yaml.safe_dump(document)


def test_rules_set_get_clear_through_the_cli(cli, lakefs, repo, tmp_path):
    empty = cli("object-lifecycle", "rules", "get", f"lakefs://{repo}", "--etag")
    assert json.loads(empty.stdout) == {"rules": []}
    empty_etag = empty.stderr.split("ETag: ")[1].strip()

    stored = json.loads(cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", write(tmp_path, RULES),
                            "--if-match", empty_etag).output)
    assert stored["rules"][0] == {**RULES["rules"][0], "status": "enabled"}
    assert stored["rules"][1]["max_age"] == "4w2d"
    got = cli("object-lifecycle", "rules", "get", f"lakefs://{repo}", "--etag")
    assert json.loads(got.stdout) == stored
    assert get_rules(lakefs, repo).etag == got.stderr.split("ETag: ")[1].strip() != empty_etag

    # A stale ETag is refused and nothing changes.
    other = {"rules": [{**RULES["rules"][0], "max_age": "2d"}]}
    stale = cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", write(tmp_path, other, "o.json"),
                "--if-match", empty_etag, expect_exit=1)
    assert "changed since they were read" in stale.output and "--force" in stale.output
    assert json.loads(cli("object-lifecycle", "rules", "get", f"lakefs://{repo}").stdout) == stored
    forced = cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", write(tmp_path, other, "o.json"),
                 "--if-match", empty_etag, "--force")
    assert json.loads(forced.output)["rules"][0]["max_age"] == "2d"

    assert "cleared" in cli("object-lifecycle", "rules", "clear", f"lakefs://{repo}").output
    cli("object-lifecycle", "rules", "clear", f"lakefs://{repo}")  # idempotent
    assert json.loads(cli("object-lifecycle", "rules", "get", f"lakefs://{repo}").stdout) == {"rules": []}


def test_bad_rules_are_refused_naming_rule_and_field_and_nothing_changes(cli, lakefs, repo, tmp_path):
    set_rules(lakefs, repo, parse_rules(RULES))
    before = get_rules(lakefs, repo)
    bad = {"rules": [RULES["rules"][0], {**RULES["rules"][1], "paths": ["/raw/**"], "max_age": "soon"}]}
    out = cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", write(tmp_path, bad), expect_exit=1).output
    assert 'rules[1] (id "raw") paths: "/raw/**": lakeFS paths have no leading \'/\'' in out
    assert 'rules[1] (id "raw") max_age: "soon" is not a duration' in out
    dupes = {"rules": [RULES["rules"][0], RULES["rules"][0]]}
    out = cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", write(tmp_path, dupes), expect_exit=1).output
    assert 'rules[1] (id "old-logs") id: duplicate id' in out
    not_yaml = tmp_path / "x.yaml"
    not_yaml.write_text("rules: [\n")
    assert "line 2, column 1: invalid YAML" in cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f",
                                                   str(not_yaml), expect_exit=1).output
    twice = tmp_path / "twice.yaml"
    twice.write_text("rules:\n  - id: r\n    branches: [dev]\n    paths: [a/**]\n    max_age: 1d\n    max_age: 1y\n")
    assert 'line 6, column 5: invalid YAML: duplicate key "max_age"' in cli(
        "object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", str(twice), expect_exit=1).output
    assert get_rules(lakefs, repo) == before


def test_an_unusable_stored_document_is_replaced_only_with_force(cli, env, lakefs, repo, tmp_path):
    RULES_DOCUMENT.write(lakefs, repo, {"rules": [{"id": "x", "paths": "not a list"}]})  # written around us
    out = cli("object-lifecycle", "rules", "get", f"lakefs://{repo}", expect_exit=1).output
    assert "unusable" in out and 'rules[0] (id "x") branches: required' in out and "--force" in out
    path = write(tmp_path, RULES)
    assert "unusable" in cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", path, expect_exit=1).output
    cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", path, "--force")
    assert [r.id for r in get_rules(lakefs, repo).policies] == ["old-logs", "raw"]
    # Standard input works as a file.
    from click.testing import CliRunner  # noqa: PLC0415

    from workers.cli import main  # noqa: PLC0415

    one = json.dumps({"rules": RULES["rules"][:1]})
    result = CliRunner().invoke(main, ["object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", "-"], input=one,
                                env=env)
    assert result.exit_code == 0, result.output
    assert [r.id for r in get_rules(lakefs, repo).policies] == ["old-logs"]


def test_a_rule_expiring_everything_needs_yes_once(cli, lakefs, repo, tmp_path):
    everything = {"rules": [{"id": "all", "branches": ["scratch"], "paths": ["**"], "max_age": "7d"}]}
    path = write(tmp_path, everything)
    out = cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", path, expect_exit=1).output
    assert "'all' would expire every object" in out and "--yes" in out
    assert get_rules(lakefs, repo).policies == []
    cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", path, "--yes")
    cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", path)  # the same rule again: confirmed once
    narrowed = {"rules": [{**everything["rules"][0], "paths": ["**", "!keep/**"]}]}
    cli("object-lifecycle", "rules", "set", f"lakefs://{repo}", "-f", write(tmp_path, narrowed))


def url(receiver, repo: str) -> str:
    return f"{receiver.url}/api/v1/repositories/{repo}/settings/object_lifecycle"


def test_the_policy_api(receiver, repo):
    empty = requests.get(url(receiver, repo), auth=AUTH, timeout=10)
    assert empty.status_code == 200 and empty.json() == {"rules": []}
    put = requests.put(url(receiver, repo), json=RULES, auth=AUTH, headers={"If-Match": empty.headers["ETag"]},
                       timeout=10)
    assert put.status_code == 200, put.text
    got = requests.get(url(receiver, repo), auth=AUTH, timeout=10)
    assert got.json() == put.json() and got.headers["ETag"] == put.headers["ETag"] != empty.headers["ETag"]
    stale = requests.put(url(receiver, repo), json={"rules": []}, auth=AUTH,
                         headers={"If-Match": empty.headers["ETag"]}, timeout=10)
    assert stale.status_code == 412 and stale.headers["ETag"] == put.headers["ETag"]

    bad = requests.put(url(receiver, repo), json={"rules": [{**RULES["rules"][0], "status": "on", "branches": []}]},
                       auth=AUTH, timeout=10)
    assert bad.status_code == 400
    assert [(d["index"], d["id"], d["field"]) for d in bad.json()["details"]] == [
        (0, "old-logs", "branches"), (0, "old-logs", "status")]
    everything = {"rules": [{"id": "all", "branches": ["x"], "paths": ["**"], "max_age": "1d"}]}
    unconfirmed = requests.put(url(receiver, repo), json=everything, auth=AUTH, timeout=10)
    assert unconfirmed.status_code == 400 and "yes=true" in unconfirmed.json()["error"]
    assert requests.get(url(receiver, repo), auth=AUTH, timeout=10).json() == put.json()  # as it was
    confirmed = requests.put(url(receiver, repo) + "?yes=true", json=everything, auth=AUTH, timeout=10)
    assert confirmed.status_code == 200
    not_json = requests.put(url(receiver, repo), data=b"{{", auth=AUTH, timeout=10,
                            headers={"Content-Type": "application/json"})
    assert not_json.status_code == 400 and '{"rules": [...]}' in not_json.json()["error"]

    assert requests.get(url(receiver, repo), timeout=10).status_code == 401
    assert requests.delete(url(receiver, repo), auth=AUTH, headers={"If-Match": put.headers["ETag"]},
                           timeout=10).status_code == 412
    assert requests.delete(url(receiver, repo), auth=AUTH, timeout=10).status_code == 204
    assert requests.get(url(receiver, repo), auth=AUTH, timeout=10).json() == {"rules": []}
    # The branch lifecycle policies are their own document.
    lifecycle = f"{receiver.url}/api/v1/repositories/{repo}/settings/branch_lifecycle/policies"
    assert requests.get(lifecycle, auth=AUTH, timeout=10).json() == {"policies": []}


def test_preview(cli, lakefs, repo):
    sizes = {"logs/2026/a.log": 10, "logs/2026/b.log": 20, "logs/audit/c.log": 40, "raw/x.csv": 80, "top.txt": 160}
    for path, size in sizes.items():
        upload(lakefs, repo, "main", path, b"x" * size)
    commit(lakefs, repo, "main")
    create_branch(lakefs, repo, "feature-1")
    upload(lakefs, repo, "feature-1", "logs/2026/staged.log", b"y" * 320)  # uncommitted: not evaluated, as in a run
    set_rules(lakefs, repo, parse_rules(RULES))
    written = datetime.now(UTC)

    # Two days on: the logs are older than 1d; raw/ is 28 days from due.
    later = (written + timedelta(days=2)).isoformat()
    report = json.loads(cli("object-lifecycle", "preview", f"lakefs://{repo}", "--now", later, "--json",
                            "--depth", "2").output)
    by_branch = {b["branch_id"]: b for b in report["branches"]}
    main, feature = by_branch["main"], by_branch["feature-1"]
    assert main["rules"] == ["old-logs"]  # "*" does not select the default branch
    assert (main["objects"], main["bytes"]) == (2, 30)
    assert [(g["rule_id"], g["prefix"], g["objects"], g["bytes"]) for g in main["by_prefix"]] == [
        ("old-logs", "logs/2026/", 2, 30)]
    assert feature["rules"] == ["old-logs", "raw"] and (feature["objects"], feature["bytes"]) == (2, 30)
    raw_due = datetime.fromisoformat(feature["by_rule"]["raw"]["next_due"])
    assert abs(raw_due - (written + timedelta(days=30))) < timedelta(minutes=5)
    assert feature["by_rule"]["raw"]["next_path"] == "raw/x.csv"

    # Now: nothing goes yet; the table says when.
    table = cli("object-lifecycle", "preview", f"lakefs://{repo}/main").output
    assert f"lakefs://{repo}/main: 0 objects, 0 bytes would expire (rules old-logs)" in table
    row = next(line for line in table.splitlines() if "old-logs" in line and "logs/" in line)
    assert row.split()[:5] == ["main", "old-logs", "logs/", "0", "0"] and ("(in 1d" in row or "(in 23h" in row), row
    assert "feature-1" not in table

    # One branch, one page of two objects at a time: the listing pages through all of them.
    listed = list(branch_objects(lakefs, repo, "feature-1", prefixes=["logs/", "raw/"], amount=2))
    assert [o.path for o in listed] == ["logs/2026/a.log", "logs/2026/b.log", "logs/2026/staged.log",
                                        "logs/audit/c.log", "raw/x.csv"]
    assert [o.size for o in listed] == [10, 20, 320, 40, 80]

    bad = cli("object-lifecycle", "preview", f"lakefs://{repo}/main/some/path", expect_exit=2).output
    assert "not a path" in bad
    assert "not found" in cli("object-lifecycle", "preview", f"lakefs://{repo}/no-such-branch",
                              expect_exit=1).output.lower()


def test_preview_without_rules(cli, repo):
    assert "has no object lifecycle rules" in cli("object-lifecycle", "preview", f"lakefs://{repo}").output


def test_preview_table_shows_every_branch(cli, lakefs, repo):
    upload(lakefs, repo, "main", "logs/a.log", b"x")
    commit(lakefs, repo, "main")
    create_branch(lakefs, repo, "feature-1")
    set_rules(lakefs, repo, parse_rules(RULES))
    later = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    out = cli("object-lifecycle", "preview", f"lakefs://{repo}", "--now", later).output
    assert f"lakefs://{repo}/feature-1: 1 object, 1 byte would expire (rules old-logs, raw)" in out
    assert f"lakefs://{repo}/main: 1 object, 1 byte would expire (rules old-logs)" in out


def test_the_enterprise_body_is_accepted_at_the_enterprise_path(receiver, repo):
    body = {"rules": [{"id": "ent", "branches": ["main"], "prefix": "logs/", "expire_after_days": 30}]}
    put = requests.put(url(receiver, repo), json=body, auth=AUTH, timeout=10)
    assert put.status_code == 200, put.text
    assert put.json() == {"rules": [{"id": "ent", "branches": ["main"], "paths": ["logs/**"], "max_age": "4w2d",
                                     "status": "enabled"}]}


def test_set_validates_the_file_before_contacting_lakefs(env, tmp_path):
    from click.testing import CliRunner  # noqa: PLC0415

    from workers.cli import main  # noqa: PLC0415

    bad = tmp_path / "r.yaml"
    bad.write_text("rules: [{id: r, branches: [dev], paths: ['a/**'], max_age: '-1d'}]\n")
    down = {**env, "LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9"}
    result = CliRunner().invoke(main, ["object-lifecycle", "rules", "set", "lakefs://some-repo", "-f", str(bad)],
                                env=down)
    assert result.exit_code == 1 and 'rules[0] (id "r") max_age' in result.output
    assert "unreachable" not in result.output
