"""How our idempotency key rides on a cloud instance: as its name and as a tag/label where supported."""

from __future__ import annotations

import re

KEY_TAG = "scalectl-key"  # tag / label name carrying the key
TIER_TAG = "scalectl-tier"
_KEY = re.compile(r"^[a-z0-9][a-z0-9-]{2,62}$")


def validate_key(key: str) -> str:
    """Keys are DNS-label-like so every cloud accepts them as a name: lowercase, digits, dashes, ≤ 63."""
    if not _KEY.match(key):
        raise ValueError(f"invalid instance key {key!r}: use lowercase letters, digits and dashes (3-63 chars)")
    return key


def key_from_name(name: str | None, key_prefix: str) -> str | None:
    """The key if ``name`` is one of ours (starts with the prefix), else None."""
    if name and name.startswith(key_prefix) and _KEY.match(name):
        return name
    return None
