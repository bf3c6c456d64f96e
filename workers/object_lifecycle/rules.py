"""Object lifecycle rules: parsing, validation, canonical form and ETag (pure).

A rule names branches (globs; the default branch only when its name is listed literally), paths (globs over the
object's path in lakeFS, as in the cleaning policies' ``paths:``: ``*`` within a folder, ``**`` any number of
folders, ``!`` to exclude), a ``max_age`` since the object was last written on the branch (its lakeFS mtime), a
``status`` and a description. An object expires when any enabled rule selects it. lakeFS Enterprise's spelling
(``prefix``, ``expire_after_days``) is accepted too and stored in ours.

    rules:
      - id: raw-ingest
        branches: [main, "ingest-*"]
        paths: ["raw/**", "!raw/reference/**"]
        max_age: 30d
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from spark_jobs.core.durations import DurationError, format_duration, parse_duration
from spark_jobs.core.path_globs import path_glob
from workers.shared.document_text import kind_of, quote_value
from workers.shared.lakefs.documents import etag_of

# lakeFS-ish: what lakeFS accepts as a branch id ([\w-]+, not starting with '-'), plus '.', at most 64 characters.
_ID = re.compile(r"^\w[-\w.]{0,63}\Z")
_WILDCARD = re.compile(r"[*?\[]")
FIELDS = ("id", "branches", "paths", "max_age", "status", "description")
ENTERPRISE_FIELDS = ("prefix", "expire_after_days")  # lakeFS Enterprise's ObjectLifecycleRule, accepted too
_EXAMPLE = '{"rules": [{"id": "old-logs", "branches": ["main"], "paths": ["logs/**"], "max_age": "30d"}]}'


class Rule(BaseModel):
    """One rule, validated. ``branches`` and ``paths`` keep the order they were written in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    branches: tuple[str, ...]
    paths: tuple[str, ...]
    max_age: timedelta
    status: Literal["enabled", "disabled"] = "enabled"
    description: str = ""

    # --- validation (mode="before": every message is ours, and names what was given) -----------------------

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> str:
        if not isinstance(value, str) or not _ID.match(value):
            raise ValueError(f"{quote_value(value)} is not a valid id: 1-64 characters of letters, digits, '_', '-' "
                             "and '.', not starting with '-' or '.'")
        return value

    @field_validator("branches", mode="before")
    @classmethod
    def _branches(cls, value: Any) -> tuple[str, ...]:
        items = _string_list(value, 'branch globs such as ["main", "ingest-*"]')
        for glob in items:
            if any(c.isspace() or c == "/" for c in glob):
                raise ValueError(f"{quote_value(glob)}: branch ids have no whitespace and no '/'")
            if (problem := _bracket_problem(glob)) is not None:
                raise ValueError(f"{quote_value(glob)}: {problem}")
        _no_repeats(items)
        return tuple(items)

    @field_validator("paths", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> tuple[str, ...]:
        items = _string_list(value, 'path globs such as ["logs/**", "!logs/keep/**"] ("**" for every path)')
        for glob in items:
            bare = glob.removeprefix("!")
            if not bare:
                raise ValueError(f"{quote_value(glob)}: '!' must be followed by the path glob it excludes")
            if bare.startswith("/"):
                raise ValueError(f"{quote_value(glob)}: lakeFS paths have no leading '/'; write {quote_value(bare.lstrip('/'))}")
            if any("**" in s and s != "**" for s in bare.split("/")):
                raise ValueError(f"{quote_value(glob)}: '**' spans folders only as a whole segment ('a/**/b', 'a/**'); "
                                 "use '*' inside a name")
            if (problem := _bracket_problem(bare)) is not None:
                raise ValueError(f"{quote_value(glob)}: {problem}")
        _no_repeats(items)
        if all(g.startswith("!") for g in items):
            raise ValueError('only exclusions (\'!…\'): name the paths the rule expires, e.g. ["**", "!keep/**"]')
        return tuple(items)

    @field_validator("max_age", mode="before")
    @classmethod
    def _max_age(cls, value: Any) -> timedelta:
        if isinstance(value, timedelta):
            if value <= timedelta(0):
                raise ValueError("must be greater than zero")
            return value
        try:
            return parse_duration(value)
        except DurationError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> str:
        if value not in ("enabled", "disabled"):
            raise ValueError(f"{quote_value(value)}: must be \"enabled\" or \"disabled\"")
        return value

    @field_validator("description", mode="before")
    @classmethod
    def _description(cls, value: Any) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise ValueError(f"expected text, got {kind_of(value)}")
        return value

    # --- selection ---------------------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self.status == "enabled"

    @property
    def includes(self) -> tuple[str, ...]:
        return tuple(g for g in self.paths if not g.startswith("!"))

    @property
    def excludes(self) -> tuple[str, ...]:
        return tuple(g[1:] for g in self.paths if g.startswith("!"))

    def selects_branch(self, branch_id: str, *, is_default: bool) -> bool:
        """A glob selects any branch but the default one, which only its literal name selects."""
        if is_default:
            return branch_id in self.branches
        return any(fnmatch.fnmatchcase(branch_id, g) for g in self.branches)

    def selects_path(self, path: str) -> bool:
        include, exclude = _path_regexes(self.paths)
        return include.match(path) is not None and (exclude is None or exclude.match(path) is None)

    def expires_everything(self) -> bool:
        """Enabled, and its paths are every path of the branch: ``**`` and no exclusion."""
        return self.enabled and "**" in self.includes and not self.excludes

    def due_at(self, mtime: datetime) -> datetime:
        return mtime + self.max_age

    def listing_prefixes(self) -> tuple[str, ...]:
        """The prefixes every path it selects starts with one of ("" for anywhere): what a listing must cover."""
        return tuple(literal_prefix(g) for g in self.includes)


@functools.lru_cache(maxsize=1024)
def _path_regexes(paths: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    # One regex per side, built from the cleaning policies' own path globs (same semantics, same code).
    def union(globs: list[str]) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{path_glob(g).pattern})" for g in globs), re.DOTALL)

    excludes = [g[1:] for g in paths if g.startswith("!")]
    return union([g for g in paths if not g.startswith("!")]), union(excludes) if excludes else None


def literal_prefix(glob: str) -> str:
    """The text of a path glob before its first wildcard: every path it matches starts with it (lakeFS lists by
    such a plain string prefix)."""
    match = _WILDCARD.search(glob)
    return glob if match is None else glob[:match.start()]


# --- the document ------------------------------------------------------------------------------------------


class RuleError:
    """One problem: ``index`` in the rules list (None: the document itself), the rule's id when it has a valid
    one, the field (``paths[2]``; None: the rule as a whole) and the message."""

    __slots__ = ("index", "rule_id", "field", "message")

    def __init__(self, index: int | None, rule_id: str | None, field: str | None, message: str):
        self.index, self.rule_id, self.field, self.message = index, rule_id, field, message

    def __str__(self) -> str:
        where = "" if self.index is None else f"rules[{self.index}]"
        if self.rule_id is not None:
            where += f" (id {quote_value(self.rule_id)})"
        if self.field:
            where += f" {self.field}" if where else self.field
        return f"{where}: {self.message}" if where else self.message

    def document(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.rule_id, "field": self.field, "message": self.message}


class RulesValidationError(ValueError):
    def __init__(self, errors: list[RuleError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


def parse_rules(document: object) -> list[Rule]:
    """Validate ``{"rules": [...]}`` (or a bare list of rules); every mistake is reported at once, by rule and
    field. Nothing is assigned: every rule names its own id, unique in the document."""
    errors: list[RuleError] = []
    items = _rule_items(document, errors)
    rules: list[Rule] = []
    first_use: dict[str, int] = {}
    for index, item in enumerate(items):
        rule_id = _valid_id(item)
        if rule_id is not None:
            if rule_id in first_use:
                errors.append(RuleError(index, rule_id, "id", f"duplicate id: rules[{first_use[rule_id]}] already "
                                                              "uses it; every rule needs its own id"))
            first_use.setdefault(rule_id, index)
        if not isinstance(item, dict):
            errors.append(RuleError(index, None, None, f"expected a mapping with {', '.join(FIELDS[:4])}, got "
                                                       f"{kind_of(item)}"))
            continue
        if any(k in item for k in ENTERPRISE_FIELDS):
            item, problems = _from_enterprise(item)
            errors += [RuleError(index, rule_id, f, m) for f, m in problems]
            if item is None:
                continue
        try:
            rules.append(Rule.model_validate(item))
        except ValidationError as exc:
            errors += [_translate(index, rule_id, e) for e in exc.errors()]
    if errors:
        raise RulesValidationError(errors)
    return rules


def _rule_items(document: object, errors: list[RuleError]) -> list[Any]:
    if isinstance(document, list):
        return document
    if not isinstance(document, dict):
        errors.append(RuleError(None, None, None, f"expected a mapping with a 'rules' list, e.g. {_EXAMPLE}; "
                                                  f"got {kind_of(document)}"))
        return []
    for key in document:
        if key != "rules":
            errors.append(RuleError(None, None, str(key), "unknown field; the top level holds only 'rules'"))
    items = document.get("rules")
    if not isinstance(items, list):
        got = "nothing" if "rules" not in document else kind_of(items)
        errors.append(RuleError(None, None, "rules", f"expected a list of rules, got {got}"))
        return []
    return items


def _from_enterprise(item: dict[str, Any]) -> tuple[dict[str, Any] | None, list[tuple[str | None, str]]]:
    """lakeFS Enterprise's ``{id, branches, prefix, expire_after_days, description}`` as our fields: a prefix is a
    plain string prefix of the path ("logs/2024" also takes "logs/2024-01/x"), a whole number of days the age.
    Returns the rule in our fields (None when it has problems) and the problems, as (field, message)."""
    ours = sorted(k for k in ("paths", "max_age", "status") if k in item)
    if ours:
        return None, [(None, f"mixes two forms: {', '.join(ours)} with prefix/expire_after_days (lakeFS "
                             "Enterprise); use one form per rule")]
    converted = {k: v for k, v in item.items() if k not in ENTERPRISE_FIELDS}
    problems: list[tuple[str | None, str]] = []
    prefix = item.get("prefix")
    if not isinstance(prefix, str):
        problems.append(("prefix", f"expected a path prefix (a string, \"\" for every path), got {kind_of(prefix)}"))
    elif prefix.startswith("/"):
        problems.append(("prefix", f"{quote_value(prefix)}: lakeFS paths have no leading '/'; write "
                                   f"{quote_value(prefix.lstrip('/'))}"))
    elif _WILDCARD.search(prefix):
        problems.append(("prefix", f"{quote_value(prefix)}: a prefix is taken literally; for globs write paths: instead"))
    else:
        converted["paths"] = (["**"] if not prefix else [f"{prefix}**"] if prefix.endswith("/")
                              else [f"{prefix}*", f"{prefix}*/**"])
    days = item.get("expire_after_days")
    if not isinstance(days, int) or isinstance(days, bool) or days < 1:
        problems.append(("expire_after_days", f"expected a whole number of days ≥ 1, got {quote_value(days)}"))
    else:
        converted["max_age"] = timedelta(days=days)
    return (None if problems else converted), problems


def _valid_id(item: object) -> str | None:
    value = item.get("id") if isinstance(item, dict) else None
    return value if isinstance(value, str) and _ID.match(value) else None


def _translate(index: int, rule_id: str | None, error: Any) -> RuleError:
    loc = error["loc"]
    field = str(loc[0]) if loc else None
    field = (field or "") + "".join(f"[{p}]" for p in loc[1:]) or None
    if error["type"] == "missing":
        message = "required" + (f": e.g. {_FIELD_EXAMPLES[field]}" if field in _FIELD_EXAMPLES else "")
    elif error["type"] == "extra_forbidden":
        message = f"unknown field; a rule has {', '.join(FIELDS)}"
    else:
        message = str(error["msg"]).removeprefix("Value error, ")
    return RuleError(index, rule_id, field, message)


_FIELD_EXAMPLES = {"id": '"old-logs"', "branches": '["main"]', "paths": '["logs/**"]', "max_age": '"30d"'}


def _string_list(value: Any, what: str) -> list[str]:
    if isinstance(value, str):
        raise ValueError(f"expected a list of {what}, got a string; write [{quote_value(value)}]")
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"expected a non-empty list of {what}" + ("" if isinstance(value, (list, tuple))
                                                                  else f", got {kind_of(value)}"))
    for item in value:
        if not isinstance(item, str) or not item:
            raise ValueError(f"{quote_value(item)}: every item must be a non-empty string")
    return list(value)


def _no_repeats(items: list[str]) -> None:
    if repeated := sorted({g for g in items if items.count(g) > 1}):
        raise ValueError(f"{quote_value(repeated[0])} is listed more than once")


def _bracket_problem(glob: str) -> str | None:
    start = glob.find("[")
    while start != -1:
        end = glob.find("]", start + 2)
        if end == -1:
            return f"the '[' at position {start + 1} is never closed with ']'"
        start = glob.find("[", end + 1)
    return None


# --- output ------------------------------------------------------------------------------------------------


def rule_document(rule: Rule) -> dict[str, Any]:
    out: dict[str, Any] = {"id": rule.id, "branches": list(rule.branches), "paths": list(rule.paths),
                           "max_age": format_duration(rule.max_age), "status": rule.status}
    if rule.description:
        out["description"] = rule.description
    return out


def canonical(rules: Sequence[Rule]) -> dict[str, Any]:
    """What is stored and shown: ``{"rules": [...]}`` with canonical durations."""
    return {"rules": [rule_document(r) for r in rules]}


def etag(rules: Sequence[Rule]) -> str:
    """Strong ETag of the canonical form: equal rule lists, however spelled, share it."""
    return etag_of(canonical(rules))


def needing_confirmation(rules: Sequence[Rule], stored: Sequence[Rule]) -> list[Rule]:
    """The rules that would expire everything on their branches and are not stored exactly so already: a person
    confirms them once, when they are set."""
    before = {r.id: r for r in stored}
    return [r for r in rules if r.expires_everything() and before.get(r.id) != r]
