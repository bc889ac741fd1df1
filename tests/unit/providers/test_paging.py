"""Reading whether more pages follow, in the spellings paged APIs use."""

from __future__ import annotations

import pytest

from scalectl.providers.paging import Paging, page_rows


@pytest.mark.parametrize(
    ("body", "page", "rows", "last"),
    [
        ({"data": [], "totalPages": 3}, 2, 20, False),
        ({"data": [], "totalPages": 3}, 3, 20, True),
        ({"deployments": [], "pagination": {"hasNextPage": True}}, 9, 20, False),
        ({"items": [], "meta": {"hasMore": False}}, 1, 20, True),
        ({"data": [], "total": 41, "limit": 20}, 2, 20, False),
        ({"data": [], "total": 40, "limit": 20}, 2, 20, True),
        ({"data": []}, 1, 7, True),  # a short page that names nothing: nothing after it
        ({"data": []}, 1, 20, None),  # a full page that names nothing: cannot tell
    ],
)
def test_whether_a_page_is_the_last(body: dict[str, object], page: int, rows: int, last: bool | None) -> None:
    assert Paging.read(body, asked=20).last(page, rows) is last


def test_rows_are_found_under_the_usual_names() -> None:
    assert page_rows({"results": [1, 2]}) == [1, 2] and page_rows({"data": None}) == []
