"""The routing contract: given a tier and its ready endpoints, make the load balancer match."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$")


class RoutingError(Exception):
    """The load balancer could not be updated; the previous configuration is still in effect."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    address: str  # "host:port" of a ready vLLM server
    instance_id: str | None = None
    weight: int = 1  # share of the tier's requests, relative to the others (a tier's variants: by capacity)

    def __post_init__(self) -> None:
        match = _HOST_PORT.match(self.address)
        if match is None or not 0 < int(match.group(2)) < 65536:
            raise ValueError(f"endpoint address must be host:port, got {self.address!r}")
        if not 1 <= self.weight <= 1000:
            raise ValueError(f"endpoint weight must be 1-1000, got {self.weight}")


@dataclass(frozen=True, slots=True)
class TierRoute:
    """How one tier is exposed. ``listen`` (e.g. "0.0.0.0:8080") adds a server block; None: upstream only."""

    name: str
    session_affinity: bool = False  # multi-turn tiers: X-Session-Id picks the instance holding its KV cache
    listen: str | None = None
    max_fails: int = 3
    fail_timeout_s: int = 10
    read_timeout_s: int = 600  # long generations stream for minutes
    # Scale-from-zero: with no ready instance, the server block sends requests to these activators
    # ("host:port" of each daemon replica; the leader holds them, standbys answer 503 and nginx tries on).
    activator: tuple[str, ...] = ()
    activator_wait_s: int = 300  # how long the activator may hold a request before it is answered

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?", self.name):
            raise ValueError(f"tier name {self.name!r}: lowercase letters, digits and dashes")
        if self.listen is not None and not re.fullmatch(r"[A-Za-z0-9.:\[\]]+", self.listen):
            raise ValueError(f"listen must look like 0.0.0.0:8080 or 8080, got {self.listen!r}")
        for address in self.activator:
            Endpoint(address)  # the same host:port rule as an instance's address


@dataclass(frozen=True, slots=True)
class RoutingResult:
    tier: str
    changed: bool
    reloaded: bool
    endpoints: int
    path: str | None = None


@runtime_checkable
class RoutingTarget(Protocol):
    async def apply(self, tier: TierRoute, endpoints: Sequence[Endpoint]) -> RoutingResult: ...
