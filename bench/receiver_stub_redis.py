"""Profiling aid for ``bench/webhook.py --ablation``: the real receiver with its one Redis call answered in process.

Everything else is the production app from ``webhook.create_app`` (secret check, JSON parsing, pydantic
validation, what the event changes, Prometheus multi-process counters, jsonify), built like ``webhook.wsgi``;
only the Redis client is another: its EVALSHA (the receiver's one round trip per hook) answers "changed" at once,
and its PING (for /healthz) answers too. Anything else it is asked goes to a port where nothing listens and fails,
so should the receiver start sending other commands the stub's answers stop being 2xx and the bench fails (the
bench also checks that this server sent Redis nothing). Served with the receiver's own gunicorn command line, it
splits the receiver's gap into "the Redis round trip" and "the receiver's Python work". Never used outside the
benchmark.
"""

from __future__ import annotations

import gc

import redis

from webhook import create_app
from workers.shared.settings import load_settings


class _AnsweredInProcess(redis.Redis):
    """A redis-py client whose EVALSHA and PING need no server."""

    def evalsha(self, sha, numkeys, *keys_and_args):  # the signature of redis.Redis.evalsha
        return [1, 1, 1, 1]  # every step of the script: "changed"

    def ping(self, **kwargs) -> bool:
        return True


app = create_app(load_settings(),
                 redis_client=_AnsweredInProcess(host="127.0.0.1", port=9, socket_timeout=2, socket_connect_timeout=2))
gc.collect()  # as webhook.wsgi does
gc.freeze()
