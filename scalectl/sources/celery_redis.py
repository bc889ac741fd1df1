"""Celery queue depth on a Redis broker, read the way kombu's Redis transport lays it out.

* Pending: a list per queue and priority level — ``name`` for priority 0 and ``name + sep + str(step)`` for
  the other ``priority_steps`` (kombu defaults: sep ``\\x06\\x16``, steps 0, 3, 6, 9).
* In flight: every delivered, not yet acknowledged message sits in the ``unacked`` hash as
  ``[message, exchange, routing_key]``; the exchange's binding table ``_kombu.binding.<exchange>`` (members
  ``routing_key + sep + pattern + sep + queue``) says which queue it came from.
* ``global_keyprefix`` is prepended to every key, as kombu's prefixed client does.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, RedisError, ResponseError

from scalectl.sources.queue_counts import BrokerError, QueueCounts
from scalectl.sources.redact import mask_url, scrub
from scalectl.sources.spec import TransportOptions

_BINDING = "_kombu.binding."


class RedisQueueReader:
    def __init__(self, url: str, options: TransportOptions, *, timeout: float = 2.0):
        self._url = url
        self._options = options
        self._client: aioredis.Redis = aioredis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=False
        )

    def _key(self, name: str) -> str:
        return self._options.global_keyprefix + name

    def _list_keys(self, queue: str) -> list[str]:
        steps = sorted(set(self._options.priority_steps) | {0})
        return [self._key(queue if step == 0 else f"{queue}{self._options.sep}{step}") for step in steps]

    async def read(self, queues: Sequence[str]) -> QueueCounts:
        try:
            return await self._read(queues)
        except AuthenticationError:
            raise BrokerError(
                f"{mask_url(self._url)}: authentication failed; check the password in the broker URL"
            ) from None
        except (RedisError, OSError) as exc:
            raise BrokerError(f"{mask_url(self._url)}: {scrub(str(exc) or type(exc).__name__, self._url)}") from None

    async def _read(self, queues: Sequence[str]) -> QueueCounts:
        async with self._client.pipeline(transaction=False) as pipe:
            for queue in queues:
                for key in self._list_keys(queue):
                    pipe.llen(key)
                    pipe.exists(key)
                pipe.scard(self._key(_BINDING + queue))
            replies = await pipe.execute()
        pending: dict[str, int] = {}
        missing: list[str] = []
        per_queue = 2 * len(self._list_keys("x")) + 1
        for i, queue in enumerate(queues):
            chunk = replies[i * per_queue : (i + 1) * per_queue]
            pending[queue] = int(sum(chunk[0:-1:2]))
            if not any(chunk[1:-1:2]) and not chunk[-1]:
                missing.append(queue)
        bindings = await self._bindings()
        if missing:
            bound = {q for table in bindings.values() for targets in table.values() for q in targets}
            unknown = [q for q in missing if q not in bound]
            if unknown:
                names = ", ".join(repr(q) for q in unknown)
                raise BrokerError(
                    f"{mask_url(self._url)}: queue {names} not found (no messages and no kombu binding); "
                    "check `queues:` against the Celery app's task_queues, the db number and global_keyprefix"
                )
        in_flight = await self._unacked(queues, bindings)
        return QueueCounts(pending=pending, in_flight=in_flight)

    async def _bindings(self) -> dict[str, dict[str, list[str]]]:
        """exchange -> routing key -> queues, from kombu's binding tables."""
        found: dict[str, dict[str, list[str]]] = {}
        prefix = self._key(_BINDING)
        sep = self._options.sep
        async for raw_key in self._client.scan_iter(match=_glob_escape(prefix) + "*", count=500):
            key = raw_key.decode("utf-8", "replace") if isinstance(raw_key, bytes) else str(raw_key)
            exchange = key[len(prefix) :]
            for member in await self._client.smembers(raw_key):
                text = member.decode("utf-8", "replace") if isinstance(member, bytes) else str(member)
                parts = text.split(sep)
                if len(parts) == 3:
                    found.setdefault(exchange, {}).setdefault(parts[0], []).append(parts[2])
        return found

    async def _unacked(self, queues: Sequence[str], bindings: dict[str, dict[str, list[str]]]) -> dict[str, int | None]:
        wanted = set(queues)
        counts: dict[str, int] = defaultdict(int)
        try:
            async for _tag, payload in self._client.hscan_iter(self._key(self._options.unacked_key), count=1000):
                try:
                    _message, exchange, routing_key = json.loads(payload)
                except (ValueError, TypeError):
                    continue  # not a kombu entry; nothing to attribute
                for queue in _route(str(exchange), str(routing_key), bindings, wanted):
                    counts[queue] += 1
        except ResponseError as exc:  # e.g. WRONGTYPE: the key is not kombu's hash
            raise BrokerError(f"{mask_url(self._url)}: cannot read the unacked hash: {exc}") from None
        return {q: counts.get(q, 0) for q in queues}

    async def aclose(self) -> None:
        await self._client.aclose()


def _route(exchange: str, routing_key: str, bindings: dict[str, dict[str, list[str]]], wanted: set[str]) -> list[str]:
    table = bindings.get(exchange)
    if table:
        queues = table.get(routing_key, [])
        if not queues:  # fanout/topic: kombu stores the pattern, the queue gets everything we cannot match
            queues = [q for rk, targets in table.items() for q in targets if rk in ("", "#", "*")]
        return [q for q in dict.fromkeys(queues) if q in wanted]
    # No binding table (it expired): Celery's defaults name the exchange and routing key after the queue.
    if routing_key in wanted:
        return [routing_key]
    if exchange in wanted:
        return [exchange]
    return []


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
