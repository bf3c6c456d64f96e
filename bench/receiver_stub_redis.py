"""Profiling aid for ``bench/webhook.py --ablation``: the real receiver with its one Redis call stubbed out.

Everything else is the production app from ``webhook.create_app`` (secret check, JSON parsing, pydantic
validation, clock_update, Prometheus multi-process counters, jsonify); only ``ClockStore``'s Lua script call is
replaced by one that answers "recorded" without a round trip. Served with the receiver's own gunicorn command
line, it splits the receiver/bare gap into "the Redis round trip" and "the receiver's Python work".
Never used outside the benchmark.
"""

from __future__ import annotations

from webhook import create_app
from workers.settings import load_settings


class _AlwaysRecorded:
    """Stands in for the registered redis Script: same call signature, no I/O."""

    def __call__(self, keys=None, args=None, client=None) -> int:
        return 1


app = create_app(load_settings())
app.extensions["janitor"]["clock"]._record = _AlwaysRecorded()
