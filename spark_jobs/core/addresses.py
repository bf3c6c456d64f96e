"""Physical addresses, as entries carry them, mapped to keys relative to the storage namespace (pure).

An entry's address is relative (``data/<slice>/<id>``, the usual case; type 1, or 0 for the deprecated by-prefix
form) or full (type 2: ``s3://bucket/key``, ``local:///abs/path``). A full address can point inside the namespace
(an alias of a live ``data/`` object): it is mapped back to its relative form before subtracting, or a live object
would be deleted. A full address outside the namespace (imported data) is never touched: ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

BY_PREFIX_DEPRECATED, RELATIVE, FULL = 0, 1, 2


def _normal(url: str) -> str:
    # Hadoop's s3a:// names the same objects as s3:// (lakeFS's Spark clients write either).
    return "s3://" + url[len("s3a://"):] if url.startswith("s3a://") else url


def relative_key(address: str, address_type: int, namespace_uris: Iterable[str]) -> str | None:
    if address_type != FULL and "://" not in address:  # the usual case, before any work on the namespace
        return address.lstrip("/")
    return key_mapper(namespace_uris)(address, address_type)


def key_mapper(namespace_uris: Iterable[str]) -> Callable[[str, int], str | None]:
    """relative_key with the namespace's roots worked out once: for the mark's hundreds of thousands of entries."""
    roots = tuple(_normal(uri).rstrip("/") + "/" for uri in namespace_uris)

    def key(address: str, address_type: int) -> str | None:
        if address_type != FULL and "://" not in address:
            return address.lstrip("/")
        full = _normal(address)
        for root in roots:
            if full.startswith(root):
                return full[len(root):].lstrip("/")
        return None

    return key


def namespace_prefixes(namespace: str, local_root: str | None = None) -> tuple[str, ...]:
    """The forms a full address inside ``namespace`` can take: the namespace itself, and for lakeFS's local
    blockstore (``local://name``) the absolute form under the blockstore's folder."""
    forms = [_normal(namespace).rstrip("/")]
    if namespace.startswith("local://") and local_root:
        forms.append(f"local://{local_root.rstrip('/')}/{namespace.removeprefix('local://').strip('/')}")
    return tuple(dict.fromkeys(forms))


def local_root_from(namespace: str, physical_address: str) -> str | None:
    """The local blockstore's folder, from a full address lakeFS gave for something in this namespace: namespace
    ``local://name`` and address ``local:///srv/lakefs/block/name/data/x`` give ``/srv/lakefs/block``."""
    if not namespace.startswith("local://") or not physical_address.startswith("local://"):
        return None
    name = namespace.removeprefix("local://").strip("/")
    path = physical_address.removeprefix("local://")
    for marker in (f"/{name}/data/", f"/{name}/_lakefs/", f"/{name}/"):
        at = path.rfind(marker)
        if at >= 0:
            return path[:at] or "/"
    return None
