"""`status` and `describe` show a tier's variant mix; the sqlite3 fast path agrees with the store's."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.controller.settings import Settings
from scalectl.controller.store.models import InstanceRecord
from scalectl.controller.store.open import open_store
from scalectl.controller.views.describe import describe_tier
from scalectl.controller.views.status import fleet_status, mix_text
from scalectl.controller.views.status_reads import open_sqlite_reads
from scalectl.domain.instance import InstanceState
from scalectl.tiers.config import parse_config
from tests.builders import min_floor, tier, tiers_yaml

H100, L40S = "H100-SXM5-80GB", "L40S-48GB"


def _row(key: str, tier_: str, gpu: str, count: int, state: InstanceState = InstanceState.READY) -> InstanceRecord:
    return InstanceRecord(key=key, tier=tier_, state=state.value, provider="simulated", provider_id=f"p-{key}",
                          offer_id="o", gpu=gpu, gpu_count=count, region="r", capacity="on-demand",
                          price_per_hour=1.0, created_at=0.0, updated_at=0.0)  # fmt: skip


def test_status_and_describe_show_the_mix(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'scalectl.db'}"
    store = open_store(Settings(database_url=url))
    mixed = tier(H100, policy=min_floor(1), max=20, variants=[{"gpu": L40S, "gpu_count": 2}])
    text = tiers_yaml({"chat": mixed, "plain": tier(H100, policy=min_floor(1))})
    store.config.apply(parse_config(text, "t"), text, "t", 0.0)
    with store.sessions.begin() as s:
        s.add_all([_row("h1", "chat", H100, 1), _row("h2", "chat", H100, 1, InstanceState.PENDING),
                   _row("l1", "chat", L40S, 2), _row("p1", "plain", H100, 1)])  # fmt: skip
    rows = {r["tier"]: r for r in fleet_status(store.reads)}
    assert rows["chat"]["variants"] == {H100: 2, f"2× {L40S}": 1}
    assert "variants" not in rows["plain"]  # a tier without variants: as before
    assert mix_text(rows["chat"]["variants"]) == f"{H100} 2, 2× {L40S} 1"
    fast = open_sqlite_reads(url)
    assert fast is not None
    assert {r["tier"]: r for r in fleet_status(fast)} == rows  # the sqlite3 path reads the same
    described = describe_tier(store, "chat", 10.0)
    assert sorted((i["gpu"], i["gpu_count"]) for i in described["instances"]) == [(H100, 1), (H100, 1), (L40S, 2)]


def test_the_status_table_adds_a_variants_column_only_when_a_tier_has_variants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALECTL_DATABASE_URL", f"sqlite:///{tmp_path / 'scalectl.db'}")
    store = open_store(Settings(database_url=f"sqlite:///{tmp_path / 'scalectl.db'}"))
    plain = tiers_yaml({"plain": tier(H100, policy=min_floor(1))})
    store.config.apply(parse_config(plain, "t"), plain, "t", 0.0)
    before = CliRunner().invoke(app, ["status"])
    assert "plain" in before.output and "variants" not in before.output
    mixed = tiers_yaml({"chat": tier(H100, policy=min_floor(1), max=20, variants=[{"gpu": L40S, "gpu_count": 2}])})
    store.config.apply(parse_config(mixed, "t"), mixed, "t", 0.0)
    with store.sessions.begin() as s:
        s.add_all([_row("l1", "chat", L40S, 2), _row("l2", "chat", L40S, 2), _row("h1", "chat", H100, 1)])
    monkeypatch.setenv("COLUMNS", "250")  # one line per row
    after = CliRunner().invoke(app, ["status"])
    assert "variants" in after.output and f"2× {L40S} 2, {H100} 1" in after.output


def test_describe_names_the_variants_and_the_mix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'scalectl.db'}"
    monkeypatch.setenv("SCALECTL_DATABASE_URL", url)
    monkeypatch.setenv("COLUMNS", "250")
    store = open_store(Settings(database_url=url))
    mixed = tiers_yaml({"chat": tier(H100, policy=min_floor(1), max=20, variants=[{"gpu": L40S, "gpu_count": 2}])})
    store.config.apply(parse_config(mixed, "t"), mixed, "t", 0.0)
    with store.sessions.begin() as s:
        s.add_all([_row("l1", "chat", L40S, 2), _row("h1", "chat", H100, 1)])
    out = CliRunner().invoke(app, ["describe", "tier", "chat"]).output
    assert f"Tier chat: on-demand {H100} (variants: 2× {L40S})" in out
    assert f"2× {L40S} 1, {H100} 1" in out  # the mix, as status prints it
