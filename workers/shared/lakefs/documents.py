"""Documents stored on the repository itself, each a JSON string under one key of its lakeFS repository metadata:
the branch lifecycle policies, the object lifecycle rules, the cleaning policies and the savepoint records.

Reading needs read access to the repository and writing needs UpdateRepository, both checked by lakeFS against
whoever's credentials the given client carries. A policy document has an ETag (a hash of its canonical form) and is
written only over the version the writer read (If-Match).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from workers.shared.lakefs.client import LakeFS

P = TypeVar("P")


def etag_of(document: object, *, chars: int = 64, ascii_only: bool = False) -> str:
    """The strong ETag of a canonical JSON document: equal documents, however their files spelled them, share it.
    ``chars`` of the SHA-256 and ``ascii_only`` JSON are for a document whose ETags were first handed out that way
    (the cleaning policies'): an ETag a client holds stays valid across versions."""
    body = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only)
    return '"' + hashlib.sha256(body.encode()).hexdigest()[:chars] + '"'


def read_stored(raw: str, parse: Callable[[object], list[P]], *, errors: type[Exception],
                invalid: Callable[[str], Exception]) -> list[P]:
    """The policies of a stored JSON text; ``invalid(problem)`` is the domain's error for a document that is not
    JSON or that ``parse`` refuses with ``errors`` (written around the janitor)."""
    try:
        return parse(json.loads(raw))
    except json.JSONDecodeError as exc:
        raise invalid(f"not JSON ({exc})") from None
    except errors as exc:
        raise invalid(str(exc).replace("\n", "; ")) from None


class StaleETag(RuntimeError):
    """The document changed since the caller read it."""

    def __init__(self, what: str, given: str, current: str):
        super().__init__(f"the {what} changed since they were read (If-Match {given}, current ETag {current}); "
                         "read them again, or force the write")
        self.current = current


class MetadataDocument:
    """One JSON document under ``key`` of a repository's metadata."""

    def __init__(self, key: str):
        self.key = key

    def read(self, lakefs: LakeFS, repository_id: str) -> str | None:
        """The stored text; None when there is none."""
        metadata = lakefs.call("read repository metadata", lakefs.repositories.get_repository_metadata,
                               repository_id)
        return (metadata or {}).get(self.key) or None

    def write(self, lakefs: LakeFS, repository_id: str, value: object) -> None:
        """Store ``value`` as compact JSON with sorted keys; an empty value removes the key instead."""
        import lakefs_sdk  # noqa: PLC0415 - the receiver loads this module; the SDK only when a document is written

        if value:
            body = json.dumps(value, sort_keys=True, separators=(",", ":"))
            lakefs.call("write repository metadata", lakefs.internal.set_repository_metadata, repository_id,
                        lakefs_sdk.RepositoryMetadataSet(metadata={self.key: body}))
        else:
            lakefs.call("delete repository metadata", lakefs.internal.delete_repository_metadata, repository_id,
                        lakefs_sdk.RepositoryMetadataKeys(keys=[self.key]))


@dataclass(frozen=True)
class Stored(Generic[P]):
    policies: list[P]
    etag: str


class PolicyDocument(MetadataDocument, Generic[P]):
    """A list of policies with an ETag: ``parse(repository_id, text)`` reads the stored text (raising the domain's
    error for a document written around the janitor), ``body`` is the canonical document of a list (what is stored
    and what is shown), ``etag`` its ETag; ``what`` names the policies in messages."""

    def __init__(self, key: str, *, what: str, parse: Callable[[str, str], list[P]],
                 body: Callable[[Sequence[P]], object], etag: Callable[[Sequence[P]], str]):
        super().__init__(key)
        self.what = what
        self.parse = parse
        self.body = body
        self.etag = etag

    def get(self, lakefs: LakeFS, repository_id: str) -> Stored[P]:
        raw = self.read(lakefs, repository_id)
        policies = self.parse(repository_id, raw) if raw else []
        return Stored(policies, self.etag(policies))

    def set(self, lakefs: LakeFS, repository_id: str, policies: Sequence[P], *, if_match: str | None = None,
            lock: AbstractContextManager | None = None) -> Stored[P]:
        """Store the list (an empty one removes the document); with if_match, only if the stored list still has
        that ETag ("*": whatever it has). lakeFS has no conditional write for repository metadata: the check and
        the write run inside ``lock``, held by everyone who edits through lakefs-janitor, or two writers holding
        the same ETag could both win."""
        with lock or nullcontext():
            if if_match is not None:
                current = self.get(lakefs, repository_id).etag
                if if_match.strip() not in (current, "*"):
                    raise StaleETag(self.what, if_match, current)
            self.write(lakefs, repository_id, self.body(policies) if policies else None)
        return Stored(list(policies), self.etag(policies))

    def clear(self, lakefs: LakeFS, repository_id: str, *, if_match: str | None = None,
              lock: AbstractContextManager | None = None) -> Stored[P]:
        """Remove every policy; clearing a repository with none is not an error."""
        return self.set(lakefs, repository_id, [], if_match=if_match, lock=lock)
