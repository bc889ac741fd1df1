"""Celery queue depth on RabbitMQ.

With the management API (``management_url``): ``GET /api/queues/{vhost}/{name}`` gives ``messages_ready``
(pending) and ``messages_unacknowledged`` (in flight). RabbitMQ refreshes these statistics every few seconds
(``collect_statistics_interval``, 5 s by default), so they trail the broker by that much.

AMQP only: a passive ``queue.declare`` answers the ready count; RabbitMQ does not say how many messages are
delivered but unacknowledged over AMQP, so in-flight is unknown (None).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from urllib.parse import quote, unquote, urlsplit

import httpx

from scalectl.sources.queue_counts import BrokerError, QueueCounts
from scalectl.sources.redact import mask_url, scrub


def amqp_vhost(url: str) -> str:
    """kombu's rule: the path after the first ``/`` is the vhost; empty means ``/``."""
    path = urlsplit(url).path
    vhost = unquote(path[1:]) if path.startswith("/") else unquote(path)
    return vhost or "/"


class RabbitManagementReader:
    def __init__(self, broker_url: str, management_url: str, client: httpx.AsyncClient, *, timeout: float = 2.0):
        self._broker_url = broker_url
        self._management_url = management_url
        self._client = client
        self._timeout = timeout
        mgmt = urlsplit(management_url)
        broker = urlsplit(broker_url)
        user = mgmt.username if mgmt.username is not None else broker.username or "guest"
        password = mgmt.password if mgmt.password is not None else broker.password or "guest"
        self._auth = httpx.BasicAuth(unquote(user), unquote(password))
        port = f":{mgmt.port}" if mgmt.port else ""
        self._base = f"{mgmt.scheme}://{mgmt.hostname}{port}{mgmt.path.rstrip('/')}"
        self._vhost = amqp_vhost(broker_url)

    async def read(self, queues: Sequence[str]) -> QueueCounts:
        results = await asyncio.gather(*(self._one(q) for q in queues))
        return QueueCounts(
            pending={q: r[0] for q, r in zip(queues, results, strict=True)},
            in_flight={q: r[1] for q, r in zip(queues, results, strict=True)},
        )

    async def _one(self, queue: str) -> tuple[int, int | None]:
        url = f"{self._base}/api/queues/{quote(self._vhost, safe='')}/{quote(queue, safe='')}"
        where = mask_url(self._management_url)
        try:
            response = await self._client.get(url, auth=self._auth, timeout=self._timeout)
        except httpx.HTTPError as exc:
            detail = scrub(str(exc) or type(exc).__name__, self._management_url, self._broker_url)
            raise BrokerError(f"{where}: {detail}") from None
        if response.status_code == 404:
            raise BrokerError(f"{where}: queue {queue!r} does not exist in vhost {self._vhost!r}; check `queues:`")
        if response.status_code in (401, 403):
            raise BrokerError(f"{where}: authentication failed ({response.status_code}); check the credentials")
        if response.status_code != 200:
            raise BrokerError(f"{where}: management API answered HTTP {response.status_code}")
        try:
            body = response.json()
            ready, unacked = body.get("messages_ready"), body.get("messages_unacknowledged")
        except (ValueError, AttributeError):
            raise BrokerError(f"{where}: the management API did not answer JSON") from None
        if not isinstance(ready, int) or not isinstance(unacked, int):
            raise BrokerError(f"{where}: no statistics for queue {queue!r} yet (a new queue gets them within seconds)")
        return ready, unacked


class RabbitAmqpReader:
    """Ready counts by passive declare over AMQP (kombu, in a worker thread with a bounded wait)."""

    def __init__(self, broker_url: str, *, timeout: float = 2.0):
        self._url = broker_url
        self._timeout = timeout

    async def read(self, queues: Sequence[str]) -> QueueCounts:
        try:
            pending = await asyncio.wait_for(asyncio.to_thread(self._declare_all, list(queues)), self._timeout * 2)
        except TimeoutError:
            raise BrokerError(f"{mask_url(self._url)}: no answer within {self._timeout * 2:g}s") from None
        return QueueCounts(
            pending=pending,
            in_flight=dict.fromkeys(queues),
            notes=("in-flight is unknown over AMQP; set management_url for unacknowledged counts",),
        )

    def _declare_all(self, queues: list[str]) -> dict[str, int]:
        from amqp.exceptions import AccessRefused, NotFound
        from kombu import Connection

        where = mask_url(self._url)
        counts: dict[str, int] = {}
        try:
            with Connection(self._url, connect_timeout=self._timeout, transport_options={"max_retries": 0}) as conn:
                conn.ensure_connection(max_retries=1)
                for queue in queues:
                    channel = conn.channel()
                    try:
                        _, messages, _ = channel.queue_declare(queue=queue, passive=True)
                        counts[queue] = int(messages)
                    except NotFound:
                        raise BrokerError(f"{where}: queue {queue!r} does not exist; check `queues:`") from None
                    finally:
                        with contextlib.suppress(Exception):  # the broker closed it after NotFound already
                            channel.close()
        except BrokerError:
            raise
        except AccessRefused:
            raise BrokerError(
                f"{where}: authentication failed; check the user and password in the broker URL"
            ) from None
        except Exception as exc:  # kombu/amqp raise many types (socket errors, OperationalError, …)
            raise BrokerError(f"{where}: {scrub(str(exc) or type(exc).__name__, self._url)}") from None
        return counts

    async def aclose(self) -> None:
        return None
