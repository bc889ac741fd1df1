"""Reading offset-paged JSON answers: where the rows are, and whether more pages follow.

APIs say it differently (``totalPages``, ``total`` with ``limit``, ``hasMore`` / ``hasNextPage``, at the
top level or under ``pagination`` / ``meta``); ``Paging.last`` answers None when a page says nothing,
so the caller can refuse to take a full page for the whole list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def page_rows(body: dict[str, Any]) -> list[Any]:
    for field in ("data", "deployments", "items", "results"):
        rows = body.get(field)
        if isinstance(rows, list):
            return rows
    return []


@dataclass(frozen=True, slots=True)
class Paging:
    """What a paged answer says about the pages left: ``totalPages``, ``total``, ``hasMore`` /
    ``hasNextPage`` (top level or under ``pagination`` / ``meta``), and the page size it used."""

    total_pages: int | None
    total: int | None
    has_more: bool | None
    limit: int

    @classmethod
    def read(cls, body: dict[str, Any], *, asked: int) -> Paging:
        info: dict[str, Any] = dict(body)
        for nested in ("pagination", "meta"):
            if isinstance(body.get(nested), dict):
                info.update(body[nested])
        more = next((info[k] for k in ("hasMore", "hasNextPage", "has_more") if isinstance(info.get(k), bool)), None)
        return cls(
            total_pages=_int(info.get("totalPages", info.get("pages")), default=None),
            total=_int(info.get("total", info.get("totalCount")), default=None),
            has_more=more,
            limit=_int(info.get("limit"), default=None) or asked,
        )

    def last(self, page: int, rows: int) -> bool | None:
        """Whether ``page`` (holding ``rows`` rows) is the last one; None when the answer cannot tell."""
        if self.has_more is not None:
            return not self.has_more
        if self.total_pages is not None:
            return page >= self.total_pages
        if self.total is not None:
            return page * self.limit >= self.total
        if rows < self.limit:
            return True  # a short page with no paging fields: nothing after it
        return None


def _int(value: Any, default: int | None = None) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
