"""Reading store URLs: which store a URL names, and how to show it without its password."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from ._errors import StoreURLError

__all__ = ["StoreKind", "mask_url", "sqlite_path", "store_kind"]

StoreKind = Literal["redis", "sqlite"]

_KINDS: dict[str, StoreKind] = {
    "redis": "redis",
    "rediss": "redis",
    "unix": "redis",
    "sqlite": "sqlite",
}


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
            f"unsupported store URL `{mask_url(url)}`: expected redis://, rediss://, unix:// "
            "or sqlite:///path"
        )
    return kind


def sqlite_path(url: str) -> str:
    """The database path of an SQLAlchemy-style URL.

    `sqlite:///app.db` is relative to the working directory, `sqlite:////var/app.db` absolute,
    and `sqlite:///:memory:` (or bare `sqlite://`) an in-memory database.
    """
    if not url.lower().startswith("sqlite://"):
        raise StoreURLError(f"`{mask_url(url)}` is not an sqlite:// URL")
    rest = url[len("sqlite://") :]
    if rest == "":
        return ":memory:"
    if not rest.startswith("/") or "?" in rest or "#" in rest:
        raise StoreURLError(
            f"`{mask_url(url)}` is not sqlite:///relative/path, sqlite:////absolute/path "
            "or sqlite:///:memory:"
        )
    path = rest[1:]
    if path == "":
        raise StoreURLError(f"`{mask_url(url)}` names no database file")
    return path
