"""Calls out of the reconciler (providers, probes, hooks): bounded in number, answered with a value or
the exception, so one failing call never stops the others."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError

from scalectl.providers.errors import ProviderError

log = logging.getLogger("scalectl.reconciler")
T = TypeVar("T")


class Calls:
    def __init__(self, max_concurrent: int = 32):
        self._limit = asyncio.Semaphore(max_concurrent)

    async def call(self, awaitable: Awaitable[T]) -> T | BaseException:
        """The result, or the exception that ended the call. Provider errors (``scalectl.providers.errors``) are
        expected answers: the caller handles them. So is a store that went away under a hook that reads it
        (one line, as for a tick). Anything else is a bug in an adapter or a hook: it is
        logged with its traceback and then answered like a failure of this one call, because one buggy
        adapter must not stop the daemon from looking after the rest of the fleet."""
        async with self._limit:
            try:
                return await awaitable
            except ProviderError as exc:
                return exc
            except DBAPIError as exc:  # a hook that reads the store, which went away (restart, cut connection)
                log.warning("a call out of the reconciler failed: the store is unreachable (%s)", one_line(exc))
                return exc
            except Exception as exc:
                log.exception("unexpected error in a call out of the reconciler: %s", one_line(exc))
                return exc

    async def gather(self, awaitables: Iterable[Awaitable[T]]) -> list[T | BaseException]:
        calls = [self.call(a) for a in awaitables]
        if not calls:  # most ticks ask nothing of most phases: no tasks to schedule
            return []
        if len(calls) == 1:  # one call needs no task of its own either
            return [await calls[0]]
        return list(await asyncio.gather(*calls))


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]
