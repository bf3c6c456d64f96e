"""kombu's Redis transports (plain and Sentinel) as Celery's broker, with one defect of their clean-up removed.

When the worker loses its broker connection, Celery's consumer calls ``Connection.collect()``, which detaches the
transport from its connection (``transport.client = None``), then ``Connection.close()``. If the first pass could
not close the channel (Redis still gone while it read the pending BRPOP), the second one re-queues the tasks the
worker holds unacknowledged (late acks: every running task) through a connection pool built anew from
``transport.client``, and fails with ``AttributeError: 'NoneType' object has no attribute 'hostname'`` (Sentinel:
``... 'alt'``): not a connection error, so Celery calls it an "Unrecoverable error" and the worker exits. That was
4 in 12 plain Redis restarts under load (kombu 5.7; the same family as celery/kombu#582 and #970).

A transport here keeps its connection's parameters (they never change; the socket is what was lost), so that
clean-up does what kombu means it to: the re-queue succeeds on a Redis that is back, or fails with a connection
error that the close ignores, and the consumer reconnects.
"""

from __future__ import annotations

from kombu.transport import redis as kombu_redis


class _KeepsItsConnection:
    _kept = None

    @property
    def client(self):  # noqa: ANN201 - kombu's Connection
        return self._kept

    @client.setter
    def client(self, value) -> None:  # noqa: ANN001
        if value is not None:  # Connection.collect()'s detaching (None) is what the clean-up then trips on
            self._kept = value


class Transport(_KeepsItsConnection, kombu_redis.Transport):
    pass


class SentinelTransport(_KeepsItsConnection, kombu_redis.SentinelTransport):
    pass


_OURS = {"redis": f"{__name__}:Transport", "rediss": f"{__name__}:Transport",
         "sentinel": f"{__name__}:SentinelTransport"}


def use_ours() -> None:
    """Make the Redis and Sentinel URL schemes name these transports, for every kombu connection of the process.
    Celery's ``broker_transport`` would not last: kombu picks the transport from the URL's scheme again whenever
    it switches to another address of a ``sentinel://a;sentinel://b`` URL (``Connection.switch``, after a lost
    connection), and the worker would be back on kombu's own class. Idempotent."""
    from kombu import transport  # noqa: PLC0415

    transport.TRANSPORT_ALIASES.update(_OURS)
    for scheme in _OURS:
        transport._transport_cache.pop(scheme, None)  # noqa: SLF001 - resolved before: resolve again
