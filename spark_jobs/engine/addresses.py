"""Physical addresses as the GC compares them: relative to the storage namespace.

lakeFS entries carry either a relative address (``data/<slice>/<id>``; address_type 1, or 0 for the deprecated
by-prefix form) or a full one (type 2: ``s3://bucket/ns/data/...``, ``local:///abs/path``). A full address that
points inside the namespace is an alias of a relative one and must be mapped back before subtracting, or a live
object would be deleted; a full address outside the namespace is never the GC's business (None).
"""

from __future__ import annotations

RELATIVE_TYPES = (0, 1)
FULL = 2


def _scheme_normal(url: str) -> str:
    return "s3://" + url[len("s3a://"):] if url.startswith("s3a://") else url


def namespace_prefixes(namespace: str, local_root: str | None = None) -> list[str]:
    """The URL prefixes under which a full address lies inside the namespace."""
    ns = _scheme_normal(namespace.rstrip("/")) + "/"
    prefixes = [ns]
    if ns.startswith("local://") and local_root:
        name = ns[len("local://"):]
        prefixes.append(f"local://{local_root.rstrip('/')}/{name}")
    return prefixes


def relative_address(address: str, address_type: int, prefixes: list[str]) -> str | None:
    if address_type in RELATIVE_TYPES:
        return address.lstrip("/")
    full = _scheme_normal(address)
    for prefix in prefixes:
        if full.startswith(prefix):
            return full[len(prefix):].lstrip("/")
    return None  # outside the namespace: imported data, never touched


def local_root_from(namespace: str, physical_address: str) -> str | None:
    """The local blockstore's root, from a full address lakeFS reported for an object of this namespace:
    namespace ``local://name`` and address ``local:///srv/lakefs/block/name/data/x`` give ``/srv/lakefs/block``."""
    if not namespace.startswith("local://") or not physical_address.startswith("local://"):
        return None
    name = namespace[len("local://"):].strip("/")
    path = physical_address[len("local://"):]
    for marker in (f"/{name}/data/", f"/{name}/_lakefs/", f"/{name}/"):
        at = path.rfind(marker)
        if at >= 0:
            return path[:at] or "/"
    return None
