"""Tables: applied configuration versions (the one stored form of the configuration), instances,
decisions, events, and policy state."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, Index, Integer, MetaData, String, Text, false
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from scalectl.domain.instance import InstanceState

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSON}


class ConfigVersion(Base):
    """Every `scalectl apply` that changed something: the file as written, and its digest."""

    __tablename__ = "config_versions"
    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    applied_at: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(500))
    digest: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)


class PolicyStateRecord(Base):
    """Sustained-window memory per tier, so a restarted daemon resumes its timers instead of resetting."""

    __tablename__ = "policy_state"
    tier: Mapped[str] = mapped_column(String(64), primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON)
    desired: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[float] = mapped_column(Float)


class InstanceRecord(Base):
    """The stored form of a ``scalectl.domain.instance.Instance`` (``scalectl.controller.store.instances`` maps
    one onto the other). The row (with its key) is committed before the provider is called."""

    __tablename__ = "instances"
    key: Mapped[str] = mapped_column(String(63), primary_key=True)
    tier: Mapped[str] = mapped_column(String(64), index=True)
    state: Mapped[str] = mapped_column(String(20), index=True)
    provider: Mapped[str] = mapped_column(String(64))
    provider_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    offer_id: Mapped[str] = mapped_column(String(200))
    gpu: Mapped[str] = mapped_column(String(64))
    gpu_count: Mapped[int] = mapped_column(Integer, default=1)
    region: Mapped[str] = mapped_column(String(64))
    capacity: Mapped[str] = mapped_column(String(16))
    price_per_hour: Mapped[float] = mapped_column(Float)
    address: Mapped[str | None] = mapped_column(String(255), nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    launched_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    ready_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    drain_started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    notice_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # interruption warned
    interrupted_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # seen interrupted (spot back-off)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    resumed_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # started again after a stop
    interrupted: Mapped[bool] = mapped_column(default=False)
    end_state: Mapped[str] = mapped_column(String(20), default=InstanceState.TERMINATED.value)  # what retiring ends in
    surge: Mapped[bool] = mapped_column(default=False)  # extra instance replacing a fallback one
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    cost: Mapped[float] = mapped_column(Float, default=0.0)  # $ accounted when the row closes
    server_hash: Mapped[str | None] = mapped_column(String(16), nullable=True)  # the server it was launched with
    running_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # the provider first reported it running
    stopped_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # stopped since (its disk bills)
    stopped_s: Mapped[float] = mapped_column(Float, default=0.0)  # seconds of earlier stopped stretches
    storage_per_hour: Mapped[float] = mapped_column(Float, default=0.0)  # $/hour a stopped machine bills

    __table_args__ = (Index("ix_instances_provider_id", "provider", "provider_id"),)


class DecisionRecord(Base):
    """What a policy decided on a tick, with the signals it saw and its reason."""

    __tablename__ = "decisions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tier: Mapped[str] = mapped_column(String(64))
    t: Mapped[float] = mapped_column(Float)
    current: Mapped[int] = mapped_column(Integer)
    desired: Mapped[int] = mapped_column(Integer)
    demand: Mapped[float | None] = mapped_column(Float, nullable=True)
    reason: Mapped[str] = mapped_column(Text)
    signals: Mapped[dict[str, Any]] = mapped_column(JSON)

    __table_args__ = (Index("ix_decisions_tier_t", "tier", "t"),)


class EventRecord(Base):
    """Things that happened to instances and tiers (launched, ready, interrupted, retired, errors)."""

    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    t: Mapped[float] = mapped_column(Float, index=True)
    tier: Mapped[str | None] = mapped_column(String(64), nullable=True)
    instance_key: Mapped[str | None] = mapped_column(String(63), nullable=True)
    kind: Mapped[str] = mapped_column(String(40))
    message: Mapped[str] = mapped_column(Text)


class LeaderLeaseRecord(Base):
    """Who may act on the fleet (controller/ha): one row per lease, the epoch grows with every new holder."""

    __tablename__ = "leader_leases"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    epoch: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[float] = mapped_column(Float)
    renewed_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)


class ReplicaRecord(Base):
    """Every running daemon, leader or standby, so `scalectl status` can show them all."""

    __tablename__ = "replicas"
    holder: Mapped[str] = mapped_column(String(200), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[float] = mapped_column(Float)
    seen_at: Mapped[float] = mapped_column(Float)
    http: Mapped[str] = mapped_column(String(255), default="")
    sharded: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())  # tiers split by lease


class WebhookSeen(Base):
    """Webhook requests already accepted, by a digest of their signature (or EventBridge event id): a
    replay inside the freshness window is refused by every daemon sharing this store. Pruned by age."""

    __tablename__ = "webhook_seen"
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    seen_at: Mapped[float] = mapped_column(Float, index=True)


class WorldClockRecord(Base):
    """The daemon's clock as the CLI needs it to read stored times: under ``--speed`` the rows are stamped
    with an accelerated world time, so "now" for ages and ``--since`` is that world's now, not the wall's."""

    __tablename__ = "world_clock"
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    speed: Mapped[float] = mapped_column(Float)
    world_at: Mapped[float] = mapped_column(Float)  # the world's time at ...
    wall_at: Mapped[float] = mapped_column(Float)  # ... this wall-clock time
    running: Mapped[bool] = mapped_column(default=True)  # False once the daemon stopped: the world stands still


class TierRequestsRecord(Base):
    """Requests (tasks, for Celery tiers) a tier received per minute, as its signals counted them: what cost
    per 1,000 requests is divided by. A minute no reading covered has no row (unknown, never zero)."""

    __tablename__ = "tier_requests"
    tier: Mapped[str] = mapped_column(String(64), primary_key=True)
    minute: Mapped[int] = mapped_column(Integer, primary_key=True)  # floor(t / 60)
    requests: Mapped[float] = mapped_column(Float)


class RolloutRecord(Base):
    """A tier's rollout controls: ``generation`` (bumped by `scalectl rollout restart`, so every instance
    counts as drifted) and ``paused``. A tier with no row is at generation 0, not paused."""

    __tablename__ = "rollouts"
    tier: Mapped[str] = mapped_column(String(64), primary_key=True)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    paused: Mapped[bool] = mapped_column(default=False)
    updated_at: Mapped[float] = mapped_column(Float)


class TierControlRecord(Base):
    """A tier's operator controls: an override of its desired count (``override_count``, until
    ``override_until`` in world time, or until cleared when that is null) and a pause. No row: neither."""

    __tablename__ = "tier_controls"
    tier: Mapped[str] = mapped_column(String(64), primary_key=True)
    override_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    override_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    paused: Mapped[bool] = mapped_column(default=False)
    updated_at: Mapped[float] = mapped_column(Float)
