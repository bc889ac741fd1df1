"""Create as the reconciler does: a create whose outcome is unknown is asked again (the adapter looks the
key up first) only once its listing lag has passed, on the fake clock."""

from __future__ import annotations

from scalectl.clocks import Clock, FakeClock
from scalectl.providers.base import LaunchSpec, Provider, ProviderInstance
from scalectl.providers.errors import CreateUnconfirmed


async def create_settled(provider: Provider, spec: LaunchSpec, clock: Clock, rounds: int = 10) -> ProviderInstance:
    """``provider.create(spec)``, asked again after each ``CreateUnconfirmed`` once it settles."""
    assert isinstance(clock, FakeClock), "settling moves the clock: the provider must run on a FakeClock"
    for _ in range(rounds):
        try:
            return await provider.create(spec)
        except CreateUnconfirmed as exc:
            clock.set(max(clock.now(), exc.settles_at))
    raise AssertionError(f"{spec.key}: still unconfirmed after {rounds} rounds")
