"""Branch lifecycle policies over HTTP, at the lakeFS Enterprise paths, with the caller's own lakeFS credentials
(``webhook.policy_views``: authentication, ETag and error behaviour shared with the cleaning policies)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Blueprint

from webhook.policy_views import Invalid, policy_routes
from workers.branch_lifecycle.policies import PolicyValidationError, parse_policies
from workers.branch_lifecycle.store import POLICIES, LifecycleRecords

if TYPE_CHECKING:
    from workers.shared.lakefs.client import LakeFS

bp = Blueprint("policies", __name__, url_prefix="/api/v1/repositories/<repository>/settings/branch_lifecycle")


def _parse(lakefs: LakeFS, repository: str, document: Any):
    repo = lakefs.call("get repository", lakefs.repositories.get_repository, repository)
    return parse_policies(document, repo.default_branch)


policy_routes(bp, POLICIES, locks=LifecycleRecords.of, parse=_parse, invalid=Invalid(
    PolicyValidationError, "invalid policies",
    lambda exc: [{"index": e.index, "field": e.field, "message": e.message} for e in exc.errors]))
