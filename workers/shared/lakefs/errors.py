"""What can go wrong talking to lakeFS, in our own types.

Kept apart from the client so that the receiver, which only reports lakeFS errors, never loads the SDK.
"""

from __future__ import annotations


class LakeFSError(RuntimeError):
    """A lakeFS call failed; ``status`` is the HTTP status or None when lakeFS was not reached."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class NotFound(LakeFSError):
    pass


class Unauthorized(LakeFSError):
    pass


class Forbidden(LakeFSError):
    pass


class Conflict(LakeFSError):
    pass


class PreconditionFailed(LakeFSError):
    """412: a pre-* hook refused the operation, or an If-Match precondition did not hold."""


class Unavailable(LakeFSError):
    """lakeFS could not be reached or answered 5xx/429: worth retrying later."""


BY_STATUS: dict[int, type[LakeFSError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    429: Unavailable,
}
