"""What a GC run leaves for the next one, so that a daily run reads and lists only what changed (pure).

Committed garbage is what retained commits reached at the previous run and reach no longer. The mark keeps an
object when a retained commit of its path's scope holds the object's range (``core.mark.kept_addresses``), so
the state names those (range id, scope) units, not their addresses: a unit live before and dead now is the only
way a committed object can stop being kept. Only what no unit names is kept as addresses: the keys kept by
keep_versions alone, those only staged entries reached, and those the previous run planned to delete and did not
(a deletion cap, failed deletions, the sweep's re-check). Uncommitted garbage is new objects: whatever was older
than the previous run's ``horizon`` (its cutoff) was judged then, so only the slices that can hold objects
written since are listed (``core.slices``).

A next run's candidates are then the addresses of the dead units, the carried keys and the recent slices'
objects; they go through the same plan (kept now, staged now, the cutoff) and the same sweep re-check as a full
run's, so an incremental run deletes a subset of what a full run would. Any state is safe to start from, an older
one included (it names more); a state that cannot be trusted as a whole means a full listing (``why_full``).
"""

from __future__ import annotations

import array
import base64
import gzip
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

FORMAT = 2  # 2: the kept index as a base read in blocks and a delta (core.kept_index)
_LITTLE = array.array("i", [1]).tobytes() == (1).to_bytes(4, "little")
Unit = tuple[str, tuple[str, ...]]  # (range id, the ids of the path policies of its scope, sorted)


# A state carries the keys only staged entries keep, for the next run to check one by one. Past this many it carries
# none and says so (``State.staged_over``): the next run lists everything instead (a full listing judges every object
# against what is staged then), so that neither the state nor a driver holds a key per staged object of a lake that
# stages millions. (About 10 MB of keys at most.)
CARRIED_STAGED_MOST = 100_000


class StateError(ValueError):
    """A state that cannot be trusted as a whole (the message says why: torn, another format, …)."""


@dataclass(frozen=True)
class State:
    repository_id: str
    namespace: str
    run_id: str
    horizon: datetime  # objects modified at or after it were not judged by the run (its cutoff)
    listed_at: datetime  # when the run started
    full_listing_at: datetime  # when the last full listing (or inventory) of this chain of runs was
    units: frozenset[Unit] = frozenset()
    versions: frozenset[str] = frozenset()  # keys kept by keep_versions and by no unit
    staged: frozenset[str] = frozenset()  # keys only staged entries kept
    leftover: frozenset[str] = frozenset()  # keys planned for deletion and not deleted
    staged_over: bool = False  # more keys than CARRIED_STAGED_MOST only staged entries kept: ``staged`` holds none
    versions_over: bool = False  # more keys than CARRIED_STAGED_MOST only keep_versions kept: ``versions`` holds none
    # How the run mapped addresses to keys (the namespace's prefixes): another mapping, another set of keys
    key_prefixes: tuple[str, ...] = ()
    # With a kept index (core.kept_index; only without path policies and keep_versions): the SHA-256 of its base's
    # head, the base's slot, how many keys it counts (base and delta), the SHA-256 and slot of the delta since the
    # base, and the retained metaranges' ranges (indices into ``range_ids``), so that the next run reads only new ones
    index_sha256: str | None = None
    index_slot: str = ""
    index_keys: int = 0
    delta_sha256: str | None = None
    delta_slot: str = ""
    # A base in parts (``kept_index.split_parts``), written by the run ``index_run`` in its own folder: the SHA-256
    # of each part's head, in part order (empty: the base is the single file of ``index_slot``)
    index_parts: tuple[str, ...] = ()
    index_run: str = ""
    metaranges: tuple[tuple[str, tuple[int, ...]], ...] = ()
    format: int = field(default=FORMAT)

    @property
    def range_ids(self) -> list[str]:
        """The live ranges, sorted (what ``metaranges`` indexes)."""
        return sorted({r for r, _ in self.units})

    def metarange_ranges(self) -> dict[str, list[str]]:
        ids = self.range_ids
        return {m: [ids[i] for i in indices] for m, indices in self.metaranges}

    def carried(self) -> set[str]:
        """The keys a next run checks one by one, whatever changed."""
        return set(self.versions) | set(self.staged) | set(self.leftover)

    def with_leftover(self, keys: Iterable[str]) -> State:
        return replace(self, leftover=frozenset(keys))


def units_of(live: Iterable[tuple[str, Iterable[str]]]) -> frozenset[Unit]:
    """The state's units from (range id, scope) pairs."""
    return frozenset((range_id, tuple(sorted(scope))) for range_id, scope in live)


def dead_ranges(before: Iterable[Unit], now: Iterable[Unit]) -> list[str]:
    """The ranges of the units live before and not now (sorted, each once): their entries are the committed
    objects that may have become garbage. A range whose unit died in one scope and lives in another is named
    too: its entries of the dead scope are candidates, the others are still kept and drop out in the plan."""
    return sorted({range_id for range_id, _ in set(before) - set(now)})


def encode(state: State) -> bytes:
    body = {
        "format": state.format, "repository_id": state.repository_id, "namespace": state.namespace,
        "run_id": state.run_id, "horizon": state.horizon.isoformat(), "listed_at": state.listed_at.isoformat(),
        "full_listing_at": state.full_listing_at.isoformat(),
        "units": sorted([r, list(s)] for r, s in state.units),
        "versions": sorted(state.versions), "staged": sorted(state.staged), "leftover": sorted(state.leftover),
        "staged_over": state.staged_over, "versions_over": state.versions_over,
        "key_prefixes": list(state.key_prefixes),
        "index_sha256": state.index_sha256, "index_keys": state.index_keys,
        "index_slot": state.index_slot, "delta_sha256": state.delta_sha256, "delta_slot": state.delta_slot,
        "index_parts": list(state.index_parts), "index_run": state.index_run,
        "metaranges": {m: base64.b64encode(_int32s(indices)).decode() for m, indices in state.metaranges},
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()
    return gzip.compress(json.dumps({"sha256": digest, "state": text}).encode(), compresslevel=6, mtime=0)


def decode(data: bytes) -> State:
    try:
        outer = json.loads(gzip.decompress(data))
        text = outer["state"]
        if hashlib.sha256(text.encode()).hexdigest() != outer["sha256"]:
            raise StateError("its checksum does not match its contents")
        body = json.loads(text)
    except StateError:
        raise
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateError(f"it is torn or not a state ({type(exc).__name__}: {exc})") from None
    if body.get("format") != FORMAT:
        raise StateError(f"it has format {body.get('format')!r}, this version reads {FORMAT}")
    try:
        return State(
            repository_id=str(body["repository_id"]), namespace=str(body["namespace"]), run_id=str(body["run_id"]),
            horizon=_time(body["horizon"]), listed_at=_time(body["listed_at"]),
            full_listing_at=_time(body["full_listing_at"]),
            units=frozenset((str(r), tuple(str(p) for p in s)) for r, s in body["units"]),
            versions=_keys(body["versions"]), staged=_keys(body["staged"]), leftover=_keys(body["leftover"]),
            staged_over=_flag(body.get("staged_over", False)),  # absent from older states
            versions_over=_flag(body.get("versions_over", False)),
            key_prefixes=tuple(str(p) for p in body["key_prefixes"]),
            index_sha256=None if body["index_sha256"] is None else str(body["index_sha256"]),
            index_keys=int(body["index_keys"]), index_slot=str(body["index_slot"]),
            delta_sha256=None if body["delta_sha256"] is None else str(body["delta_sha256"]),
            delta_slot=str(body["delta_slot"]),
            index_parts=tuple(str(h) for h in body.get("index_parts", ())),  # absent from older states
            index_run=str(body.get("index_run", "")),
            metaranges=tuple(sorted((str(m), _indices(text, len({r for r, _ in body["units"]})))
                                    for m, text in body["metaranges"].items())))
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"a field is missing or malformed ({type(exc).__name__}: {exc})") from None


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"a flag is {value!r}, not true or false")
    return value


def carried_staged(keys: set[str] | frozenset[str] | None) -> tuple[frozenset[str], bool]:
    """``State.staged`` and ``State.staged_over`` from the keys only staged entries keep (None: more than a state
    carries, not counted further); ``State.versions`` and ``versions_over`` alike from those only keep_versions
    keeps."""
    if keys is None or len(keys) > CARRIED_STAGED_MOST:
        return frozenset(), True
    return frozenset(keys), False


def metarange_indices(metaranges: Mapping[str, Iterable[str]], range_ids: list[str]) -> tuple:
    """``State.metaranges`` from metarange id -> its range ids (each among ``range_ids``, sorted)."""
    position = {r: i for i, r in enumerate(range_ids)}
    return tuple(sorted((m, tuple(position[r] for r in ranges)) for m, ranges in metaranges.items()))


def _int32s(values: Iterable[int]) -> bytes:
    data = array.array("i", values)
    if not _LITTLE:
        data.byteswap()
    return data.tobytes()


def _indices(text: str, units: int) -> tuple[int, ...]:
    data = array.array("i")
    data.frombytes(base64.b64decode(text, validate=True))
    if not _LITTLE:
        data.byteswap()
    if any(i < 0 or i >= units for i in data):
        raise ValueError("a metarange names a range the state does not hold")
    return tuple(data)


def _time(text: str) -> datetime:
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return parsed.astimezone(UTC)


def _keys(values: list) -> frozenset[str]:
    if not all(isinstance(v, str) for v in values):
        raise TypeError("keys must be strings")
    return frozenset(values)


def why_full(state: State | None, problem: str | None, *, repository_id: str, namespace: str, now: datetime,
             every: timedelta, asked: bool, key_prefixes: tuple[str, ...] | None = None) -> str | None:
    """Why this run must list the whole namespace (None: an incremental run may start from ``state``).
    ``problem``: why the stored state could not be read (None when it was read, or there was none)."""
    if asked:
        return "a full listing was asked for (--full)"
    if problem is not None:
        return f"the previous run's state is not trusted: {problem}"
    if state is None:
        return "no previous run's state (a first run, or the state was removed)"
    if state.repository_id != repository_id or state.namespace != namespace:
        return (f"the previous run's state is of lakefs://{state.repository_id} at {state.namespace}, not of this "
                f"repository's namespace {namespace}")
    if key_prefixes is not None and state.key_prefixes != tuple(key_prefixes):
        return (f"the previous run mapped addresses to keys under {list(state.key_prefixes)}, this one under "
                f"{list(key_prefixes)} (the local blockstore's folder changed?)")
    if state.staged_over or state.versions_over:
        which = "staged entries keep" if state.staged_over else "keep_versions keeps"
        return (f"the previous run ({state.run_id}) found more than {CARRIED_STAGED_MOST:,} keys that only {which}: "
                "a state does not carry that many, a full listing judges them")
    if state.horizon > now or state.listed_at > now:
        return (f"the previous run ({state.run_id}) is dated after this one ({state.listed_at.isoformat()}): a "
                "clock went back, or this run is dated in the past")
    if now - state.full_listing_at >= every:
        return (f"the last full listing was {_ago(now - state.full_listing_at)} ago (GC__FULL_LISTING_EVERY: "
                f"{_ago(every)})")
    return None


def _ago(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds >= 86400 and seconds % 3600 == 0:
        days, hours = divmod(seconds // 3600, 24)
        return f"{days}d" + (f"{hours}h" if hours else "")
    if seconds >= 3600:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"
