"""Object lifecycle rules over HTTP, at the lakeFS Enterprise path (``.../settings/object_lifecycle``), with the
caller's own lakeFS credentials (``webhook.policy_views``: authentication, ETag and error behaviour shared with the
other policy documents). A PUT of a rule that would expire every object on its branches (paths ``["**"]``) that is
not stored so already needs ``?yes=true``, as ``rules set`` needs ``--yes``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Blueprint

from webhook.errors import error_response
from webhook.policy_views import Invalid, flag, policy_routes
from workers.object_lifecycle.rules import RulesValidationError, needing_confirmation, parse_rules
from workers.object_lifecycle.store import RULES, ObjectLifecycleRecords, StoredRulesInvalid

if TYPE_CHECKING:
    from workers.shared.lakefs.client import LakeFS

bp = Blueprint("object_lifecycle", __name__, url_prefix="/api/v1/repositories/<repository>/settings/object_lifecycle")


def _parse(lakefs: LakeFS, repository: str, document: Any):
    rules = parse_rules(document)
    if not flag("yes"):
        try:
            stored = RULES.get(lakefs, repository).policies
        except StoredRulesInvalid:
            stored = []  # a PUT without If-Match replaces what cannot be read
        sweeping = needing_confirmation(rules, stored)
        if sweeping:
            ids = ", ".join(repr(r.id) for r in sweeping)
            return error_response(400, f"rules {ids} would expire every object older than their max_age on the "
                                       "branches they select (paths [\"**\"] with no exclusion); send ?yes=true to "
                                       "confirm", details=[{"id": r.id, "field": "paths"} for r in sweeping])
    return rules


policy_routes(bp, RULES, locks=ObjectLifecycleRecords.of, parse=_parse, path="", shape='{"rules": [...]}',
              invalid=Invalid(RulesValidationError, "invalid object lifecycle rules",
                              lambda exc: [e.document() for e in exc.errors]))
