"""Reading store URLs: which store a URL names, and how to show it without its password."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ._errors import StoreURLError

__all__ = [
    "POOL_SIZE",
    "POOL_TIMEOUT",
    "RedisOptions",
    "SQLiteOptions",
    "StoreKind",
    "Synchronous",
    "mask_url",
    "redis_options",
    "sqlite_options",
    "sqlite_path",
    "store_kind",
]

POOL_SIZE = 64
"""Connections a Redis store opens at most (`?pool_size=`); a call beyond them waits for one."""

POOL_TIMEOUT = 10.0
"""Seconds a call waits for a free connection (`?pool_timeout=`) before failing as a
`StoreError`: long enough for any burst, short enough that a stuck Redis is noticed."""

# redis-py reads these from a URL's query too, and they would override ours without a word.
_REDIS_POOL_ARGS = {"max_connections": "pool_size", "timeout": "pool_timeout"}

StoreKind = Literal["redis", "sqlite"]

_KINDS: dict[str, StoreKind] = {
    "redis": "redis",
    "rediss": "redis",
    "redis+cluster": "redis",
    "rediss+cluster": "redis",
    "unix": "redis",
    "sqlite": "sqlite",
}

# A cluster URL names one node to discover the others from; redis-py reads it as a plain URL.
_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def mask_url(url: str) -> str:
    """The URL with any password replaced by `***`, safe for logs and error messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{user}:***@{host}").geturl()


def store_kind(url: str) -> StoreKind:
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    kind = _KINDS.get(scheme)
    if kind is None:
        raise StoreURLError(
            f"unsupported store URL `{mask_url(url)}`: expected redis://, rediss://, unix://, "
            "redis+cluster://, rediss+cluster:// or sqlite:///path"
        )
    return kind


Synchronous = Literal["normal", "full"]
"""SQLite's `PRAGMA synchronous` in WAL mode: `normal` (the default) survives a process crash and
may lose the last commits on power loss; `full` fsyncs every commit, slower, and loses none."""


@dataclass(frozen=True, kw_only=True)
class SQLiteOptions:
    """An sqlite:// URL split into the database path and handback's settings."""

    path: str
    synchronous: Synchronous = "normal"


def sqlite_options(url: str) -> SQLiteOptions:
    """The database path of an SQLAlchemy-style URL, and `?synchronous=normal|full`.

    `sqlite:///app.db` is relative to the working directory, `sqlite:////var/app.db` absolute,
    and `sqlite:///:memory:` (or bare `sqlite://`) an in-memory database. Any other query
    parameter is refused, so that a misspelt one is not ignored without a word.
    """
    if not url.lower().startswith("sqlite://"):
        raise StoreURLError(f"`{mask_url(url)}` is not an sqlite:// URL")
    rest, _, query = url[len("sqlite://") :].partition("?")
    if rest == "" and not query:
        return SQLiteOptions(path=":memory:")
    if not rest.startswith("/") or "#" in rest or "#" in query:
        raise StoreURLError(
            f"`{mask_url(url)}` is not sqlite:///relative/path, sqlite:////absolute/path "
            "or sqlite:///:memory:"
        )
    path = rest[1:]
    if path == "":
        raise StoreURLError(f"`{mask_url(url)}` names no database file")
    pairs = parse_qsl(query, keep_blank_values=True)
    unknown = sorted({key for key, _ in pairs if key != "synchronous"})
    if unknown:
        raise StoreURLError(
            f"`{mask_url(url)}`: unknown parameter {', '.join(f'`{k}`' for k in unknown)}; "
            "an sqlite:// URL takes only `synchronous=normal|full`"
        )
    level = _one(url, pairs, "synchronous")
    if level is None:
        return SQLiteOptions(path=path)
    if level.lower() not in ("normal", "full"):
        raise StoreURLError(
            f"`{mask_url(url)}`: `synchronous` must be `normal` or `full`, not {level!r}"
        )
    return SQLiteOptions(path=path, synchronous="full" if level.lower() == "full" else "normal")


def sqlite_path(url: str) -> str:
    """The database path of an sqlite:// URL (see `sqlite_options`)."""
    return sqlite_options(url).path


@dataclass(frozen=True, kw_only=True)
class RedisOptions:
    """A Redis store URL split into what handback reads and what redis-py does."""

    client_url: str
    """The URL without handback's parameters, for redis-py (which keeps the rest of the query);
    `redis://` or `rediss://` for a cluster."""
    cluster: bool
    """`redis+cluster://` or `rediss+cluster://`: a Redis Cluster, through `RedisCluster`."""
    prefix: str | None
    pool_size: int
    pool_timeout: float


def redis_options(url: str) -> RedisOptions:
    """Read `prefix`, `pool_size` and `pool_timeout` from the query; a bad value is a
    `StoreURLError` naming the parameter. A cluster has no database number: a path other than
    `/` or `/0` is refused."""
    parts = urlsplit(url)
    scheme = _CLUSTER_SCHEMES.get(parts.scheme.lower())
    if scheme is not None:
        if parts.path not in ("", "/", "/0"):
            raise StoreURLError(
                f"`{mask_url(url)}`: a Redis Cluster has no database number, so the URL has no"
                f" path, not {parts.path!r}"
            )
        parts = parts._replace(scheme=scheme, path="")
    query = parse_qsl(parts.query, keep_blank_values=True)
    for name, ours in _REDIS_POOL_ARGS.items():
        if any(key == name for key, _ in query):
            raise StoreURLError(f"`{mask_url(url)}`: set the pool with `{ours}`, not `{name}`")
    prefix = _one(url, query, "prefix")
    if prefix == "":
        raise StoreURLError(f"`{mask_url(url)}` must name one non-empty `prefix`")
    size = _one(url, query, "pool_size")
    timeout = _one(url, query, "pool_timeout")
    read = {"prefix", "pool_size", "pool_timeout"}
    rest = urlencode([(name, value) for name, value in query if name not in read])
    return RedisOptions(
        client_url=urlunsplit(parts._replace(query=rest)),
        cluster=scheme is not None,
        prefix=prefix,
        pool_size=POOL_SIZE if size is None else _pool_size(url, size),
        pool_timeout=POOL_TIMEOUT if timeout is None else _pool_timeout(url, timeout),
    )


def _one(url: str, query: list[tuple[str, str]], name: str) -> str | None:
    values = [value for key, value in query if key == name]
    if len(values) > 1:
        raise StoreURLError(f"`{mask_url(url)}` must name one `{name}`, not {len(values)}")
    return values[0] if values else None


def _pool_size(url: str, value: str) -> int:
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise StoreURLError(
            f"`{mask_url(url)}`: `pool_size` must be a whole number of connections of at least 1,"
            f" not {value!r}"
        )
    return int(value)


def _pool_timeout(url: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise StoreURLError(
            f"`{mask_url(url)}`: `pool_timeout` must be a positive number of seconds, not {value!r}"
        )
    return seconds
