"""What a daemon settles once as it starts: which configuration it runs, the demo's world clock, and where
each tier's signals come from; and the world clock it publishes so `scalectl` reads stored times right."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from sqlalchemy.exc import DBAPIError

from scalectl.clocks import Clock
from scalectl.clocks.scaled import ScaledClock
from scalectl.controller.embedded import bundled_tiers_text
from scalectl.controller.embedded.demo_clock import DEMO_ZONE, world_start
from scalectl.controller.store import world_clock
from scalectl.controller.store.errors import one_line
from scalectl.controller.store.repository import Store
from scalectl.providers.base import Provider
from scalectl.sources.reading import SignalSource
from scalectl.tiers.config import FleetConfig, load_config, parse_config
from scalectl.tiers.errors import ConfigError

log = logging.getLogger("scalectl.daemon")

BUNDLED = "bundled example tiers"


def load_fleet(store: Store, config_file: Path | None, now: float) -> tuple[FleetConfig, bool]:
    """(config, embedded): a given file is applied first; else the stored config; else the bundle."""
    if config_file is not None:
        fleet, text = load_config(config_file)
        version, _ = store.config.apply(fleet, text, str(config_file), now)
        if version is not None:
            log.info("applied %s as config v%d", config_file, version)
    try:
        stored = store.config.fleet_config()
    except ConfigError as exc:  # refuse to start: every tick would fail on it
        raise ConfigError(
            exc.source,
            [
                *exc.problems,
                "the daemon cannot run this stored configuration: fix the tiers file and store it with "
                "`scalectl apply -f FILE` (or start with `scalectl daemon -f FILE`)",
            ],
        ) from None
    if stored is not None:
        return stored, _is_bundled(store)
    text = bundled_tiers_text()
    fleet = parse_config(text, BUNDLED)
    store.config.apply(fleet, text, BUNDLED, now)
    log.info("no configuration found: running the bundled example tiers on the simulated cloud")
    return fleet, True


def demo_clock(store: Store, speed: float, wall: float) -> ScaledClock | None:
    """An accelerated world starts before the business-hours window, or where the last demo stopped;
    None at real speed."""
    if speed == 1.0:
        return None
    published = world_clock.read(store)
    start = world_start(wall, published.now(wall) if published is not None else None)
    log.info(
        "demo clock starts at %s (%s), %g× faster than the wall clock",
        datetime.fromtimestamp(start, DEMO_ZONE).isoformat(timespec="minutes"),
        DEMO_ZONE.key,
        speed,
    )
    return ScaledClock(speed, start=start)


def signal_source(
    clock: Clock,
    providers: dict[str, Provider],
    fleet: Callable[[], FleetConfig],
    *,
    retry_within: float = 10.0,
) -> SignalSource:
    """Configured sources; on the simulated cloud, tiers that name none read the demo's synthetic load.
    ``retry_within``: the longest a failed source rests before it is read again (a tick or two)."""
    from scalectl.providers.simulated import SimulatedCloud
    from scalectl.sources.reader import SignalReader  # type: ignore[import-not-found, unused-ignore]

    reader: SignalSource = SignalReader(clock, backoff_cap=retry_within)
    cloud = next((p for p in providers.values() if isinstance(p, SimulatedCloud)), None)
    if cloud is None:
        return reader
    from scalectl.controller.embedded.load import SyntheticLoad
    from scalectl.controller.embedded.routing import DemoOrRealSignals, reads_synthetic_load

    demo = [t for t in fleet().tiers if reads_synthetic_load(fleet(), t)]
    if demo:
        log.info("tiers %s name no signal source: they read the demo's synthetic load", ", ".join(demo))
    return DemoOrRealSignals(SyntheticLoad(clock, cloud), reader, fleet)


def publish_clock(store: Store, *, speed: float, world: float, wall: float, running: bool = True) -> None:
    """Let `scalectl` read stored times in this daemon's (possibly accelerated) world."""
    try:
        world_clock.publish(store, speed=speed, world=world, wall=wall, running=running)
    except DBAPIError as exc:  # the store is away (restart, failover): the tick says so too; one line here
        log.warning("could not publish the world clock: the store is unreachable (%s)", one_line(exc))
    except Exception:  # ages in the CLI are a convenience: never stop reconciling over them
        log.warning("could not publish the world clock", exc_info=True)


def _is_bundled(store: Store) -> bool:
    from sqlalchemy import select

    from scalectl.controller.store.models import ConfigVersion

    with store.sessions() as s:
        latest = s.scalars(select(ConfigVersion).order_by(ConfigVersion.version.desc()).limit(1)).first()
        return latest is not None and latest.source == BUNDLED
