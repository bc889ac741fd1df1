"""Spheron's paged listings (offers, deployments): followed to the end, or an error that says why not."""

from __future__ import annotations

from typing import Any

from scalectl.providers.errors import ListingIncomplete, Transient
from scalectl.providers.http import ApiClient
from scalectl.providers.paging import Paging, page_rows
from scalectl.providers.spheron.options import SpheronOptions


class Listings:
    """Every page of Spheron's offer and deployment listings, or an error: never a partial view."""

    def __init__(self, api: ApiClient, options: SpheronOptions, *, provider: str, team_id: str):
        self.api = api
        self.options = options
        self.name = provider
        self._team_id = team_id
        self._listing_pages = 1  # pages the last full deployment listing took

    async def offer_groups(self, instance_type: str | None) -> list[dict[str, Any]]:
        """Every page of ``GET /api/gpu-offers`` (documented: ``page``, ``limit``, ``instanceType``;
        answers ``{data, total, page, limit, totalPages}``), for one instance type or the default view."""
        groups: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": self.options.page_size}
        if instance_type:
            params["instanceType"] = instance_type
        for page in range(1, self.options.max_pages + 1):
            body = await self.api.request("GET", "/api/gpu-offers", params={**params, "page": page})
            if not isinstance(body, dict):
                raise Transient("GET /api/gpu-offers answered without a JSON object", provider=self.name)
            rows = [g for g in body.get("data") or [] if isinstance(g, dict)]
            groups.extend(rows)
            if self._is_last(Paging.read(body, asked=self.options.page_size), page, len(rows), "/api/gpu-offers"):
                return groups
        raise ListingIncomplete(
            f"GET /api/gpu-offers has more than {self.options.max_pages} pages; raise options.max_pages",
            provider=self.name,
        )

    async def all_deployments(self) -> list[dict[str, Any]]:
        """Every deployment of the team, page after page, or an error: never a partial view.

        Spheron's reference does not say whether ``GET /api/deployments`` pages; accounts with hundreds
        of deployments get ``{data, page, limit, total, totalPages}`` pages (the envelope of
        ``/api/gpu-offers``). A bare array is one complete answer. A page that is full but names no
        further page, a page past which the server stops answering rows, or a total we did not reach
        all raise: an instance missing from a listing would be adopted by no one, or created twice.
        """
        params: dict[str, Any] = {"limit": self.options.page_size, "teamId": self._team_id}
        # As many pages as the last full listing took: start only when the request budget fits them all.
        self.api.reserve("GET", "/api/deployments", self._listing_pages)
        seen: dict[str, dict[str, Any]] = {}
        first_total: int | None = None
        for page in range(1, self.options.max_pages + 1):
            body = await self.api.request("GET", "/api/deployments", params={**params, "page": page}, retry=False)
            if isinstance(body, list):  # the documented shape: every deployment in one array
                self._listing_pages = 1
                return [d for d in body if isinstance(d, dict)]
            if not isinstance(body, dict):
                raise Transient("GET /api/deployments answered without a JSON list or object", provider=self.name)
            rows = [d for d in page_rows(body) if isinstance(d, dict)]
            for d in rows:
                seen[str(d.get("id") or d.get("_id") or len(seen))] = d
            paging = Paging.read(body, asked=self.options.page_size)
            self._listing_pages = max(self._listing_pages, paging.total_pages or page)  # learnt even if cut short
            first_total = paging.total if page == 1 else first_total
            if paging.total != first_total or (paging.total is not None and len(seen) > paging.total):
                # Deployments came or went while we paged: rows shifted across pages, one may have
                # slid past us. Offset paging cannot tell which, so read the whole list again.
                raise Transient(
                    f"GET /api/deployments: the list changed while paging ({first_total} -> {paging.total})",
                    provider=self.name,
                )
            if self._is_last(paging, page, len(rows), "/api/deployments"):
                if paging.total is not None and len(seen) < paging.total:
                    raise ListingIncomplete(
                        f"GET /api/deployments: {len(seen)} of {paging.total} deployments answered across {page} pages",
                        provider=self.name,
                    )
                return list(seen.values())
        raise ListingIncomplete(
            f"GET /api/deployments has more than {self.options.max_pages} pages of {self.options.page_size}; "
            "raise options.max_pages (or end old deployments) so every deployment is seen",
            provider=self.name,
        )

    def _is_last(self, paging: Paging, page: int, rows: int, path: str) -> bool:
        last = paging.last(page, rows)
        if last is None:
            raise ListingIncomplete(
                f"GET {path}: page {page} came back full ({rows} rows) without saying whether more follow "
                "(no totalPages, total or hasMore): refusing to treat it as the whole list",
                provider=self.name,
            )
        return last
