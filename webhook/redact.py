"""Keeps the shared secret out of every gunicorn log line (access and error logs).

lakeFS can only send the secret as a header or a query parameter; the query form puts it in the request line,
which gunicorn's default access-log format prints in full.
"""

from __future__ import annotations

import logging
import re

from gunicorn.glogging import Logger

_SECRET_PARAM = re.compile(r"(?i)([?&;]secret=)[^&;\s\"']*")
REDACTED = "[REDACTED]"


def redact(text: str) -> str:
    return _SECRET_PARAM.sub(r"\g<1>" + REDACTED, text)


class _RedactFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


class RedactingLogger(Logger):
    """gunicorn's logger, with every record of its access and error logs passed through ``redact``."""

    def setup(self, cfg) -> None:  # cfg: gunicorn Config
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            log.addFilter(_RedactFilter())
