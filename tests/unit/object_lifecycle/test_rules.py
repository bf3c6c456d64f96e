"""Object lifecycle rules: every mistake is refused with the rule and the field it is in; the canonical form and
its ETag; which branches and paths a rule selects."""

from __future__ import annotations

from datetime import timedelta

import pytest

from workers.object_lifecycle.rules import (
    RulesValidationError,
    canonical,
    etag,
    needing_confirmation,
    parse_rules,
)

GOOD = {"id": "old-logs", "branches": ["main", "ingest-*"], "paths": ["logs/**", "!logs/keep/**"], "max_age": "30d"}


def errors_of(document) -> list[str]:
    with pytest.raises(RulesValidationError) as info:
        parse_rules(document)
    return [str(e) for e in info.value.errors]


def test_a_good_rule_and_its_canonical_form():
    rules = parse_rules({"rules": [GOOD, {**GOOD, "id": "tmp", "status": "disabled", "description": "scratch",
                                          "max_age": "1w3d12h"}]})
    assert rules[0].max_age == timedelta(days=30) and rules[0].status == "enabled" and rules[0].description == ""
    assert canonical(rules) == {"rules": [
        {"id": "old-logs", "branches": ["main", "ingest-*"], "paths": ["logs/**", "!logs/keep/**"], "max_age": "4w2d",
         "status": "enabled"},
        {"id": "tmp", "branches": ["main", "ingest-*"], "paths": ["logs/**", "!logs/keep/**"], "max_age": "1w3d12h",
         "status": "disabled", "description": "scratch"}]}
    # The canonical form reads back as itself; equal lists however spelled share the ETag, others do not.
    assert parse_rules(canonical(rules)) == rules
    assert etag(parse_rules([{**GOOD, "max_age": "720h"}])) == etag(rules[:1]) != etag(rules)
    assert parse_rules([GOOD]) == rules[:1]  # a bare list is a document too


BAD_FIELDS = [
    ("branches", "main", "got a string"),
    ("branches", [], "non-empty list"),
    ("branches", ["a b"], "whitespace"),
    ("branches", ["feat/x"], "'/'"),
    ("branches", ["feat-[ab"], "never closed"),
    ("branches", ["x", "x"], "more than once"),
    ("branches", [3], "non-empty string"),
    ("paths", None, "non-empty list"),
    ("paths", "logs/**", "got a string"),
    ("paths", ["/logs/**"], "no leading '/'"),
    ("paths", ["logs/a**"], "whole segment"),
    ("paths", ["!logs/**"], "only exclusions"),
    ("paths", ["!"], "must be followed"),
    ("paths", ["logs/**", "logs/**"], "more than once"),
    ("paths", [""], "non-empty string"),
    ("max_age", "soon", "not a duration"),
    ("max_age", "0d", "greater than zero"),
    ("max_age", 30, "expected a string"),
    ("max_age", "-1d", "not a duration"),
    ("status", "on", '"enabled" or "disabled"'),
    ("status", True, '"enabled" or "disabled"'),
    ("description", 5, "expected text"),
]


@pytest.mark.parametrize(("field", "value", "says"), BAD_FIELDS)
def test_every_bad_field_is_named_with_its_rule(field, value, says):
    found = errors_of({"rules": [GOOD, {**GOOD, "id": "second", field: value}]})
    assert len(found) == 1, found
    assert found[0].startswith(f'rules[1] (id "second") {field}: '), found
    assert says in found[0], found


@pytest.mark.parametrize("field", ["id", "branches", "paths", "max_age"])
def test_required_fields(field):
    item = {k: v for k, v in GOOD.items() if k != field}
    found = errors_of({"rules": [item]})
    assert len(found) == 1 and f"{field}: required" in found[0], found
    if field != "id":
        assert '(id "old-logs")' in found[0]


@pytest.mark.parametrize("bad_id", ["", "a b", "-x", "x" * 65, 7, ".hidden"])
def test_bad_ids(bad_id):
    found = errors_of([{**GOOD, "id": bad_id}])
    assert len(found) == 1 and found[0].startswith("rules[0] id: ") and "not a valid id" in found[0], found


def test_unknown_fields_and_duplicate_ids_and_every_mistake_at_once():
    found = errors_of({"rules": [GOOD, {**GOOD, "max_agee": "1d"}, {**GOOD, "paths": [], "max_age": "x"}, 4],
                       "extra": 1})
    assert found[0] == "extra: unknown field; the top level holds only 'rules'"
    assert 'rules[1] (id "old-logs") id: duplicate id: rules[0] already uses it' in found[1]
    assert found[2].startswith('rules[1] (id "old-logs") max_agee: unknown field; a rule has id, branches')
    assert [f.split(":")[0] for f in found[3:]] == [
        'rules[2] (id "old-logs") id', 'rules[2] (id "old-logs") paths', 'rules[2] (id "old-logs") max_age',
        "rules[3]"]


@pytest.mark.parametrize("document", [None, "rules", 3, {"rules": "x"}, {}])
def test_bad_documents(document):
    assert errors_of(document)


def test_default_branch_only_by_its_literal_name():
    star, named = parse_rules([{**GOOD, "id": "star", "branches": ["*", "ma?n"]},
                               {**GOOD, "id": "named", "branches": ["main"]}])
    assert star.selects_branch("feature", is_default=False) and star.selects_branch("main", is_default=False)
    assert not star.selects_branch("main", is_default=True)
    assert named.selects_branch("main", is_default=True) and not named.selects_branch("main2", is_default=False)


def test_paths_as_in_the_cleaning_policies():
    (rule,) = parse_rules([{**GOOD, "paths": ["logs/**", "tables/*/tmp/**", "!logs/keep/**", "!**/*.keep"]}])
    assert rule.selects_path("logs/a") and rule.selects_path("logs/a/b/c")
    assert not rule.selects_path("logs") and not rule.selects_path("logsx/a")
    assert not rule.selects_path("logs/keep/a") and not rule.selects_path("logs/a/b.keep")
    assert rule.selects_path("tables/t1/tmp/x") and not rule.selects_path("tables/t1/t2/tmp/x")
    assert rule.listing_prefixes() == ("logs/", "tables/")


def test_a_rule_expiring_everything_needs_confirmation_once():
    everything, narrow = parse_rules([{**GOOD, "id": "all", "paths": ["**"]}, GOOD])
    off = everything.model_copy(update={"status": "disabled"})
    excluded = parse_rules([{**GOOD, "id": "all", "paths": ["**", "!keep/**"]}])[0]
    assert everything.expires_everything() and not narrow.expires_everything()
    assert not off.expires_everything() and not excluded.expires_everything()
    assert needing_confirmation([everything, narrow], []) == [everything]
    assert needing_confirmation([everything, narrow], [everything]) == []  # stored so already: confirmed
    longer = everything.model_copy(update={"max_age": timedelta(days=90)})
    assert needing_confirmation([longer], [everything]) == [longer]  # a change is confirmed again


def test_the_lakefs_enterprise_spelling_is_accepted_and_stored_in_ours():
    rules = parse_rules({"rules": [
        {"id": "e", "branches": ["main"], "prefix": "logs/2024", "expire_after_days": 30, "description": "d"},
        {"id": "f", "branches": ["x"], "prefix": "tmp/", "expire_after_days": 1},
        {"id": "g", "branches": ["x"], "prefix": "", "expire_after_days": 2}]})
    assert canonical(rules)["rules"] == [
        {"id": "e", "branches": ["main"], "paths": ["logs/2024*", "logs/2024*/**"], "max_age": "4w2d",
         "status": "enabled", "description": "d"},
        {"id": "f", "branches": ["x"], "paths": ["tmp/**"], "max_age": "1d", "status": "enabled"},
        {"id": "g", "branches": ["x"], "paths": ["**"], "max_age": "2d", "status": "enabled"}]
    e = rules[0]  # a prefix is a plain string prefix, as in lakeFS
    assert [e.selects_path(p) for p in ("logs/2024", "logs/2024-01/x", "logs/2024/a/b", "logs/202", "log")] == [
        True, True, True, False, False]
    assert e.listing_prefixes() == ("logs/2024", "logs/2024") and rules[2].expires_everything()


@pytest.mark.parametrize(("item", "field", "says"), [
    ({"prefix": "/a", "expire_after_days": 1}, "prefix", "no leading '/'"),
    ({"prefix": "a*", "expire_after_days": 1}, "prefix", "taken literally"),
    ({"prefix": 3, "expire_after_days": 1}, "prefix", "got a number"),
    ({"expire_after_days": 1}, "prefix", "got null"),
    ({"prefix": "a", "expire_after_days": 0}, "expire_after_days", "≥ 1"),
    ({"prefix": "a", "expire_after_days": "7"}, "expire_after_days", "≥ 1"),
    ({"prefix": "a"}, "expire_after_days", "≥ 1"),
    ({"prefix": "a", "expire_after_days": 1, "max_age": "1d"}, None, "mixes two forms"),
])
def test_enterprise_mistakes_name_rule_and_field(item, field, says):
    (found,) = errors_of([{"id": "ent", "branches": ["main"], **item}])
    assert found.startswith('rules[0] (id "ent")' + (f" {field}: " if field else ": ")) and says in found, found
