"""One Redis client from one URL string, for a plain Redis or a Redis watched by Sentinel.

Here, in ``spark_jobs``, because the Spark job's lease watch gets nothing but a string (``LeaseRef.url``) and must
not import ``workers``; ``workers.redis_connection`` builds every other client and Celery's options on it.

Forms (Celery's, so one value serves the janitor and its broker):

- ``redis://[[user]:password@]host:port/db``, ``rediss://…``, ``unix://…``: redis-py's own;
- ``sentinel://[[user]:password@]h1:26379[/db];sentinel://h2:26379;…``: the Sentinels to ask for the primary,
  the password being the Redis primary's (as in Celery), the database from the first part. The master's name and
  the Sentinels' own password are not part of Celery's URL: they travel in its transport options, and here in
  the query of the last part (``?master_name=…&sentinel_password=…``) when one string must carry everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

import redis
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelManagedConnection

SENTINEL_SCHEME = "sentinel://"
QUERY_KEYS = ("master_name", "sentinel_password")


@dataclass(frozen=True)
class SentinelURL:
    sentinels: tuple[tuple[str, int], ...]
    master_name: str | None
    db: int = 0
    username: str | None = None
    password: str | None = None  # the Redis primary's (and replicas')
    sentinel_password: str | None = None

    def to_url(self) -> str:
        """The whole description as one string (credentials included: never logged)."""
        from urllib.parse import quote  # noqa: PLC0415

        auth = ""
        if self.password or self.username:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password or '', safe='')}@"
        parts = [f"{SENTINEL_SCHEME}{auth if i == 0 else ''}{h}:{p}/{self.db}" for i, (h, p) in
                 enumerate(self.sentinels)]
        query = {k: v for k, v in (("master_name", self.master_name),
                                   ("sentinel_password", self.sentinel_password)) if v}
        return ";".join(parts) + (f"?{urlencode(query)}" if query else "")


def is_sentinel(url: str) -> bool:
    return url.startswith(SENTINEL_SCHEME)


def parse_sentinel_url(url: str) -> SentinelURL:
    """Parse a ``sentinel://`` URL (see the module); ValueError says what is wrong."""
    chunks = [c for c in url.split(";") if c.strip()]
    if not chunks:
        raise ValueError("no Sentinel address")
    query: dict[str, list[str]] = {}
    sentinels, first = [], None
    for i, chunk in enumerate(chunks):
        if not chunk.startswith(SENTINEL_SCHEME):
            raise ValueError(f"every ';'-separated part must be a sentinel:// URL, not {chunk!r}")
        parts = urlsplit(chunk)
        if parts.query:
            if i != len(chunks) - 1:
                raise ValueError("options (?master_name=…) go after the last Sentinel address only")
            query = parse_qs(parts.query, strict_parsing=True)
            if unknown := set(query) - set(QUERY_KEYS):
                raise ValueError(f"unknown option(s) {sorted(unknown)}; known: {', '.join(QUERY_KEYS)}")
        try:
            port = parts.port or 26379
        except ValueError as exc:
            raise ValueError(f"{chunk!r}: {exc}") from None
        if not parts.hostname:
            raise ValueError(f"{chunk!r} names no host")
        sentinels.append((parts.hostname, port))
        first = first or parts
    path = first.path.strip("/")
    if path and not path.isdigit():
        raise ValueError(f"the database must be a number, not {path!r}")
    one = {k: v[-1] for k, v in query.items()}
    return SentinelURL(tuple(sentinels), one.get("master_name"), int(path or 0),
                       unquote(first.username) if first.username else None,
                       unquote(first.password) if first.password else None, one.get("sentinel_password"))


class ReresolvingConnection(SentinelManagedConnection):
    """A connection to the primary that asks the Sentinels where it is whenever it connects again. redis-py 8.1's
    retries reconnect a dropped connection to the address it had (redis/redis-py#3874): after a failover, or
    while the old primary hangs, every retry went back to it."""

    def connect_check_health(self, check_health: bool = True, retry_socket_connect: bool = True) -> None:
        if self._sock or not retry_socket_connect:  # connected, or connect_to() with the address just resolved
            return super().connect_check_health(check_health=check_health, retry_socket_connect=retry_socket_connect)
        return self.connect()  # SentinelManagedConnection.connect: the primary the Sentinels name now


def retry() -> Retry:
    """Retries that bridge a short loss of the connection, a Sentinel failover included (~1–5 s): a command that
    fails to connect is sent again to whatever primary Sentinel names then; what still fails raises, and the
    caller answers it (the receiver a 503, a GC deleter by stopping)."""
    return Retry(ExponentialWithJitterBackoff(base=0.1, cap=1.0), retries=5,
                 supported_errors=(redis.ConnectionError, redis.TimeoutError))


def connect(url: str, *, socket_timeout: float, socket_connect_timeout: float, retries: bool = True) -> redis.Redis:
    """A client of the primary that the URL names or that its Sentinels name, found again after a failover.
    ``retries=False``: one attempt per command, for a caller that retries itself (and re-resolves the primary)."""
    options = {"socket_timeout": socket_timeout, "socket_connect_timeout": socket_connect_timeout,
               "retry": retry() if retries else Retry(NoBackoff(), 0), "health_check_interval": 15}
    if not is_sentinel(url):
        return redis.Redis.from_url(url, **options)
    where = parse_sentinel_url(url)
    if not where.master_name:
        raise ValueError("a sentinel:// Redis needs the primary's master name")
    # No retries of its own per Sentinel (redis-py's default backs off for seconds each): the master's client
    # retries the whole lookup, over every Sentinel.
    sentinel_kwargs = {"socket_timeout": socket_timeout, "socket_connect_timeout": socket_connect_timeout,
                       "retry": Retry(NoBackoff(), 0)}
    if where.sentinel_password:
        sentinel_kwargs["password"] = where.sentinel_password
    sentinel = Sentinel(list(where.sentinels), sentinel_kwargs=sentinel_kwargs)
    return sentinel.master_for(where.master_name, db=where.db, username=where.username, password=where.password,
                               connection_class=ReresolvingConnection, **options)
