"""Keep broker and API passwords out of errors, logs and output."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
# Keys whose string value is itself a secret (provider options, headers); ``*_env`` / ``*_file`` name where a
# secret lives, which is not one.
_SECRET_KEY = re.compile(r"(^|_)(password|passwd|secret|token|api_key|apikey|access_key|private_key)$", re.I)


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


def mask_secrets(value: Any) -> Any:
    """A copy of a JSON-like document with every secret masked: passwords in URLs (``redis://:***@host``) and
    the values of secret-named keys (``api_key: ***``). The one masking every output form goes through."""
    if isinstance(value, Mapping):
        return {k: MASK if _secret_key(k, v) else mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_secrets(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return mask_url(value)
    return value


def _secret_key(key: Any, value: Any) -> bool:
    return isinstance(key, str) and isinstance(value, str) and bool(value) and bool(_SECRET_KEY.search(key))


def masked_password(url: str) -> bool:
    """Whether a URL carries the mask where its password was (it was copied from `scalectl get` output)."""
    return url_password(url) == MASK
