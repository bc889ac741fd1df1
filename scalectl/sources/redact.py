"""Keep broker and API passwords out of errors, logs and output."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def mask_url(url: str) -> str:
    """``redis://:secret@host:6379/1`` → ``redis://:***@host:6379/1``; unparseable input → ``<url>``."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
        return urlunsplit((parts.scheme, f"{user}:***@{host}{port}", parts.path, parts.query, parts.fragment))
    except ValueError:
        return "<url>"


def url_password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def scrub(text: str, *urls: str | None) -> str:
    """Remove every password found in ``urls`` from ``text`` (driver errors sometimes echo the URL)."""
    for url in urls:
        if not url:
            continue
        password = url_password(url)
        text = text.replace(url, mask_url(url))
        if password:
            text = text.replace(password, "***")
    return text
