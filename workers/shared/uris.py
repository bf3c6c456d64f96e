"""``lakefs://repository[/ref[/path]]`` URIs, as lakectl spells them."""

from __future__ import annotations

import re
from dataclasses import dataclass

# lakeFS's own rules (pkg/graveler/validate.go): repository ids are 3-63 chars of [a-z0-9-];
# branch ids are [\w-]+ and may not start with a dash.
_REPO = re.compile(r"^[a-z0-9][a-z0-9-]{2,62}$")
_BRANCH = re.compile(r"^\w[-\w]*$")


class URIError(ValueError):
    pass


@dataclass(frozen=True)
class LakeFSURI:
    repository_id: str
    ref: str | None = None
    path: str | None = None

    def __str__(self) -> str:
        parts = [self.repository_id] + [p for p in (self.ref, self.path) if p]
        return "lakefs://" + "/".join(parts)


def parse_uri(text: str) -> LakeFSURI:
    if not text.startswith("lakefs://"):
        raise URIError(f"{text!r} is not a lakeFS URI: expected lakefs://<repository>[/<branch>]")
    repo, _, rest = text.removeprefix("lakefs://").partition("/")
    if not _REPO.match(repo):
        raise URIError(f"{text!r}: {repo!r} is not a valid repository id (3-63 characters of a-z, 0-9, -)")
    ref, _, path = rest.partition("/")
    return LakeFSURI(repo, ref or None, path or None)


def parse_repository_uri(text: str) -> LakeFSURI:
    uri = parse_uri(text)
    if uri.ref:
        raise URIError(f"{text!r}: expected a repository URI (lakefs://<repository>), not a ref")
    return uri


def parse_branch_uri(text: str) -> LakeFSURI:
    uri = parse_uri(text)
    if not uri.ref or uri.path:
        raise URIError(f"{text!r}: expected a branch URI (lakefs://<repository>/<branch>)")
    if not _BRANCH.match(uri.ref):
        raise URIError(f"{text!r}: {uri.ref!r} is not a valid branch id")
    return uri
