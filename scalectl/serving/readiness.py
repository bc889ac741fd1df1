"""Is a vLLM server ready for traffic? ``GET /health`` is 200 and ``GET /v1/models`` lists the expected
model with the expected ``max_model_len``. Every verdict carries a reason a person can act on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from scalectl.clocks import Clock


@dataclass(frozen=True, slots=True)
class ReadinessResult:
    ready: bool
    reason: str
    checked_at: float
    models: tuple[str, ...] = ()
    max_model_len: int | None = None


def base_url(address: str) -> str:
    return address.rstrip("/") if "://" in address else f"http://{address}"


class ReadinessProbe:
    """One probe for many instances. The clock only stamps results; waiting is the caller's business."""

    def __init__(self, clock: Clock, *, client: httpx.AsyncClient | None = None, timeout: float = 5.0):
        self._clock = clock
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def check(self, address: str, model: str, max_model_len: int | None = None) -> ReadinessResult:
        url = base_url(address)
        try:
            health = await self._client.get(f"{url}/health")
            if health.status_code != 200:
                return self._result(False, f"GET /health returned {health.status_code}")
            listing = await self._client.get(f"{url}/v1/models")
        except httpx.ConnectError as exc:
            return self._result(False, _connect_reason(exc))
        except httpx.TimeoutException:
            return self._result(False, f"timed out talking to {address}")
        except httpx.HTTPError as exc:
            return self._result(False, f"HTTP error talking to {address}: {exc.__class__.__name__}")
        if listing.status_code != 200:
            return self._result(False, f"GET /v1/models returned {listing.status_code}")
        try:
            entries = _model_entries(listing.json())
        except ValueError:
            return self._result(False, "GET /v1/models did not return a model list")
        ids = tuple(str(e.get("id")) for e in entries)
        match = next((e for e in entries if model in (e.get("id"), e.get("root"))), None)
        if match is None:
            return self._result(False, f"model {model} not listed; got {list(ids)}", ids)
        served_len = match.get("max_model_len")
        served_len = served_len if isinstance(served_len, int) else None
        if max_model_len is not None and served_len != max_model_len:
            return self._result(False, f"max_model_len {served_len} != expected {max_model_len}", ids, served_len)
        return self._result(True, f"serving {model} (max_model_len {served_len})", ids, served_len)

    def _result(
        self, ready: bool, reason: str, models: tuple[str, ...] = (), max_len: int | None = None
    ) -> ReadinessResult:
        return ReadinessResult(ready, reason, self._clock.now(), models, max_len)


def _connect_reason(exc: httpx.ConnectError) -> str:
    seen: BaseException | None = exc
    for _ in range(10):  # walk the cause chain (httpx -> httpcore -> OSError), bounded
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return "connection refused"
        seen = seen.__cause__ or seen.__context__
    return f"cannot connect: {exc}"


def _model_entries(body: Any) -> list[dict[str, Any]]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError("no data list")
    return [e for e in data if isinstance(e, dict)]
