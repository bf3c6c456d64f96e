import hashlib
import json
import re
from datetime import timedelta

import pytest

from workers.branch_lifecycle.policies import (
    Policy,
    PolicyError,
    PolicyValidationError,
    canonical,
    etag,
    parse_policies,
)
from workers.branch_lifecycle.policy_text import load_policy_text

SEED_EXAMPLE = {
    "policies": [
        {
            "patterns": ["feature-*", "wip-*"],
            "max_age": "7d",
            "max_idle_age": "3d",
            "description": "Auto-clean feature and WIP branches once they're old and quiet",
        },
        {"patterns": ["temp-*"], "max_idle_age": "24h"},
    ]
}


def errors_of(document: object, default_branch: str | None = "main") -> list[tuple[int | None, str | None]]:
    with pytest.raises(PolicyValidationError) as caught:
        parse_policies(document, default_branch)
    return [(e.index, e.field) for e in caught.value.errors]


def only_error(document: object, default_branch: str | None = "main") -> PolicyError:
    with pytest.raises(PolicyValidationError) as caught:
        parse_policies(document, default_branch)
    assert len(caught.value.errors) == 1, caught.value.errors
    return caught.value.errors[0]


def valid(**fields: object) -> dict[str, object]:
    return {"patterns": ["feature-*"], "max_age": "7d", **fields}


# --- Policy.matches -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patterns", "branch", "expected"),
    [
        (("feature-*",), "feature-login", True),
        (("feature-*",), "feature-", True),
        (("feature-*",), "Feature-login", False),
        (("feature-*",), "my-feature-x", False),
        (("temp-?",), "temp-1", True),
        (("temp-?",), "temp-12", False),
        (("ci-[abc]",), "ci-b", True),
        (("ci-[abc]",), "ci-d", False),
        (("ci-[!abc]",), "ci-d", True),
        (("exact",), "exact", True),
        (("exact",), "exact2", False),
        (("a-*", "b-*"), "b-1", True),
        (("a-*", "b-*"), "c-1", False),
        (("x{a,b}",), "xa", False),
        (("*",), "a/b", True),
        ((), "anything", False),
    ],
)
def test_matches_glob_syntax(patterns: tuple[str, ...], branch: str, expected: bool) -> None:
    assert Policy("p", patterns, max_age=timedelta(days=1)).matches(branch) is expected


# --- both shapes ----------------------------------------------------------------------------------------------


def test_seed_shape() -> None:
    first, second = parse_policies(SEED_EXAMPLE, "main")
    assert first.patterns == ("feature-*", "wip-*")
    assert first.max_age == timedelta(days=7)
    assert first.max_idle_age == timedelta(days=3)
    assert first.description == "Auto-clean feature and WIP branches once they're old and quiet"
    assert second.patterns == ("temp-*",)
    assert second.max_age is None
    assert second.max_idle_age == timedelta(hours=24)
    assert second.description is None


def test_enterprise_shape() -> None:
    document = {
        "policies": [
            {"id": "ent", "name_patterns": ["feature-*"], "max_age": 604800, "max_inactivity_time": 259200,
             "description": "d"},
            {"name_patterns": ["temp-*"], "max_inactivity_time": 86400},
            {"name_patterns": ["old-*"], "max_age": 60},
        ]
    }
    first, second, third = parse_policies(document, "main")
    assert first == Policy("ent", ("feature-*",), timedelta(days=7), timedelta(days=3), "d")
    assert (second.max_age, second.max_idle_age) == (None, timedelta(days=1))
    assert (third.max_age, third.max_idle_age) == (timedelta(minutes=1), None)


def test_bare_list_is_accepted() -> None:
    assert parse_policies(SEED_EXAMPLE["policies"], "main") == parse_policies(SEED_EXAMPLE, "main")


def test_empty_list_is_valid() -> None:
    assert parse_policies({"policies": []}, "main") == []
    assert parse_policies([], "main") == []


def test_both_shapes_give_the_same_id_for_the_same_content() -> None:
    seed = parse_policies([{"patterns": ["a-*"], "max_age": "1w", "max_idle_age": "1d"}], "main")
    enterprise = parse_policies([{"name_patterns": ["a-*"], "max_age": 604800, "max_inactivity_time": 86400}],
                                "main")
    assert seed == enterprise


@pytest.mark.parametrize(
    "policy",
    [
        {"patterns": ["a"], "name_patterns": ["b"], "max_age": "1d"},
        {"patterns": ["a"], "max_inactivity_time": 60},
        {"name_patterns": ["a"], "max_idle_age": "1d"},
    ],
)
def test_mixed_shape_is_one_error(policy: dict[str, object]) -> None:
    error = only_error([valid(), policy])
    assert (error.index, error.field) == (1, None)
    assert error.message.startswith("mixes two forms:")


def test_seed_shape_rejects_integer_seconds() -> None:
    error = only_error([valid(max_age=3600)])
    assert (error.index, error.field) == (0, "max_age")
    assert error.message.startswith("3600 is not a duration: expected a string")


def test_enterprise_shape_rejects_duration_strings() -> None:
    error = only_error([{"name_patterns": ["a"], "max_age": "7d"}])
    assert (error.index, error.field) == (0, "max_age")
    assert error.message == '"7d" is not a number of seconds: expected a whole number, at least 1'


def test_enterprise_shape_rejects_bool_and_zero() -> None:
    document = [{"name_patterns": ["a"], "max_age": True, "max_inactivity_time": 0}]
    assert errors_of(document) == [(0, "max_age"), (0, "max_inactivity_time")]


# --- validation rules -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("policies", (None, None)),
        (None, (None, None)),
        ({}, (None, "policies")),
        ({"policies": None}, (None, "policies")),
        ({"policies": {"patterns": ["a"]}}, (None, "policies")),
        ({"policies": [], "extra": 1}, (None, "extra")),
        ([valid(), "not a mapping"], (1, None)),
        ([valid(), 42], (1, None)),
        ([valid(patterns=None)], (0, "patterns")),
        ([{"max_age": "7d"}], (0, "patterns")),
        ([valid(patterns=[])], (0, "patterns")),
        ([valid(patterns="feature-*")], (0, "patterns")),
        ([valid(patterns={"a": 1})], (0, "patterns")),
        ([valid(patterns=["ok-*", ""])], (0, "patterns[1]")),
        ([valid(patterns=["ok-*", 5])], (0, "patterns[1]")),
        ([valid(patterns=["ok-[ab"])], (0, "patterns[0]")),
        ([valid(patterns=["ok-\\"])], (0, "patterns[0]")),
        ([{"patterns": ["a"]}], (0, None)),
        ([{"patterns": ["a"], "max_age": None, "max_idle_age": None}], (0, None)),
        ([valid(max_age="7x")], (0, "max_age")),
        ([valid(max_age="0s")], (0, "max_age")),
        ([valid(max_idle_age="-1d")], (0, "max_idle_age")),
        ([valid(id="x" * 33)], (0, "id")),
        ([valid(id="has space")], (0, "id")),
        ([valid(id="tab\there")], (0, "id")),
        ([valid(id="")], (0, "id")),
        ([valid(id=7)], (0, "id")),
        ([valid(description=7)], (0, "description")),
        ([valid(descripton="x")], (0, "descripton")),
        ([valid(), valid(max_age="1d", pattern=["x"])], (1, "pattern")),
    ],
)
def test_each_rule_reports_index_and_field(document: object, expected: tuple[int | None, str | None]) -> None:
    assert errors_of(document) == [expected]


def test_thirty_two_character_id_is_accepted() -> None:
    [policy] = parse_policies([valid(id="x" * 32)], "main")
    assert policy.id == "x" * 32


def test_null_optional_fields_count_as_absent() -> None:
    [policy] = parse_policies([valid(max_idle_age=None, description=None, id=None)], "main")
    assert (policy.max_idle_age, policy.description) == (None, None)
    assert re.fullmatch(r"pol-[0-9a-f]{8}", policy.id)


def test_error_messages_quote_values() -> None:
    cases = {
        "max_age": (valid(max_age="7x"), '"7x" is not a duration: unknown unit \'x\''),
        "id": (valid(id="a b"), '"a b" contains whitespace, which is not allowed'),
        "patterns[0]": (valid(patterns=["a[b"]), "\"a[b\" is not a valid glob: the '[' at position 2 is never closed"),
    }
    for field, (policy, start) in cases.items():
        error = only_error([policy])
        assert error.field == field
        assert error.message.startswith(start), error.message


def test_unknown_field_suggests_the_close_one() -> None:
    error = only_error([valid(descripton="x")])
    assert error.message.endswith("did you mean 'description'?")


def test_all_errors_reported_at_once() -> None:
    document = {
        "policies": [
            {"patterns": ["feature-*"], "max_age": "7x"},
            {"patterns": [], "max_idle_age": "1d"},
            {"patterns": ["ok"], "max_age": "1d", "id": "has space"},
        ]
    }
    with pytest.raises(PolicyValidationError) as caught:
        parse_policies(document, "main")
    assert [(e.index, e.field) for e in caught.value.errors] == [(0, "max_age"), (1, "patterns"), (2, "id")]
    lines = str(caught.value).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith('policies[0].max_age: "7x" is not a duration: ')
    assert lines[1] == 'policies[1].patterns: at least one pattern is required, e.g. ["feature-*"]'
    assert lines[2] == 'policies[2].id: "has space" contains whitespace, which is not allowed'


def test_several_errors_in_one_policy_are_all_reported() -> None:
    document = [{"patterns": ["*"], "max_age": "7x", "max_idle_age": "0s", "id": "a b", "description": 1, "x": 1}]
    assert errors_of(document) == [
        (0, "x"), (0, "id"), (0, "patterns[0]"), (0, "max_age"), (0, "max_idle_age"), (0, "description"),
    ]


def test_errors_are_ordered_by_policy() -> None:
    document = [valid(id="dup"), valid(id="dup", max_age="7x")]
    assert errors_of(document) == [(1, "max_age"), (1, "id")]


def test_error_is_a_value_error_and_str_format() -> None:
    assert issubclass(PolicyValidationError, ValueError)
    assert str(PolicyError(1, "max_age", "m")) == "policies[1].max_age: m"
    assert str(PolicyError(1, None, "m")) == "policies[1]: m"
    assert str(PolicyError(None, "policies", "m")) == "policies: m"
    assert str(PolicyError(None, None, "m")) == "m"


# --- default branch -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["*", "main", "ma?n", "m[a]in", "*n"])
def test_pattern_matching_default_branch_is_rejected(pattern: str) -> None:
    error = only_error([valid(patterns=["feature-*", pattern])], "main")
    assert (error.index, error.field) == (0, "patterns[1]")
    assert error.message == (
        f'"{pattern}" matches the default branch "main", which is always exempt; patterns must not match it'
    )


def test_default_branch_check_is_case_sensitive_and_exact() -> None:
    assert len(parse_policies([valid(patterns=["Main", "main-*", "mai"])], "main")) == 1


def test_no_default_branch_means_no_default_check() -> None:
    assert parse_policies([valid(patterns=["*"])], None)[0].patterns == ("*",)


# --- ids ------------------------------------------------------------------------------------------------------


def test_assigned_id_is_derived_from_content() -> None:
    [policy] = parse_policies([{"patterns": ["temp-*"], "max_idle_age": "24h"}], "main")
    content = json.dumps({"patterns": ["temp-*"], "max_idle_age": "1d"}, sort_keys=True, separators=(",", ":"))
    assert policy.id == "pol-" + hashlib.sha256(content.encode()).hexdigest()[:8]


def test_ids_are_stable_on_reapply() -> None:
    first = parse_policies(SEED_EXAMPLE, "main")
    again = parse_policies(json.loads(json.dumps(SEED_EXAMPLE)), "main")
    assert [p.id for p in first] == [p.id for p in again]
    assert all(re.fullmatch(r"pol-[0-9a-f]{8}", p.id) for p in first)


def test_equivalent_durations_give_the_same_id() -> None:
    [a] = parse_policies([{"patterns": ["t-*"], "max_idle_age": "24h"}], "main")
    [b] = parse_policies([{"patterns": ["t-*"], "max_idle_age": "1d"}], "main")
    assert a.id == b.id


def test_different_content_gives_different_ids() -> None:
    a, b, c = parse_policies([valid(), valid(max_age="8d"), valid(description="x")], "main")
    assert len({a.id, b.id, c.id}) == 3


def test_identical_policies_get_unique_deterministic_ids() -> None:
    policies = parse_policies([valid(), valid(), valid()], "main")
    ids = [p.id for p in policies]
    assert len(set(ids)) == 3
    assert ids == [p.id for p in parse_policies([valid(), valid(), valid()], "main")]
    assert ids[0] == parse_policies([valid()], "main")[0].id


def test_assigned_id_never_takes_an_explicit_id_even_a_later_one() -> None:
    natural = parse_policies([valid()], "main")[0].id
    policies = parse_policies([valid(), valid(id=natural, max_age="1d")], "main")
    assert policies[1].id == natural
    assert policies[0].id != natural
    assert re.fullmatch(r"pol-[0-9a-f]{8}", policies[0].id)


def test_explicit_ids_are_kept() -> None:
    assert [p.id for p in parse_policies([valid(id="features"), valid(id="pol-x", max_age="1d")], "main")] == [
        "features", "pol-x",
    ]


def test_duplicate_id_reported_on_the_later_one() -> None:
    error = only_error([valid(id="a"), valid(id="b", max_age="1d"), valid(id="a", max_age="2d")])
    assert (error.index, error.field) == (2, "id")
    assert error.message == 'duplicate id "a": policies[0] already uses it'


def test_canonical_output_reapplies_to_the_same_policies() -> None:
    policies = parse_policies(SEED_EXAMPLE, "main")
    assert parse_policies(canonical(policies), "main") == policies


# --- canonical / enterprise / etag ----------------------------------------------------------------------------


def test_canonical_shape() -> None:
    policies = [
        Policy("a", ("feature-*", "wip-*"), timedelta(days=10, hours=12), timedelta(hours=24), "d"),
        Policy("b", ("temp-*",), None, timedelta(minutes=90)),
    ]
    assert canonical(policies) == {
        "policies": [
            {"id": "a", "patterns": ["feature-*", "wip-*"], "max_age": "1w3d12h", "max_idle_age": "1d",
             "description": "d"},
            {"id": "b", "patterns": ["temp-*"], "max_idle_age": "1h30m"},
        ]
    }


def test_the_enterprise_shape_reads_as_the_same_policies() -> None:
    # (to_enterprise, which wrote this shape and nothing but this test used, is gone: the shape is only read.)
    policies = [
        Policy("a", ("feature-*",), timedelta(days=7), timedelta(days=3), "d"),
        Policy("b", ("temp-*",), None, timedelta(hours=24)),
        Policy("c", ("old-*",), timedelta(seconds=90), None),
    ]
    assert parse_policies({
        "policies": [
            {"id": "a", "name_patterns": ["feature-*"], "max_age": 604800, "max_inactivity_time": 259200,
             "description": "d"},
            {"id": "b", "name_patterns": ["temp-*"], "max_inactivity_time": 86400},
            {"id": "c", "name_patterns": ["old-*"], "max_age": 90},
        ]
    }, "main") == policies


def test_etag_is_quoted_sha256_of_canonical_json() -> None:
    policies = parse_policies(SEED_EXAMPLE, "main")
    body = json.dumps(canonical(policies), sort_keys=True, separators=(",", ":"))
    assert etag(policies) == '"' + hashlib.sha256(body.encode()).hexdigest() + '"'


def test_etag_of_empty_list_is_stable() -> None:
    expected = '"' + hashlib.sha256(b'{"policies":[]}').hexdigest() + '"'
    assert etag([]) == expected
    assert etag(parse_policies({"policies": []}, "main")) == expected


def test_etag_ignores_spelling_but_not_content() -> None:
    a = parse_policies([{"id": "x", "patterns": ["t-*"], "max_idle_age": "24h"}], "main")
    b = parse_policies([{"id": "x", "name_patterns": ["t-*"], "max_inactivity_time": 86400}], "main")
    c = parse_policies([{"id": "x", "patterns": ["t-*"], "max_idle_age": "25h"}], "main")
    d = parse_policies([{"id": "y", "patterns": ["t-*"], "max_idle_age": "24h"}], "main")
    assert etag(a) == etag(b)
    assert len({etag(a), etag(c), etag(d), etag([])}) == 4


def test_etag_depends_on_order() -> None:
    policies = parse_policies(SEED_EXAMPLE, "main")
    assert etag(policies) != etag(list(reversed(policies)))


# --- text -----------------------------------------------------------------------------------------------------

YAML_TEXT = """\
policies:
  - patterns: ["feature-*"]
    max_age: "7d"
  - patterns: ["temp-*"]
    max_age: "24h"
"""


def test_load_yaml() -> None:
    first, second = load_policy_text(YAML_TEXT, "main")
    assert (first.patterns, first.max_age) == (("feature-*",), timedelta(days=7))
    assert (second.patterns, second.max_age) == (("temp-*",), timedelta(days=1))


def test_load_json_equals_yaml() -> None:
    assert load_policy_text(json.dumps(SEED_EXAMPLE, indent=2), "main") == parse_policies(SEED_EXAMPLE, "main")


def test_load_tab_indented_json() -> None:
    text = json.dumps(SEED_EXAMPLE, indent="\t")
    assert load_policy_text(text, "main") == parse_policies(SEED_EXAMPLE, "main")


def test_load_flow_style_yaml() -> None:
    assert load_policy_text("[{patterns: [a-*], max_age: 1d}]", "main")[0].max_age == timedelta(days=1)


def load_error(text: str) -> PolicyError:
    with pytest.raises(PolicyValidationError) as caught:
        load_policy_text(text, "main")
    assert len(caught.value.errors) == 1
    return caught.value.errors[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty; expected a mapping with a 'policies' list"),
        ("  \n\n", "the file is empty; expected a mapping with a 'policies' list"),
        ("# only a comment\n",
         "the file holds no document (only comments?); expected a mapping with a 'policies' list"),
        ("42\n", "expected a mapping with a 'policies' list, or a list of policies; got a number"),
        ('"text"\n', "expected a mapping with a 'policies' list, or a list of policies; got a string"),
        ('{"policies": [}', "line 1, column 15: invalid JSON: Expecting value"),
        ('{"policies": [], "policies": []}', 'duplicate key "policies": each field may appear once per mapping'),
    ],
)
def test_load_errors(text: str, message: str) -> None:
    error = load_error(text)
    assert (error.index, error.field, error.message) == (None, None, message)


def test_yaml_syntax_error_has_line_and_column() -> None:
    error = load_error("policies:\n  - patterns: [a\n    max_age: 1d\n")
    assert (error.index, error.field) == (None, None)
    assert re.match(r"line 3, column \d+: invalid YAML: ", error.message), error.message


def test_yaml_duplicate_key_is_an_error() -> None:
    error = load_error("policies:\n  - patterns: [a]\n    max_age: 1d\n    max_age: 2d\n")
    assert error.message == 'line 4, column 5: invalid YAML: duplicate key "max_age"'


def test_load_validates_content_with_default_branch() -> None:
    error = load_error("policies:\n  - patterns: ['*']\n    max_age: 1d\n")
    assert (error.index, error.field) == (0, "patterns[0]")
