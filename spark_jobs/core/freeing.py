"""Whether the bytes a GC deletes are really freed: given a bucket's or container's settings as its store's API
returns them (versioning, lifecycle rules, soft delete) and the namespace's prefix in it, a verdict a person can
act on: freed at once, freed N days after deletion (by which rule or setting), or never freed (and the rule to
add, in the store's own format). Pure: the stores' modules read the settings, this decides.

A lakeFS physical address is written once, so a deleted object leaves at most one noncurrent version (S3: plus a
delete marker; GCS: one noncurrent generation, no marker): a rule that keeps the newest N noncurrent versions
(``NewerNoncurrentVersions`` ≥ 1, GCS ``numNewerVersions`` ≥ 1) therefore never frees it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

FREED = "freed"  # freed at once
DELAYED = "delayed"  # freed ``days`` after deletion
NEVER = "never"  # billed until someone removes it
UNKNOWN = "unknown"  # the settings could not be read
STATES = (FREED, DELAYED, NEVER, UNKNOWN)
FIX_ID = "lakefs-janitor-noncurrent"


@dataclass(frozen=True)
class Verdict:
    store: str
    state: str  # FREED | DELAYED | NEVER | UNKNOWN
    message: str
    days: float | None = None  # DELAYED: days after deletion (at most, for GCS age rules)
    rule: str | None = None  # the rule or setting that frees them
    fix: str | None = None  # NEVER (and DELAYED with a long delay): what to add, in the store's own format
    versioned: bool | None = None  # None: unknown
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Days a purged version is still kept (GCS's soft-delete policy holds deleted generations too): 0, freed at once
    purge_keeps_days: float = 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, raw: dict) -> Verdict:
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        return cls(**{**known, "notes": tuple(raw.get("notes") or ())})

    @property
    def pending(self) -> bool:
        """Whether deleted bytes stay billed for a while (or for ever, or maybe)."""
        return self.state != FREED


def _dir(prefix: str) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/" if prefix else ""


def _covers(rule_prefix: str | None, namespace_prefix: str) -> str:
    """"all" when a rule's prefix covers the whole namespace, "part" when only some of it, "none"."""
    rule_prefix = rule_prefix or ""
    if namespace_prefix.startswith(rule_prefix):
        return "all"
    return "part" if rule_prefix.startswith(namespace_prefix) else "none"


def unreadable(store: str, what: str, *, permission: str, error: str) -> Verdict:
    """The verdict when the identity cannot read the settings: a message, never a failure of the run."""
    return Verdict(store, UNKNOWN, f"cannot read the {what} (needs {permission}): {error}; whether deleted "
                                   "objects are freed is unknown")


# -- S3 ------------------------------------------------------------------------------------------------------

def s3_rule_scope(rule: dict, namespace_prefix: str) -> str:
    """How much of the namespace an S3 lifecycle rule selects: all | part | none. lakeFS tags no object, so a
    tag filter selects nothing; a size filter only some objects."""
    if "Filter" not in rule:
        return _covers(rule.get("Prefix"), namespace_prefix)  # the legacy top-level Prefix
    selected = rule.get("Filter") or {}
    if "And" in selected:
        selected = selected["And"] or {}
        if selected.get("Tags"):
            return "none"
    if "Tag" in selected or selected.get("Tags"):
        return "none"
    scope = _covers(selected.get("Prefix"), namespace_prefix)
    if scope == "all" and ("ObjectSizeGreaterThan" in selected or "ObjectSizeLessThan" in selected):
        return "part"
    return scope


def s3_fix(prefix: str) -> str:
    rule = {"ID": FIX_ID, "Status": "Enabled", "Filter": {"Prefix": prefix},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
            "Expiration": {"ExpiredObjectDeleteMarker": True},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}}
    return json.dumps({"Rules": [rule]}, indent=2)


def _s3_notes(rules: list[dict], prefix: str) -> tuple[str, ...]:
    covering = [r for r in rules if r.get("Status") == "Enabled" and s3_rule_scope(r, prefix) == "all"]
    notes = []
    markers = [r.get("ID", "?") for r in covering if (r.get("Expiration") or {}).get("ExpiredObjectDeleteMarker")]
    notes.append(f"expired delete markers removed by rule {markers[0]}" if markers else
                 "delete markers left after their versions expire are never removed (they cost no bytes, but slow "
                 "listings): add Expiration.ExpiredObjectDeleteMarker")
    uploads = sorted((r["AbortIncompleteMultipartUpload"].get("DaysAfterInitiation", 0), r.get("ID", "?"))
                      for r in covering if r.get("AbortIncompleteMultipartUpload"))
    notes.append(f"incomplete multipart uploads aborted {uploads[0][0]} days after they start by rule "
                 f"{uploads[0][1]}" if uploads else
                 "incomplete multipart uploads are never aborted (billed until then): add "
                 "AbortIncompleteMultipartUpload")
    return tuple(notes)


def s3_verdict(versioning: str | None, rules: list[dict] | None, prefix: str) -> Verdict:
    """``versioning``: GetBucketVersioning's Status (None or "" when never enabled); ``rules``: the lifecycle
    configuration's Rules ([] when there is none, None when it could not be read); ``prefix``: the namespace's
    prefix in the bucket."""
    prefix = _dir(prefix)
    if not versioning:
        return Verdict("s3", FREED, "versioning is off: deleted objects are freed at once", versioned=False)
    state = "enabled" if versioning == "Enabled" else "suspended (objects written while it was on keep versions)"
    if rules is None:
        return Verdict("s3", UNKNOWN, f"versioning is {state}: each deletion leaves a noncurrent version, and the "
                                      "lifecycle rules could not be read, so whether they are ever removed is "
                                      "unknown", versioned=True, fix=s3_fix(prefix))
    best: tuple[float, str] | None = None
    ignored = []
    for rule in rules:
        name = rule.get("ID") or "(no id)"
        expiring = rule.get("NoncurrentVersionExpiration") or {}
        if not expiring.get("NoncurrentDays"):
            continue
        scope = s3_rule_scope(rule, prefix)
        if rule.get("Status") != "Enabled":
            ignored.append(f"rule {name} is disabled")
        elif scope != "all":
            ignored.append(f"rule {name} selects {'only part' if scope == 'part' else 'none'} of the namespace")
        elif int(expiring.get("NewerNoncurrentVersions") or 0) > 0:
            ignored.append(f"rule {name} keeps the newest {expiring['NewerNoncurrentVersions']} noncurrent "
                           "versions, and a deleted lakeFS object has only one")
        elif best is None or expiring["NoncurrentDays"] < best[0]:
            best = (float(expiring["NoncurrentDays"]), name)
    notes = tuple(ignored) + _s3_notes(rules, prefix)
    if best is None:
        return Verdict("s3", NEVER, f"versioning is {state} and no lifecycle rule expires noncurrent versions of "
                                    f"the whole namespace: deleted objects are never freed; add this rule",
                       versioned=True, fix=s3_fix(prefix), notes=notes)
    days, name = best
    return Verdict("s3", DELAYED, f"versioning is {state}: deleted objects are freed {days:g} days after deletion "
                                  f"by rule {name}", days=days, rule=name, versioned=True, notes=notes)


# -- GCS -----------------------------------------------------------------------------------------------------

def gcs_rule_days(rule: dict, prefix: str) -> tuple[float | None, str]:
    """Days after deletion within which one GCS lifecycle rule deletes a noncurrent generation of the namespace
    (None: it does not), and why not."""
    if (rule.get("action") or {}).get("type") != "Delete":
        return None, "does not delete"
    cond = rule.get("condition") or {}
    if cond.get("isLive") is True:
        return None, "deletes live objects only"
    if cond.get("matchesSuffix") or cond.get("matchesStorageClass"):
        return None, "selects only part of the namespace (suffix or storage class)"
    prefixes = cond.get("matchesPrefix")
    if prefixes and not any(_covers(p, prefix) == "all" for p in prefixes):
        return None, "selects only part of the namespace" if any(_covers(p, prefix) == "part" for p in prefixes) \
            else "selects none of the namespace"
    if int(cond.get("numNewerVersions") or 0) > 0:
        return None, f"needs {cond['numNewerVersions']} newer versions, and a deleted lakeFS object has none"
    for one_off in ("createdBefore", "customTimeBefore", "noncurrentTimeBefore", "daysSinceCustomTime"):
        if one_off in cond:
            return None, f"depends on {one_off}"
    days = [float(cond[k]) for k in ("daysSinceNoncurrentTime", "age") if k in cond]
    if not days:
        return (0.0, "") if cond.get("isLive") is False else (None, "has no condition on age")
    # age counts from creation: a GC deletes old objects, so a noncurrent generation goes at most this late
    return max(days) if len(days) > 1 else days[0], ""


def gcs_fix(prefix: str) -> str:
    rule = {"action": {"type": "Delete"}, "condition": {"isLive": False, "daysSinceNoncurrentTime": 1,
                                                        **({"matchesPrefix": [prefix]} if prefix else {})}}
    return json.dumps({"lifecycle": {"rule": [rule]}}, indent=2)


def gcs_verdict(versioning: bool | None, soft_delete_seconds: float | None, rules: list[dict] | None, *,
                prefix: str) -> Verdict:
    """``versioning``: the bucket's versioning.enabled; ``soft_delete_seconds``: softDeletePolicy's
    retentionDurationSeconds (0 or None: off); ``rules``: lifecycle.rule ([] when none, None when unreadable)."""
    prefix = _dir(prefix)
    soft = float(soft_delete_seconds or 0) / 86400
    soft_note = f" then kept {soft:g} days by the soft-delete policy" if soft else ""
    if versioning is None:
        return Verdict("gcs", UNKNOWN, "the bucket's versioning could not be read")
    if not versioning:
        if soft:
            return Verdict("gcs", DELAYED, f"versioning is off; the soft-delete policy keeps deleted objects "
                                           f"{soft:g} days: freed {soft:g} days after deletion", days=soft,
                           rule="softDeletePolicy", versioned=False)
        return Verdict("gcs", FREED, "versioning and soft delete are off: deleted objects are freed at once",
                       versioned=False)
    if rules is None:
        return Verdict("gcs", UNKNOWN, "versioning is on: each deletion leaves a noncurrent generation, and the "
                                       "lifecycle rules could not be read", versioned=True, fix=gcs_fix(prefix),
                       purge_keeps_days=soft)
    best: tuple[float, int] | None = None
    ignored = []
    for i, rule in enumerate(rules):
        days, why = gcs_rule_days(rule, prefix)
        if days is None:
            if (rule.get("action") or {}).get("type") == "Delete":
                ignored.append(f"rule {i} {why}")
        elif best is None or days < best[0]:
            best = (days, i)
    if best is None:
        return Verdict("gcs", NEVER, "versioning is on and no lifecycle rule deletes noncurrent generations of "
                                     "the whole namespace: deleted objects are never freed; add this rule",
                       versioned=True, fix=gcs_fix(prefix), notes=tuple(ignored), purge_keeps_days=soft)
    days = best[0] + soft
    return Verdict("gcs", DELAYED, f"versioning is on: deleted objects are freed {days:g} days after deletion "
                                   f"(lifecycle rule {best[1]}: {best[0]:g} days{soft_note})", days=days,
                   rule=f"lifecycle rule {best[1]}", versioned=True, notes=tuple(ignored), purge_keeps_days=soft)


# -- Azure ---------------------------------------------------------------------------------------------------

def azure_fix(container: str, prefix: str) -> str:
    rule = {"name": FIX_ID, "enabled": True, "type": "Lifecycle", "definition": {
        "filters": {"blobTypes": ["blockBlob"], "prefixMatch": [f"{container}/{prefix}"]},
        "actions": {"version": {"delete": {"daysAfterCreationGreaterThan": 1}}}}}
    return json.dumps({"rules": [rule]}, indent=2)


def azure_verdict(soft_delete_days: int | None, versioning: bool | None, *, container: str,
                  prefix: str) -> Verdict:
    """``soft_delete_days``: the account's blob soft delete (delete_retention_policy) days, 0 when off, None when
    unreadable; ``versioning``: the account's blob versioning (None: unknown; the Blob API does not say, only
    Azure Resource Manager does, as it alone exposes the lifecycle management policy)."""
    prefix = _dir(prefix)
    if soft_delete_days is None:
        return Verdict("azure", UNKNOWN, "the account's blob service properties (soft delete) could not be read")
    notes = ("blob versioning and the lifecycle management policy are settings of the storage account in Azure "
             "Resource Manager, not readable with the Blob API: if versioning is on, each deletion also leaves a "
             "previous version, billed until a lifecycle rule deletes versions (see fix)",) \
        if versioning is None else ()
    if versioning:
        return Verdict("azure", NEVER, "blob versioning is on: each deletion leaves a previous version, never "
                                       "freed without a lifecycle rule deleting versions; add this rule",
                       versioned=True, fix=azure_fix(container, prefix), notes=notes)
    if soft_delete_days:
        return Verdict("azure", DELAYED, f"blob soft delete keeps deleted blobs {soft_delete_days} days: freed "
                                         f"{soft_delete_days} days after deletion", days=float(soft_delete_days),
                       rule="blob soft delete", versioned=versioning, fix=azure_fix(container, prefix)
                       if versioning is None else None, notes=notes)
    # versioning is off by default and rare on lakeFS accounts: unknown reads as off, with the note saying so
    return Verdict("azure", FREED,
                   "blob soft delete is off: deleted blobs are freed at once" + (
                       "" if versioning is False else ", unless the account's blob versioning is on"),
                   versioned=versioning, fix=azure_fix(container, prefix) if versioning is None else None,
                   notes=notes)


def local_verdict() -> Verdict:
    return Verdict("local", FREED, "a local disk: deleted objects are freed at once", versioned=False)


def describe(verdict: Verdict) -> str:
    """The verdict in one paragraph, with what to do."""
    lines = [f"{verdict.store}: {verdict.message}"]
    lines += [f"  - {note}" for note in verdict.notes]
    if verdict.fix and verdict.state in (NEVER, UNKNOWN):
        lines.append("  rule to add:\n" + "\n".join(f"    {line}" for line in verdict.fix.splitlines()))
    return "\n".join(lines)
