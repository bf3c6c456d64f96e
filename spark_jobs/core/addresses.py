"""Physical addresses, as entries carry them, mapped to keys relative to the storage namespace (pure).

An entry's address is relative (``data/<slice>/<id>``, the usual case) or full (``s3://bucket/key``,
``local:///abs/path``). A full address can point inside the namespace (an alias of a live ``data/`` object): it is
mapped back to its relative form before subtracting, or a live object would be deleted. A full address outside
the namespace (imported data) is never touched: ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable

BY_PREFIX_DEPRECATED, RELATIVE, FULL = 0, 1, 2


def relative_key(address: str, address_type: int, namespace_uris: Iterable[str]) -> str | None:
    if address_type != FULL and "://" not in address:
        return address.lstrip("/")
    for uri in namespace_uris:
        root = uri.rstrip("/") + "/"
        if address.startswith(root):
            return address[len(root):]
    return None
