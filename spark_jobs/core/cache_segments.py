"""How the mark cache is stored (pure): each segment's four files packed as one object, the pointer (JSON) that
names the segments with each file's size and SHA-256, and the checks a reader makes before trusting any of it: a
torn, truncated or rewritten cache, or one written for another repository, namespace or format, is a CacheError
(ignored and rebuilt). What the files hold and their encoding: ``spark_jobs.core.mark_cache``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from spark_jobs.core.mark_cache import FILES, FORMAT, MAX_SEGMENTS, SLOTS, CacheError


def described(files: Mapping[str, bytes]) -> dict[str, dict[str, Any]]:
    """A segment as its pointer names it: each file's size and SHA-256."""
    return {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in files.items()}


def pointer(segments: list[Mapping[str, Mapping[str, Any]]], *, slot: str, repository_id: str, namespace: str,
            run_id: str) -> bytes:
    """The pointer to ``segments`` (each ``described``), stored in ``slot`` as seg-0, seg-1, ..."""
    return json.dumps({"format": FORMAT, "repository_id": repository_id, "storage_namespace": namespace,
                       "slot": slot, "run_id": run_id, "segments": list(segments)}, indent=2,
                      sort_keys=True).encode()


def segment_name(slot: str, index: int) -> str:
    return f"slot-{slot}/seg-{index}.parquets"


def packed(files: Mapping[str, bytes]) -> bytes:
    """A segment's four files as one object, in FILES order (one request to read a segment: on an object store
    a request costs more than the bytes of a daily run's segment)."""
    return b"".join(files[name] for name in FILES)


def unpacked(data: bytes, described_files: Mapping[str, Mapping[str, Any]], *, what: str) -> dict[str, bytes]:
    """The files ``packed`` put in ``data``, each checked against its size and SHA-256 in the pointer."""
    sizes = [described_files[name]["size"] for name in FILES]
    if len(data) != sum(sizes) or min(sizes) < 0:
        raise CacheError(f"{what} holds {len(data)} bytes, its pointer names {sum(sizes)}: torn or altered")
    files, at = {}, 0
    for name, size in zip(FILES, sizes, strict=True):
        files[name] = data[at:at + size]
        at += size
        check_file(f"{what}'s {name}", files[name], described_files[name])
    return files


def check_pointer(raw: bytes, *, repository_id: str, namespace: str) -> dict:
    """The pointer, when it is one of this format for this repository and namespace; else a CacheError."""
    try:
        doc = json.loads(raw)
    except ValueError:
        raise CacheError("its pointer is not JSON") from None
    if not isinstance(doc, dict):
        raise CacheError("its pointer is not a JSON object")
    if doc.get("format") != FORMAT:
        raise CacheError(f"format {doc.get('format')!r}, this janitor reads format {FORMAT}")
    if doc.get("repository_id") != repository_id or doc.get("storage_namespace") != namespace:
        raise CacheError(f"written for lakefs://{doc.get('repository_id')} at {doc.get('storage_namespace')}, "
                         f"not this repository")
    segments = doc.get("segments")
    if doc.get("slot") not in SLOTS or not isinstance(segments, list) or not 1 <= len(segments) <= MAX_SEGMENTS or \
            not all(isinstance(files, dict) and sorted(files) == sorted(FILES) and all(
                isinstance(f, dict) and isinstance(f.get("size"), int) and isinstance(f.get("sha256"), str)
                for f in files.values()) for files in segments):
        raise CacheError("its pointer does not name its files")
    return doc


def check_file(name: str, data: bytes, expected: Mapping[str, object]) -> None:
    if len(data) != expected["size"] or hashlib.sha256(data).hexdigest() != expected["sha256"]:
        raise CacheError(f"{name} is not the file its pointer names ({len(data)} bytes, expected "
                         f"{expected['size']}): torn or altered")
