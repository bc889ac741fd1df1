"""The store: one object per concern over one database, each call one short transaction.

``config`` the applied configuration versions · ``rollouts`` what `scalectl rollout` set · ``controls``
what `scalectl scale|pause` set · ``failures`` what failed (back-off history, interruption notices) · ``policy``
each tier's policy state · ``records`` decisions, events and request counts · ``reads`` the fleet as status
and describe read it · ``unit_of_work()`` the reconciler's transaction over instances, decisions and policy
state."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from scalectl.controller.store.config_store import ConfigStore, TierChange, diff_config
from scalectl.controller.store.control_store import ControlStore
from scalectl.controller.store.db import make_sessionmaker
from scalectl.controller.store.deferred_states import DeferredStates
from scalectl.controller.store.failure_store import FailureStore, NoticeMismatch
from scalectl.controller.store.fleet_reads import FleetReadStore
from scalectl.controller.store.instances import LIVE_STATES
from scalectl.controller.store.live_rows import LiveRowsCache
from scalectl.controller.store.policy_store import PolicyStateStore
from scalectl.controller.store.record_store import RecordStore
from scalectl.controller.store.rollout_store import RolloutStore
from scalectl.controller.store.stored_config import tier_spec_json
from scalectl.controller.store.unit_of_work import UnitOfWork
from scalectl.controller.unit_cost import BilledSpan

__all__ = ["LIVE_STATES", "BilledSpan", "NoticeMismatch", "Store", "TierChange", "diff_config", "tier_spec_json"]


class Store:
    def __init__(self, engine: Engine, *, sole_writer: bool = False):
        """``sole_writer``: nothing but this object writes the database (the simulator's private one), so
        the configuration and rollout controls are read once and kept until it changes them itself, the
        live instance rows until a write to them (``LiveRowsCache``), and the policy states are written
        when read (``DeferredStates``). The
        daemon's store is not: `scalectl apply` and `scalectl rollout` write from other processes."""
        self.engine = engine
        self.sessions: sessionmaker[Session] = make_sessionmaker(engine)
        self.sole_writer = sole_writer
        self.config = ConfigStore(engine, self.sessions, sole_writer=sole_writer)
        self.rollouts = RolloutStore(engine, self.sessions, sole_writer=sole_writer)
        self.controls = ControlStore(engine, self.sessions, sole_writer=sole_writer)  # scale, pause
        self.failures = FailureStore(self.sessions)
        self._deferred = DeferredStates() if sole_writer else None
        self.policy = PolicyStateStore(self.sessions, self._deferred)
        self.records = RecordStore(self.sessions)
        self.reads = FleetReadStore(engine, self.sessions, self.config, self.policy, self.records)
        self._live_rows = LiveRowsCache(engine) if sole_writer else None  # the instance rows between ticks

    def unit_of_work(self) -> UnitOfWork:
        """A session with the repositories on it; nothing is stored until ``commit``."""
        return UnitOfWork(self.sessions, self._live_rows, self._deferred)
