"""Daemons as processes on one PostgreSQL database splitting the tiers between them (SCALECTL_SHARD_TIERS),
sharing one cloud (a local Spheron API server).

Every tier is acted on by exactly one daemon (its lease); when a daemon is killed or paused past its
lease, the others take its tiers within 15 s; when one joins, it takes its share. Throughout: no key is
created twice, nothing is deleted beyond what scale-in asked for, and a paused daemon gives its tiers up
before acting again. A daemon that does not shard, on the same database, makes everyone stand still.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from scalectl.controller.ha.shards import assignment, tier_lease
from tests.e2e.helpers import daemon_log, scalectl
from tests.e2e.test_high_availability import LEASE_TTL, TAKEOVER_WAIT_S, Fleet, assert_invariants, wait_for
from tests.fakes.spheron_server import SSH_KEY_ID, TEAM_ID, FakeSpheron

pytestmark = pytest.mark.e2e
TIERS = [f"t{i}" for i in range(8)]

__all__ = ["cloud", "pg_url"]  # fixtures shared with the HA tests
from tests.e2e.test_high_availability import cloud, pg_url  # noqa: E402


def tiers_yaml(url: str, floor: int, tiers: list[str]) -> str:
    blocks = "".join(
        f"""
  {name}:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [spheron]
    min: {floor}
    max: {floor}
    drain_timeout: 0s
    policy: {{kind: min-floor, floor: {floor}}}"""
        for name in tiers
    )
    return f"""
tiers:{blocks}
providers:
  spheron:
    type: spheron
    base_url: {url}
    # Each daemon holds its own budget of Spheron's 10 creates / 15 min; one daemon may come to hold
    # most of the tiers and launch for all of them (docs/operations.md, sharding and request budgets).
    options: {{ssh_key_id: {SSH_KEY_ID}, team_id: {TEAM_ID}, creates_per_15min: 40}}
"""


class ShardedFleet(Fleet):
    sharded = "true"
    tiers = TIERS

    def env(self) -> dict[str, str]:
        return {**super().env(), "SCALECTL_SHARD_TIERS": self.sharded}

    def apply(self, floor: int) -> None:
        config = self.tmp / f"tiers-{floor}.yaml"
        config.write_text(tiers_yaml(self.url, floor, self.tiers))
        result = scalectl(self.tmp / "cli", "apply", "-f", str(config), **self.env())
        assert result.returncode == 0, result.stderr

    def holders(self) -> dict[str, int]:
        """Tier -> pid of the daemon holding its lease (current leases only)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT name, pid FROM leader_leases WHERE name LIKE 'tier:%' "
                    "AND expires_at > extract(epoch FROM clock_timestamp())"
                )
            ).all()
        return {r.name.removeprefix("tier:"): int(r.pid) for r in rows}

    def placed_by_hash(self) -> bool:
        """Every tier held by the live replica rendezvous hashing gives it to (all daemons registered)."""
        with self.engine.connect() as conn:
            now = "extract(epoch FROM clock_timestamp())"
            replicas = conn.execute(text(f"SELECT holder, pid FROM replicas WHERE seen_at > {now} - {LEASE_TTL}")).all()
            leases = conn.execute(
                text(f"SELECT name, holder FROM leader_leases WHERE name LIKE 'tier:%' AND expires_at > {now}")
            ).all()
        if {r.pid for r in replicas} != self.alive():
            return False
        want = assignment([tier_lease(t) for t in self.tiers], [r.holder for r in replicas])
        return {r.name: r.holder for r in leases} == want

    def alive(self) -> set[int]:
        return {p.pid for p in self.procs.values() if p.poll() is None}

    def all_held_by(self, pids: set[int]) -> bool:
        held = self.holders()
        return set(held) == set(self.tiers) and set(held.values()) <= pids


@pytest.fixture
def fleet(tmp_path: Path, pg_url: str, cloud: tuple[FakeSpheron, str]) -> Iterator[ShardedFleet]:
    fake, url = cloud
    f = ShardedFleet(tmp_path, pg_url, fake, url)
    try:
        yield f
    finally:
        f.stop_all()


def victim_holding_tiers(fleet: ShardedFleet) -> str:
    """A daemon that holds at least one tier (with 8 tiers and 3 daemons, one may hold none)."""
    counts: dict[int, int] = {}
    for pid in fleet.holders().values():
        counts[pid] = counts.get(pid, 0) + 1
    pid = max(counts, key=lambda p: counts[p])
    return next(n for n, p in fleet.procs.items() if p.pid == pid)


def test_three_daemons_split_the_tiers_and_take_over_a_killed_or_paused_one(fleet: ShardedFleet) -> None:
    fleet.apply(1)
    for name in ("a", "b", "c"):
        fleet.start(name)
    wait_for(
        "every tier held and one instance each",
        lambda: fleet.all_held_by(fleet.alive()) and len(fleet.live()) == len(TIERS),
        seconds=90,
        logs=fleet,
    )
    wait_for("a second daemon holds tiers", lambda: len(set(fleet.holders().values())) >= 2, seconds=30, logs=fleet)
    time.sleep(3)  # several ticks of every daemon: nobody fights over a tier
    assert len(fleet.live()) == len(TIERS)
    assert_invariants(fleet)
    status = scalectl(fleet.tmp / "cli", "status", **fleet.env())
    assert status.returncode == 0 and "shard" in status.stdout, status.stdout

    killed = victim_holding_tiers(fleet)
    fleet.procs[killed].send_signal(signal.SIGKILL)
    fleet.procs[killed].wait(timeout=10)
    wait_for(
        "the others hold every tier", lambda: fleet.all_held_by(fleet.alive()), seconds=TAKEOVER_WAIT_S, logs=fleet
    )
    fleet.apply(2)  # every tier scales out, whoever holds it now
    wait_for("two instances per tier", lambda: len(fleet.live()) == 2 * len(TIERS), seconds=90, logs=fleet)
    assert_invariants(fleet)

    fleet.start("d")  # a new daemon joins and takes its share (which may be no tier of eight: 10% of the time)
    wait_for("the tiers placed as the four daemons compute it", fleet.placed_by_hash, logs=fleet)
    paused = victim_holding_tiers(fleet)
    fleet.procs[paused].send_signal(signal.SIGSTOP)
    fleet.expected_deletes += len(TIERS)
    fleet.apply(1)  # scale-in while a holder is paused past its lease
    time.sleep(float(LEASE_TTL) * 1.5)
    alive = fleet.alive() - {fleet.procs[paused].pid}
    wait_for("the others hold every tier", lambda: fleet.all_held_by(alive), seconds=TAKEOVER_WAIT_S, logs=fleet)
    fleet.procs[paused].send_signal(signal.SIGCONT)
    wait_for("one instance per tier", lambda: len(fleet.live()) == len(TIERS), seconds=90, logs=fleet)
    time.sleep(3)
    assert len(fleet.live()) == len(TIERS)
    assert_invariants(fleet)
    log = daemon_log(fleet.tmp / paused).read_text()
    assert "gave up tier" in log, log[-3000:]

    with fleet.engine.connect() as conn:  # cut every daemon's database connections at once
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND application_name = '' AND client_addr IS NOT NULL"
            )
        )
        conn.commit()
    wait_for("every tier held again", lambda: fleet.all_held_by(fleet.alive()), seconds=TAKEOVER_WAIT_S, logs=fleet)
    time.sleep(3)
    assert len(fleet.live()) == len(TIERS)
    assert_invariants(fleet)
    for name in fleet.procs:
        text_ = daemon_log(fleet.tmp / name).read_text()
        assert "Traceback" not in text_, text_[-3000:]


def test_a_daemon_that_does_not_shard_makes_every_daemon_stand_still(fleet: ShardedFleet) -> None:
    fleet.tiers = TIERS[:4]  # one daemon creates them all: within Spheron's 10 creates per 15 minutes
    fleet.apply(1)
    fleet.start("a")
    wait_for("one instance per tier", lambda: len(fleet.live()) == 4, seconds=90, logs=fleet)
    fleet.sharded = "false"
    fleet.start("old")  # an unsharded daemon on the same database
    fleet.sharded = "true"
    wait_for("nobody holds a tier", lambda: not fleet.holders(), seconds=30, logs=fleet)
    fleet.apply(2)
    time.sleep(float(LEASE_TTL))
    assert len(fleet.live()) == 4  # nobody acted on the new floor
    assert "does the opposite on the same database" in daemon_log(fleet.tmp / "a").read_text()
    fleet.procs["old"].terminate()
    fleet.procs["old"].wait(timeout=30)
    wait_for("two instances per tier", lambda: len(fleet.live()) == 8, seconds=90, logs=fleet)
    assert_invariants(fleet)
