"""How a store library's failure is read, and the one way a request is made: whether an error says "slow down"
(``is_throttling``: retried at a lower rate) or is a time-out or a lost connection (``is_unreachable``: retried a
few times), the error in one line for a verdict (``error_text``), and ``throttled_call``: one request under the
process's throttle for the store (``throttle.Throttle``), any other failure a StorageError that says what was asked
of which namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from spark_jobs.engine.stores.base import UNREACHABLE_TEXT, StorageError
from spark_jobs.engine.stores.throttle import Throttle, Throttled, ThrottleStats, Unreachable

T = TypeVar("T")

# What the stores answer when they throttle or have a passing fault worth a retry at a lower rate
THROTTLING = ("SlowDown", "ServerBusy", "Throttl", "TooManyRequests", "Too Many Requests", "RequestLimitExceeded",
              "ServiceUnavailable", "Service Unavailable", "InternalError", "OperationTimedOut", "rateLimitExceeded")
THROTTLING_STATUS = {429, 500, 502, 503, 504}
# A request that timed out or lost its connection, as each store library (and the asyncio/aiohttp underneath)
# names it: passing on a busy network, or the store gone
UNREACHABLE = ("Timeout", "TimedOut", "ConnectionError", "ConnectionClosed", "EndpointConnection",
               "ServerDisconnected", "ClientConnector", "ClientOSError", "ConnectionReset", "IncompleteRead",
               # azure-core: no request sent (refused, DNS), or no usable answer (dropped, timed out)
               "ServiceRequestError", "ServiceResponseError")


def error_text(exc: BaseException) -> str:
    """A store library's error in one line, for a verdict's message."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _status(exc: BaseException) -> int | None:
    for attr in ("status_code", "status", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None


def is_throttling(exc: BaseException) -> bool:
    """Whether an error from a store library says "slow down" (or a passing server fault)."""
    seen: BaseException | None = exc
    while seen is not None:
        if _status(seen) in THROTTLING_STATUS or any(word in str(seen) for word in THROTTLING):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_unreachable(exc: BaseException) -> bool:
    """Whether an error from a store library is a time-out or a failed connection (not an answer)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (TimeoutError, ConnectionError)) or any(
                word in type(seen).__name__ for word in UNREACHABLE) or "timed out" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def throttled_call(throttle: Throttle, what: str, fn: Callable[[], T], *, namespace: str,
                   tally: ThrottleStats | None = None) -> T:
    """One request (or one library call) under ``throttle``: a throttling answer is retried at a lower rate and a
    time-out a few times (``Throttle.call``); what is left, and any other error, becomes a StorageError naming
    ``what`` and the ``namespace``, with its reason (storage-unavailable, storage-throttled, storage).
    FileNotFoundError passes through: the caller says what is missing."""
    def attempt():
        try:
            return fn()
        except FileNotFoundError:
            raise
        except Exception as exc:  # noqa: BLE001 - provider errors vary; classified here
            if is_throttling(exc):
                raise Throttled(str(exc)) from exc
            if is_unreachable(exc):
                raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
            raise StorageError(f"{what} on {namespace} failed: {type(exc).__name__}: {exc}") from exc
    try:
        return throttle.call(attempt, what, tally)
    except Unreachable as exc:
        raise StorageError(f"{what} on {namespace}: {UNREACHABLE_TEXT} (a request times out after "
                           f"GC__STORE_TIMEOUT_SECONDS): {exc}", "storage-unavailable") from None
    except Throttled as exc:
        raise StorageError(f"{what} on {namespace}: {exc}", "storage-throttled") from None
