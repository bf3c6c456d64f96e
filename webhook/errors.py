"""Every error leaves as JSON that says what went wrong; no tracebacks reach the caller."""

from __future__ import annotations

import logging

import redis
from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from workers.shared.lakefs.errors import LakeFSError, Unavailable

log = logging.getLogger(__name__)


def error_response(status: int, message: str, **extra: object):
    response = jsonify({"error": message, **extra})
    response.status_code = status
    return response


def init_app(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException):
        if exc.code == 413:
            limit = app.config["MAX_CONTENT_LENGTH"]
            return error_response(413, f"request body is larger than {limit} bytes")
        return error_response(exc.code or 500, exc.description or exc.name)

    @app.errorhandler(redis.RedisError)
    def _redis(exc: redis.RedisError):
        log.warning("redis unavailable: %s", exc)
        return error_response(503, "the idle-clock store (Redis) is unavailable; retry later")

    @app.errorhandler(LakeFSError)
    def _lakefs(exc: LakeFSError):
        status = 503 if isinstance(exc, Unavailable) else (exc.status or 502)
        return error_response(status, str(exc))

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        log.exception("unhandled error")
        return error_response(500, "internal error; see the service log")
