"""gcsfs's filesystem with the GC's client settings: imported only when a namespace is on GCS (it imports gcsfs).

gcsfs sends every JSON API request through ``_request``, which it wraps in its own retry loop (6 attempts, backing
off 1 to 32 s, on 429, 5xx, time-outs and refused connections alike; fixed when the class is defined, so the
``retries`` attribute does not change it). A store gone then took 168 s to surface on fake-gcs-server, and the GC's
throttle never saw a 429. Here each request is sent once, with ``requests_timeout`` as gcsfs applies it, and
``throttle.Throttle`` does the retrying, as it does for S3."""

from __future__ import annotations

import requests
from gcsfs import GCSFileSystem as _GcsfsFileSystem
from gcsfs.retry import HttpError

_ONE_ATTEMPT = _GcsfsFileSystem._request.__wrapped__  # noqa: SLF001 - the request without gcsfs's retry decorator


class GCSFileSystem(_GcsfsFileSystem):
    retries = 1

    async def _request(self, method, path, *args, **kwargs):
        try:
            return await _ONE_ATTEMPT(self, method, path, *args, **kwargs)
        except requests.exceptions.ProxyError:
            # gcsfs turns a 502 into this (without the status): a passing fault, as 503 is
            raise HttpError({"code": 502, "message": "Bad Gateway"}) from None
