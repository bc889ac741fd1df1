"""Per-request costs of a scrape that a profile found: the missing sniffio's import search, and the text
decoding of a /metrics body."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

import httpcore._synchronization as sync
import httpx
import pytest

import scalectl.sources.http_pool  # noqa: F401  (its import is what is tested)
from scalectl.sources.vllm_scraper import _text


class _CountingFinder:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        self.asked.append(name)
        return None


@pytest.mark.skipif(importlib.util.find_spec("sniffio") is not None, reason="sniffio is installed here")
def test_httpcore_asks_for_the_missing_sniffio_without_searching_the_path() -> None:
    finder = _CountingFinder()
    sys.meta_path.insert(0, finder)
    try:
        for _ in range(5):
            assert sync.current_async_library() == "asyncio"
    finally:
        sys.meta_path.remove(finder)
    assert finder.asked == []


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain; version=0.0.4", b"vllm:num_requests_running 3\n"),
        ("text/plain; version=0.0.4; charset=utf-8", b"vllm:num_requests_running 3\n"),
        ("text/plain; charset=latin-1", 'model_name="caf\xe9"\n'.encode("latin-1")),
        ("text/plain", b"bad \xff byte\n"),
        ("", "\ufeffBOM kept as httpx keeps it\n".encode()),
    ],
)
def test_text_is_what_httpx_gives(content_type: str, body: bytes) -> None:
    headers = {"content-type": content_type} if content_type else {}
    assert (
        _text(httpx.Response(200, headers=headers, content=body))
        == httpx.Response(200, headers=headers, content=body).text
    )
