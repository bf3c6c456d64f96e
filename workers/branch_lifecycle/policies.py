"""Branch lifecycle policies: parsing, validation, canonical form and ETag.

Two spellings are accepted so the service is a drop-in for both the documented file format and the lakeFS
Enterprise API: ``patterns``/``max_age``/``max_idle_age`` with duration strings, or
``name_patterns``/``max_age``/``max_inactivity_time`` with integer seconds. Internally both become ``Policy``.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta

from wcmatch import fnmatch

from spark_jobs.core.durations import DurationError, format_duration, parse_duration, parse_seconds
from workers.shared.document_text import kind_of, quote_value
from workers.shared.lakefs.documents import etag_of

# fnmatch, not globmatch: `*` also crosses `/`. lakeFS branch ids are [\w-]+ so a `/` never occurs and the
# choice is moot for matching; fnmatch simply keeps the semantics "a pattern is matched against a name".
# CASE: branch ids are case-sensitive on every OS. DOTMATCH: `*` has no reason to skip names starting with a dot.
# FORCEUNIX: `\` is always an escape, never a Windows path separator. No BRACE/EXTMATCH/NEGATE: the seed promises
# only `*`, `?` and `[abc]`, so `{`, `|`, `!` stay literal.
_GLOB_FLAGS = fnmatch.CASE | fnmatch.DOTMATCH | fnmatch.FORCEUNIX
_MAX_ID_LENGTH = 32


@dataclass(frozen=True)
class Policy:
    id: str
    patterns: tuple[str, ...]
    max_age: timedelta | None = None
    max_idle_age: timedelta | None = None
    description: str | None = None

    def matches(self, branch_id: str) -> bool:
        """True if any pattern matches (OR across the list)."""
        return bool(self.patterns) and _matcher(self.patterns).match(branch_id) is not None


@functools.lru_cache(maxsize=1024)
def _matcher(patterns: tuple[str, ...]) -> re.Pattern[str]:
    # A run matches every branch against every policy: compile once, and match with one plain regex (wcmatch's
    # own matcher object costs ~10x more per call). No NEGATE flag, so there are no exclusion patterns.
    include, _ = fnmatch.translate(patterns, flags=_GLOB_FLAGS)
    return re.compile("|".join(include))


@dataclass(frozen=True)
class PolicyError:
    index: int | None  # position in the policies list; None for file-level problems
    field: str | None
    message: str

    def __str__(self) -> str:
        where = [f"policies[{self.index}]"] if self.index is not None else []
        where += [self.field] if self.field else []
        return f"{'.'.join(where)}: {self.message}" if where else self.message


class PolicyValidationError(ValueError):
    def __init__(self, errors: list[PolicyError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


@dataclass(frozen=True)
class _Shape:
    patterns: str
    idle: str
    parse: Callable[[object], timedelta]

    @property
    def fields(self) -> tuple[str, ...]:
        return (self.patterns, "max_age", self.idle, "description", "id")


_SEED = _Shape("patterns", "max_idle_age", parse_duration)
_ENTERPRISE = _Shape("name_patterns", "max_inactivity_time", parse_seconds)

_Add = Callable[[str | None, str], None]


# --- parsing -----------------------------------------------------------------------------------------------


def parse_policies(document: object, default_branch: str | None) -> list[Policy]:
    """Validate a whole document, reporting every problem at once, and assign missing ids."""
    errors: list[PolicyError] = []
    items = _policy_items(document, errors)
    drafts = [_parse_one(i, item, default_branch, errors) for i, item in enumerate(items)]
    _check_unique_ids([pid for pid, _ in drafts], errors)
    if errors:
        # File-level problems first, then by policy; the sort is stable so fields keep their checking order.
        raise PolicyValidationError(sorted(errors, key=lambda e: -1 if e.index is None else e.index))
    return _assign_ids([(pid, policy) for pid, policy in drafts if policy is not None])


def _policy_items(document: object, errors: list[PolicyError]) -> list[object]:
    if isinstance(document, list):
        return document
    if not isinstance(document, dict):
        message = f"expected a mapping with a 'policies' list, or a list of policies; got {kind_of(document)}"
        errors.append(PolicyError(None, None, message))
        return []
    for key in document:
        if key != "policies":
            errors.append(PolicyError(None, str(key), "unknown field; the top level holds only 'policies'"))
    items = document.get("policies")
    if not isinstance(items, list):
        got = "nothing" if "policies" not in document else kind_of(items)
        errors.append(PolicyError(None, "policies", f"expected a list of policies, got {got}"))
        return []
    return items


def _parse_one(
    index: int, item: object, default_branch: str | None, errors: list[PolicyError]
) -> tuple[str | None, Policy | None]:
    """Returns (explicit id if valid, policy without id if the item is valid)."""
    before = len(errors)

    def add(field: str | None, message: str) -> None:
        errors.append(PolicyError(index, field, message))

    if not isinstance(item, dict):
        add(None, f"expected a mapping with patterns and max_age/max_idle_age, got {kind_of(item)}")
        return None, None
    shape = _shape_of(item, add)
    if shape is None:
        return None, None
    _check_unknown_fields(item, shape, add)
    policy_id = _parse_id(item.get("id"), add)
    patterns = _parse_patterns(item.get(shape.patterns), shape.patterns, default_branch, add)
    max_age = _parse_threshold(item, "max_age", shape, add)
    max_idle_age = _parse_threshold(item, shape.idle, shape, add)
    if item.get("max_age") is None and item.get(shape.idle) is None:
        add(None, f"set max_age, {shape.idle} or both; a policy without a threshold would never apply")
    description = _parse_description(item.get("description"), add)
    if len(errors) > before:
        return policy_id, None
    return policy_id, Policy("", patterns, max_age, max_idle_age, description)


def _shape_of(item: dict[object, object], add: _Add) -> _Shape | None:
    seed = sorted(k for k in ("patterns", "max_idle_age") if k in item)
    enterprise = sorted(k for k in ("name_patterns", "max_inactivity_time") if k in item)
    if seed and enterprise:
        add(None, f"mixes two forms: {', '.join(seed)} (duration strings) with {', '.join(enterprise)} "
                  "(Enterprise API, integer seconds); use one form per policy")
        return None
    return _ENTERPRISE if enterprise else _SEED


def _check_unknown_fields(item: dict[object, object], shape: _Shape, add: _Add) -> None:
    for key in item:
        if key in shape.fields:
            continue
        hint = difflib.get_close_matches(str(key), shape.fields, n=1)
        suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
        add(str(key), f"unknown field; a policy has {', '.join(shape.fields)}{suggestion}")


def _parse_id(value: object, add: _Add) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        add("id", f"expected a string, got {kind_of(value)}")
    elif not value:
        add("id", "must not be empty; omit it to have one assigned")
    elif len(value) > _MAX_ID_LENGTH:
        add("id", f"{quote_value(value)} is {len(value)} characters long; at most {_MAX_ID_LENGTH} are allowed")
    elif any(c.isspace() for c in value):
        add("id", f"{quote_value(value)} contains whitespace, which is not allowed")
    else:
        return value
    return None


def _parse_patterns(value: object, key: str, default_branch: str | None, add: _Add) -> tuple[str, ...]:
    example = '["feature-*"]'
    if value is None:
        add(key, f"required: a list of at least one glob pattern, e.g. {example}")
        return ()
    if isinstance(value, str):
        add(key, f"expected a list of patterns, got a string; write [{quote_value(value)}]")
        return ()
    if not isinstance(value, (list, tuple)):
        add(key, f"expected a list of patterns, got {kind_of(value)}")
        return ()
    if not value:
        add(key, f"at least one pattern is required, e.g. {example}")
    for j, pattern in enumerate(value):
        problem = _pattern_problem(pattern, default_branch)
        if problem:
            add(f"{key}[{j}]", problem)
    return tuple(value)


def _pattern_problem(pattern: object, default_branch: str | None) -> str | None:
    if not isinstance(pattern, str):
        return f"expected a string, got {kind_of(pattern)}"
    if not pattern:
        return "must not be empty"
    problem = _glob_syntax_problem(pattern)
    if problem:
        return f"{quote_value(pattern)} is not a valid glob: {problem}"
    if default_branch is not None and fnmatch.fnmatch(default_branch, pattern, flags=_GLOB_FLAGS):
        return (f"{quote_value(pattern)} matches the default branch {quote_value(default_branch)}, which is always exempt; "
                "patterns must not match it")
    return None


def _glob_syntax_problem(pattern: str) -> str | None:
    # wcmatch quietly treats an unclosed `[` as a literal; for a deletion rule that is almost surely a typo.
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            if i + 1 == len(pattern):
                return "it ends with a lone backslash (a backslash escapes the next character)"
            i += 1
        elif pattern[i] == "[":
            end = _set_end(pattern, i)
            if end is None:
                return f"the '[' at position {i + 1} is never closed with ']'"
            i = end
        i += 1
    return None


def _set_end(pattern: str, start: int) -> int | None:
    """Index of the `]` closing the set opened at `start`; a `]` right after `[` or `[!` is a member."""
    i = start + 1
    i += 1 if pattern[i:i + 1] in ("!", "^") else 0
    i += 1 if pattern[i:i + 1] == "]" else 0
    while i < len(pattern):
        if pattern[i] == "]":
            return i
        i += 2 if pattern[i] == "\\" else 1
    return None


def _parse_threshold(item: dict[object, object], key: str, shape: _Shape, add: _Add) -> timedelta | None:
    value = item.get(key)
    if value is None:
        return None
    try:
        return shape.parse(value)
    except DurationError as e:
        add(key, str(e))
        return None


def _parse_description(value: object, add: _Add) -> str | None:
    if value is not None and not isinstance(value, str):
        add("description", f"expected a string, got {kind_of(value)}")
        return None
    return value


def _check_unique_ids(ids: Sequence[str | None], errors: list[PolicyError]) -> None:
    first_use: dict[str, int] = {}
    for index, policy_id in enumerate(ids):
        if policy_id is None:
            continue
        if policy_id in first_use:
            message = f"duplicate id {quote_value(policy_id)}: policies[{first_use[policy_id]}] already uses it"
            errors.append(PolicyError(index, "id", message))
        else:
            first_use[policy_id] = index


# --- ids ---------------------------------------------------------------------------------------------------


def _assign_ids(drafts: list[tuple[str | None, Policy]]) -> list[Policy]:
    # Explicit ids are reserved first so an assigned id can never take one that appears later in the list.
    taken = {pid for pid, _ in drafts if pid is not None}
    result = []
    for pid, policy in drafts:
        if pid is None:
            pid = _derived_id(policy, taken)
            taken.add(pid)
        result.append(replace(policy, id=pid))
    return result


def _derived_id(policy: Policy, taken: set[str]) -> str:
    """`pol-` + 8 hex of the content hash, so re-applying the same file keeps the same ids.

    On a collision (in practice: two identical policies) a counter is salted in. The counter depends only on how
    many earlier policies wanted the same id, so inserting unrelated policies does not renumber anything.
    """
    content = _json(_body(policy))
    salt = 0
    while True:
        digest = hashlib.sha256(f"{content}#{salt}".encode() if salt else content.encode()).hexdigest()
        candidate = f"pol-{digest[:8]}"
        if candidate not in taken:
            return candidate
        salt += 1


# --- output ------------------------------------------------------------------------------------------------


def _body(policy: Policy) -> dict[str, object]:
    """A policy's set fields, durations in their canonical spelling."""
    out: dict[str, object] = {"patterns": list(policy.patterns)}
    if policy.max_age is not None:
        out["max_age"] = format_duration(policy.max_age)
    if policy.max_idle_age is not None:
        out["max_idle_age"] = format_duration(policy.max_idle_age)
    if policy.description is not None:
        out["description"] = policy.description
    return out


def canonical(policies: Sequence[Policy]) -> dict[str, object]:
    """The seed's shape with canonical durations; absent optional fields are omitted."""
    return {"policies": [{"id": p.id, **_body(p)} for p in policies]}


def etag(policies: Sequence[Policy]) -> str:
    """Strong ETag of the canonical form: equal policy lists, however spelled, share it."""
    return etag_of(canonical(policies))


# --- helpers -----------------------------------------------------------------------------------------------


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
