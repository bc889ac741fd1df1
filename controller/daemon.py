"""`scalectl daemon`: the reconcile loop on an APScheduler interval, the HTTP surface, systemd
notifications, config reloads, and a clean stop on SIGTERM (the running tick finishes first)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from sqlalchemy.exc import DBAPIError

from scalectl.clocks import Clock, SystemClock
from scalectl.clocks.scaled import ScaledClock
from scalectl.controller.activation import ActivatedSignals, sync_gates
from scalectl.controller.app import Controller, build_providers, open_store, provider_configs
from scalectl.controller.call_deadline import with_deadline
from scalectl.controller.collector import set_daemon_threshold
from scalectl.controller.ha.fencing import fence_commits, fenced
from scalectl.controller.ha.lease import LeadershipLost
from scalectl.controller.ha.replica import Replica
from scalectl.controller.http_app import Health, StatusUnavailable, build_http_app, http_server
from scalectl.controller.metrics import DaemonMetrics
from scalectl.controller.metrics_feed import MetricsFeed
from scalectl.controller.provider_metrics import metered
from scalectl.controller.reconciler.loop import Reconciler, TickReport
from scalectl.controller.serving_hooks import ServingHooks, build_hooks
from scalectl.controller.settings import Settings
from scalectl.controller.startup import demo_clock, load_fleet, publish_clock, signal_source
from scalectl.controller.store.errors import one_line
from scalectl.controller.store.off_loop import StoreCalls, in_memory_sqlite
from scalectl.controller.store.repository import Store
from scalectl.controller.systemd import SystemdNotifier, watchdog_interval
from scalectl.controller.version import scalectl_version
from scalectl.controller.views.controls import with_controls
from scalectl.controller.views.status import status_document
from scalectl.providers.base import Provider
from scalectl.serving.activator import Activator
from scalectl.tiers.config import FleetConfig

log = logging.getLogger("scalectl.daemon")


@dataclass(frozen=True)
class DaemonOptions:
    config_file: Path | None = None
    speed: float = 1.0  # >1: the simulated world runs this many times faster than the wall clock
    max_ticks: int | None = None  # stop by itself after this many ticks (demos, tests)
    run_for: float | None = None  # stop by itself after this much (virtual) time
    serve_http: bool = True
    observe: bool = False  # decide and record only: no provider is called (controller/reconciler/observe.py)


class Daemon:
    def __init__(self, settings: Settings, options: DaemonOptions):
        self.settings = settings
        self.options = options
        self.real_clock = SystemClock()
        self.clock: Clock = ScaledClock(options.speed) if options.speed != 1.0 else self.real_clock
        self.notifier = SystemdNotifier()
        self.metrics = DaemonMetrics(scalectl_version())
        self.metrics_feed = MetricsFeed(self.metrics)
        tick_real = settings.tick_interval / options.speed
        # Store work runs in worker threads: the HTTP surface and the watchdog never wait on the database.
        self.db = StoreCalls(self.real_clock)
        self.health = Health(tick_real, self.real_clock, store_waiting=self.db.waiting)
        # A provider call that takes longer is cut and its tier holds: one slow account costs a tick at most this.
        self.call_deadline = settings.provider_call_deadline or max(tick_real, 5.0)
        # A tick running this long is wedged (every call in it has a deadline or a timeout): stop feeding
        # systemd's watchdog, so that it restarts the daemon.
        self.wedged_after = max(10 * tick_real, 120.0)
        self._tick_started: float | None = None  # real monotonic time the running tick began
        self._wedged_logged = False
        self._status_task: asyncio.Future[dict[str, Any]] | None = None
        self._status_started = 0.0
        self._fleet: FleetConfig | None = None  # the configuration the last tick read (no store read on the loop)
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._ticks = 0
        self._config_version: int | None = None
        self._started = self.clock.now()
        self.controller: Controller | None = None
        self.serving: ServingHooks | None = None
        self.replica: Replica | None = None
        self._announced = False
        self._tick_task: asyncio.Future[None] | None = None
        self.activator: Activator | None = None
        self._wake_task: asyncio.Future[None] | None = None
        self._woken = False  # the activator asked for a tick while one was running: run another right after
        self._tiers_ticked = 0  # tiers the last successful tick acted on
        self._world_set = options.speed == 1.0  # an accelerated world's time is known once its clock is set

    # ---- wiring ----------------------------------------------------------------------------------
    def build(self) -> Controller:
        store = open_store(self.settings)
        self.db.threaded = not in_memory_sqlite(self.settings.resolved_database_url())
        self.replica = replica = Replica(
            store.engine,
            self.settings.resolved_database_url(),
            self.settings.leader_lease_ttl,
            self.real_clock,
            stamp=lambda: self.clock.now(),  # the demo clock is set just below
            http=f"{self.settings.http_host}:{self.settings.http_port}",
            sharded=self.settings.shard_tiers,
        )
        try:
            replica.start()  # one daemon per SQLite file: refuses here, before anything is written
        except Exception:
            store.engine.dispose()
            raise
        try:
            fleet, embedded = self._start_fleet(store)
        except Exception:  # a configuration it cannot run: hand the lease back and stop, nothing left behind
            replica.stop()
            store.engine.dispose()
            raise
        self._fleet = fleet
        built = build_providers(provider_configs(fleet, self.settings), self.clock)
        # The reconciler acts only inside a valid term: its commits are fenced, its provider calls checked.
        acting_store = Store(store.engine)
        fence_commits(acting_store.sessions, replica.elector)

        def current_fleet() -> FleetConfig:  # providers added by `scalectl apply` while running count too
            return self._fleet or fleet

        retry_within = 2 * self.settings.tick_interval  # a source back from an outage is read again this soon
        signals = signal_source(self.clock, built, current_fleet, retry_within=retry_within)
        providers = metered(built, self.metrics)
        if self.settings.routing != "none":  # scale-from-zero: requests to an empty tier wait here for it
            self.activator = Activator(acting=replica.is_leader, on_demand=self._wake, observe=self._activation_done)
            sync_gates(self.activator, self.settings, fleet)
            signals = ActivatedSignals(signals, self.activator, self.clock)

        self.serving = build_hooks(self.settings, self.clock, current_fleet, self.activator)
        reconciler = Reconciler(
            acting_store,
            self._fenced(providers),
            signals,
            self.clock,
            key_prefix=self.settings.key_prefix,
            max_concurrent_calls=self.settings.max_concurrent_provider_calls,
            offers_ttl=self.settings.offers_ttl,
            offer_unavailable_for=self.settings.offer_unavailable_for,
            store_calls=self.db,
            observe=self.options.observe,
            **self.serving.reconciler_kwargs(),
        )
        self._config_version = store.config.version()
        self._publish_clock(store)
        return Controller(self.settings, self.clock, store, providers, signals, reconciler, {"embedded": embedded})

    def world_now(self) -> float | None:
        """The demo world's time for log lines: None until the demo clock is set (before it, the scaled
        clock still reads the wall time, which would put a second clock in the log)."""
        return self.clock.now() if self._world_set else None

    def _start_fleet(self, store: Store) -> tuple[FleetConfig, bool]:
        clock = demo_clock(store, self.options.speed, self.real_clock.now())
        if clock is not None:
            self.clock = clock
            self._started = clock.now()
        self._world_set = True
        return load_fleet(store, self.options.config_file, self.clock.now())

    async def _refresh_config(self, controller: Controller) -> None:
        """`scalectl apply` while running: new providers get adapters; tiers are read every tick anyway."""
        store = controller.store
        version, fleet = await self.db.run(lambda: (store.config.version(), store.config.fleet_config()))
        if fleet is not None:
            self._fleet = fleet
        if version == self._config_version:
            return
        self._config_version = version
        if fleet is None:
            return
        if self.activator is not None:
            sync_gates(self.activator, self.settings, fleet)
        configs = provider_configs(fleet, self.settings)
        new = {n: c for n, c in configs.items() if n not in controller.providers}
        if new:
            controller.providers.update(metered(build_providers(new, self.clock), self.metrics))
            controller.reconciler.providers.update(self._fenced({n: controller.providers[n] for n in new}))
        log.info("configuration v%s picked up", version)

    def _fenced(self, providers: dict[str, Provider]) -> dict[str, Provider]:
        assert self.replica is not None
        elector, deadline = self.replica.elector, self.call_deadline
        real, world = self.real_clock, self.clock
        return {name: with_deadline(fenced(p, elector), deadline, real, world) for name, p in providers.items()}

    def _publish_clock(self, store: Store, *, running: bool = True) -> None:
        now, wall = self.clock.now(), self.real_clock.now()
        publish_clock(store, speed=self.options.speed, world=now, wall=wall, running=running)

    # ---- running ---------------------------------------------------------------------------------
    async def _elect(self) -> None:
        """Renew or try to take the lease (every fifth of its TTL, in real time)."""
        replica = self.replica
        if replica is None or self._stop.is_set():
            return
        try:
            await self.db.run(self._elect_step, replica)
        except asyncio.CancelledError:  # shutdown cancels the job; the thread's statement ends by itself
            return
        store_error = replica.store_error
        if store_error is not None:  # readiness says so now, not only after ticks have failed for a while
            self.health.store_failed(store_error)
        else:
            self.health.store_answered()
        owned = replica.owned_tiers()
        if owned is None:  # one leader acts on every tier (as many as its last tick saw; no store read here)
            held = self._tiers_ticked if replica.is_leader() else 0
        else:
            held = len(owned)
        self.metrics.observe_leadership(replica.housekeeper(), replica.epoch, held)
        if not replica.is_leader() and store_error is None:
            self.health.tick_ok()  # a healthy standby is ready: it serves status, metrics and webhooks
            self.notifier.watchdog()
            self.metrics.ticks.labels("standby").inc()  # alive and in touch with the store: nothing to act on
            self._announce("standing by")

    def _elect_step(self, replica: Replica) -> None:
        """In a worker thread: what needs an owner (sharded: every configured tier and every tier that
        still has instances), then the replica's heartbeat and lease step."""
        targets: list[str] | None = []
        if replica.sharded and self.controller is not None:
            store = self.controller.store
            try:
                targets = sorted(set(store.config.active_tiers()) | store.reads.live_tier_names())
            except DBAPIError as exc:  # leases are still renewed; none move until the store answers
                log.warning("could not read the tiers to share out: %s", one_line(exc))
                targets = None
        replica.step(targets)

    def _announce(self, what: str) -> None:
        if not self._announced:
            self._announced = True
            self.notifier.ready(what)

    async def _tick(self) -> None:
        """The scheduler's job. Stopping the scheduler cancels its running jobs; a tick that has begun is
        shielded from that, so it finishes and commits (``run`` waits for it before closing anything)."""
        if self._tick_task is None or self._tick_task.done():
            self._tick_task = asyncio.ensure_future(self._tick_once())
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._tick_task)

    def _activation_done(self, tier: str, outcome: str, held: float | None) -> None:
        self.metrics.observe_activation(tier, outcome, held)
        self._observe_held()

    def _observe_held(self) -> None:
        activator = self.activator
        if activator is not None:
            self.metrics.observe_held({t: activator.held(t) or 0 for t in activator.tiers()})

    def _wake(self, tier: str) -> None:
        """A request is held for ``tier``: tick now (or right after the running tick), not at the next
        interval, so the policy sees it and the tier starts in this tick."""
        if self._stop.is_set():
            return
        self._woken = True
        if self._tick_task is None or self._tick_task.done():
            self._wake_task = asyncio.ensure_future(self._tick())

    async def _tick_once(self) -> None:
        controller = self.controller
        if controller is None or self._stop.is_set():
            return
        if self.replica is not None and not self.replica.is_leader():
            return
        async with self._lock:
            self._woken = False  # this tick reads the activator's count from here on
            self._tick_started = started = self.real_clock.monotonic()
            try:
                await self._refresh_config(controller)
                report = await controller.reconciler.tick(self.replica.begin_tick() if self.replica else None)
            except LeadershipLost as exc:
                log.warning("stopped acting mid-tick, nothing more is committed: %s", exc)
                self.metrics.ticks.labels("deposed").inc()
            except DBAPIError as exc:  # the store went away (restart, failover, cut connection): say so in a line
                log.warning("reconcile tick failed: the store is unreachable (%s)", one_line(exc))
                self.health.tick_failed(f"store unreachable: {one_line(exc)}")
                self.health.store_failed(one_line(exc))
                self.metrics.ticks.labels("error").inc()
            except Exception as exc:
                log.exception("reconcile tick failed")
                self.health.tick_failed(f"{type(exc).__name__}: {exc}")
                self.metrics.ticks.labels("error").inc()
            else:
                self.health.tick_ok()
                self._tiers_ticked = len(report.tiers)
                await self.db.run(self._observe, controller, report, self.real_clock.monotonic() - started)
                self._announce(f"reconciling {len(report.tiers)} tiers")
            finally:
                self._tick_started = None
                if self.replica is not None:
                    self.replica.end_tick()
            self.notifier.watchdog()  # a tick ended, well or not: the loop is alive
            self._ticks += 1
            await self.db.run(self._publish_clock, controller.store)
            if self.options.max_ticks is not None and self._ticks >= self.options.max_ticks:
                self._stop.set()
            if self.options.run_for is not None and self.clock.now() - self._started >= self.options.run_for:
                self._stop.set()
        if self._woken and not self._stop.is_set():  # woken mid-tick: once this task is done, tick again
            asyncio.get_running_loop().call_soon(self._wake, "")

    def _observe(self, controller: Controller, report: TickReport, seconds: float) -> None:
        """Metrics from a finished tick. They read the store too: the store may go away between the tick's
        commit and here, and metrics are never worth failing the loop over."""
        self._observe_held()
        try:
            owned = self.replica.owned_tiers() if self.replica is not None else None
            tiers, providers = (self._fleet or controller.fleet).tiers, list(controller.providers)
            self.metrics_feed.observe(report, controller.store, tiers, providers, seconds, owned=owned)
        except DBAPIError as exc:
            log.warning("metrics not updated after this tick: the store is unreachable (%s)", one_line(exc))
        except Exception:
            log.exception("metrics not updated after this tick")

    async def _prune(self) -> None:
        if self.controller is not None and self.replica is not None and self.replica.housekeeper():
            try:
                removed = await self.db.run(
                    self.controller.store.records.prune, self.clock.now() - self.settings.retention_days * 86400
                )
            except DBAPIError as exc:  # the hourly prune waits for the next hour
                log.warning("pruning old history skipped: the store is unreachable (%s)", one_line(exc))
                return
            if removed:
                log.info("pruned %d old decisions and events", removed)

    async def _status(self) -> dict[str, Any]:
        """/v1/status, read off the loop. One read at a time: while one waits on a store that does not answer,
        later requests get the same one-line 503 instead of piling up threads behind it."""
        limit = max(2 * self.health.tick_interval_real, 5.0)
        task = self._status_task
        if task is None or task.done():
            self._status_task = task = asyncio.ensure_future(self.db.run(self._status_document))
            self._status_started = self.real_clock.monotonic()
        waited = self.real_clock.monotonic() - self._status_started
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(0.0, limit - waited))
        except TimeoutError:
            waited = self.real_clock.monotonic() - self._status_started
            raise StatusUnavailable(f"store not answering: the status read has waited {waited:.0f}s") from None
        except DBAPIError as exc:
            raise StatusUnavailable(f"store unreachable: {one_line(exc)}") from None

    def _status_document(self) -> dict[str, Any]:
        assert self.controller is not None and self.replica is not None
        stale_after = 3 * self.settings.leader_lease_ttl
        store, wall, world = self.controller.store, self.real_clock.now(), self.clock.now()
        document = status_document(store.reads, self.replica.view(), wall, stale_after, world_now=world)
        return with_controls(document, store.controls.controls(), world)  # `scalectl scale`, `scalectl pause`

    async def run(self) -> int:
        self.controller = controller = self.build()
        set_daemon_threshold()  # a large fleet's tick would otherwise spend a third of its CPU collecting
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        interval = self.settings.tick_interval / self.options.speed
        scheduler = AsyncIOScheduler(timezone=UTC)
        first = datetime.fromtimestamp(self.real_clock.now(), tz=UTC)
        scheduler.add_job(
            self._tick,
            "interval",
            seconds=interval,
            max_instances=1,
            coalesce=True,
            next_run_time=first,
            id="reconcile",
            misfire_grace_time=None,
        )
        scheduler.add_job(self._prune, "interval", hours=1, max_instances=1, coalesce=True, id="prune")
        assert self.replica is not None
        scheduler.add_job(
            self._elect,
            "interval",
            seconds=self.replica.interval,
            max_instances=1,
            coalesce=True,
            next_run_time=first,
            id="elect",
        )
        watchdog = watchdog_interval()
        if watchdog:  # keep systemd's watchdog fed while ticks are slower than its timeout
            scheduler.add_job(self._heartbeat, "interval", seconds=watchdog, id="watchdog")
        server = self._http_server()
        server_task = asyncio.create_task(server.serve()) if server is not None else None
        scheduler.start()
        log.info(
            "daemon started: %d tiers, tick every %.3gs%s",
            len(controller.fleet.tiers),
            interval,
            f" (world {self.options.speed:g}× faster)" if self.options.speed != 1.0 else "",
        )
        try:
            await self._stop.wait()
        finally:
            self.health.stopping = True
            self.notifier.stopping()
            scheduler.shutdown(wait=False)  # cancels its running jobs; the tick is shielded from that
            if self._tick_task is not None:
                await asyncio.wait({self._tick_task})  # the tick in progress finishes and commits
            async with self._lock:
                pass
            if server is not None and server_task is not None:
                server.should_exit = True
                await server_task
            await self.db.run(self._publish_clock, controller.store, running=False)
            if self.replica is not None:
                await asyncio.to_thread(self.replica.stop)  # hand the lease over at once
            await controller.aclose()
            if self.serving is not None:
                await self.serving.aclose()
            if self.activator is not None:
                await self.activator.aclose()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        log.info("daemon stopped cleanly after %d ticks", self._ticks)
        return 0

    async def _heartbeat(self) -> None:
        """systemd's watchdog, fed by the loop's own liveness: this job runs (the loop is not blocked) and
        no tick has run past ``wedged_after``. Slow providers (deadlines) and an unreachable store (readiness
        says so; a restart would not bring it back) do not starve it."""
        started = self._tick_started
        running = self.real_clock.monotonic() - started if started is not None else 0.0
        if running > self.wedged_after:
            if not self._wedged_logged:
                self._wedged_logged = True
                log.error("the reconcile tick has run for %.0fs: wedged; systemd's watchdog is no longer fed", running)
            return
        self._wedged_logged = False
        self.notifier.watchdog()

    def _http_server(self) -> uvicorn.Server | None:
        if not self.options.serve_http:
            return None
        app = build_http_app(self.health, self.metrics, self._status, _webhook_handler(self), self.activator)
        return http_server(app, self.settings.http_host, self.settings.http_port)


def _webhook_handler(daemon: Daemon) -> Any:
    from scalectl.controller.webhooks.http import make_handler

    return make_handler(daemon)
