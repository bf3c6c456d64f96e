"""A lifecycle policy file as a person writes it: YAML or JSON, read strictly (``workers.shared.document_text``: a key
given twice is refused, every mistake reported with its line and column), then validated as policies."""

from __future__ import annotations

from workers.branch_lifecycle.policies import Policy, PolicyError, PolicyValidationError, parse_policies
from workers.shared.document_text import DocumentTextError, load_document_text


def load_policy_text(text: str, default_branch: str | None) -> list[Policy]:
    """Parse a YAML or JSON policy file and validate it."""
    try:
        document = load_document_text(text, expected="a mapping with a 'policies' list")
    except DocumentTextError as exc:
        raise PolicyValidationError([PolicyError(None, None, str(exc))]) from None
    return parse_policies(document, default_branch)
