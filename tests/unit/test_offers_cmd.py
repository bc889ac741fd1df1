"""``scalectl offers`` against the local provider servers (real loopback HTTP) and the simulated cloud."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from scalectl.cli.main import app
from scalectl.clocks import FakeClock
from tests.fakes.spheron_server import API_KEY as SPHERON_KEY
from tests.fakes.spheron_server import FakeSpheron, start_fake_spheron
from tests.fakes.vastai_server import VastFake, serve_vast

SPHERON_ENV = "SCALECTL_TEST_OFFERS_SPHERON_KEY"
VAST_ENV = "SCALECTL_TEST_OFFERS_VAST_KEY"
RUNPOD_ENV = "SCALECTL_TEST_OFFERS_RUNPOD_KEY"  # never set: a key checked on the first call
LAMBDA_ENV = "SCALECTL_TEST_OFFERS_LAMBDA_KEY"  # never set: a key checked when the provider is built
H100 = "H100-SXM5-80GB"

runner = CliRunner()


@pytest.fixture(scope="module")
def spheron() -> Iterator[tuple[FakeSpheron, str]]:
    fake, server = start_fake_spheron(FakeClock())
    try:
        yield fake, server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def vast() -> Iterator[tuple[VastFake, str]]:
    with serve_vast() as served:
        yield served


@pytest.fixture
def tiers(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spheron: tuple[FakeSpheron, str],
    vast: tuple[VastFake, str],
) -> Path:
    vast[0].reset()
    vast[0].api_key = VastFake.api_key
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(SPHERON_ENV, SPHERON_KEY)
    monkeypatch.setenv(VAST_ENV, VastFake.api_key)
    monkeypatch.delenv(RUNPOD_ENV, raising=False)
    monkeypatch.delenv(LAMBDA_ENV, raising=False)
    path = tmp_path / "tiers.yaml"
    path.write_text(
        f"""
providers:
  sph: {{type: spheron, base_url: "{spheron[1]}", api_key_env: {SPHERON_ENV}, options: {{team_id: team-7f3a}}}}
  vast: {{type: vastai, base_url: "{vast[1]}", api_key_env: {VAST_ENV}}}
  rp: {{type: runpod, base_url: "http://127.0.0.1:9", api_key_env: {RUNPOD_ENV}}}
  lam: {{type: lambda, base_url: "http://127.0.0.1:9", api_key_env: {LAMBDA_ENV}}}
tiers:
  chat:
    capacity: on-demand
    gpu: {H100}
    providers: [sph, vast, rp, lam, simulated]
    min: 0
    max: 4
    policy: {{kind: min-floor, floor: 1}}
""",
        encoding="utf-8",
    )
    return path


def run(*args: str) -> Result:
    return runner.invoke(app, ["offers", *args])


def as_json(result: Result) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def rank(row: dict[str, Any]) -> float:
    prices = [p for p in (row["on_demand_per_hour"], row["spot_per_hour"]) if p is not None]
    return min(prices)


def spheron_h100_prices(fake: FakeSpheron) -> list[tuple[str, float]]:
    """(region, price) of every 1x H100 SXM offer the fake sells that can run cloud-init."""
    out: list[tuple[str, float]] = []
    for group in fake.catalogue:
        for raw in group["offers"]:
            if raw["gpuType"] == "H100-SXM5" and raw["gpuCount"] == 1 and raw["supportsCloudInit"]:
                price = raw["spot_price"] if raw["instanceType"] == "SPOT" else raw["price"]
                out.extend((region, price) for region in raw["clusters"])
    return sorted(out)


def vast_h100_prices(fake: VastFake, field: str) -> list[float]:
    return sorted(m[field] for m in fake.machines if m["gpu_name"] == "H100 SXM" and m["num_gpus"] == 1)


def test_lists_every_provider_normalised_and_sorted_by_price(
    tiers: Path, spheron: tuple[FakeSpheron, str], vast: tuple[VastFake, str]
) -> None:
    result = run("-f", str(tiers), "-o", "json")
    assert result.exit_code == 0, result.output
    data = as_json(result)
    rows = data["offers"]
    assert {r["provider"] for r in rows} == {"sph", "vast", "simulated"}
    assert all(r["gpu"] == H100 and r["count"] == 1 for r in rows)
    assert [rank(r) for r in rows] == sorted(rank(r) for r in rows)
    sph = sorted((r["region"], rank(r)) for r in rows if r["provider"] == "sph")
    assert sph == spheron_h100_prices(spheron[0])
    vast_rows = [r for r in rows if r["provider"] == "vast"]
    assert sorted(r["on_demand_per_hour"] for r in vast_rows if r["on_demand_per_hour"]) == vast_h100_prices(
        vast[0], "dph_total"
    )
    assert sorted(r["spot_per_hour"] for r in vast_rows if r["spot_per_hour"]) == vast_h100_prices(vast[0], "min_bid")
    assert all(r["available_count"] == 1 for r in vast_rows)  # one machine per Vast offer


def test_missing_credentials_are_an_error_naming_the_env_var_and_the_others_are_listed(tiers: Path) -> None:
    result = run("-f", str(tiers), "-o", "json")
    assert result.exit_code == 0
    errors = {e["provider"]: e["error"] for e in as_json(result)["errors"]}
    assert set(errors) == {"rp", "lam"}
    assert RUNPOD_ENV in errors["rp"]  # found on the first call
    assert LAMBDA_ENV in errors["lam"]  # found when the provider is built


def test_table_shows_offers_and_a_section_for_failed_providers(tiers: Path) -> None:
    result = run("-f", str(tiers))
    assert result.exit_code == 0
    out = result.stdout
    for header in ("provider", "GPU", "region", "on-demand $/h", "spot $/h", "availability"):
        assert header in out
    offers_part, _, failed_part = out.partition("providers that failed")
    assert "sph" in offers_part and "vast" in offers_part and "simulated" in offers_part
    assert RUNPOD_ENV in failed_part and LAMBDA_ENV in failed_part


def test_spot_only_ranks_by_spot_price(tiers: Path, vast: tuple[VastFake, str]) -> None:
    result = run("-f", str(tiers), "--gpu", "H100", "--spot", "-o", "json")
    assert result.exit_code == 0
    rows = as_json(result)["offers"]
    assert rows and all(r["spot_per_hour"] is not None for r in rows)
    assert [r["spot_per_hour"] for r in rows] == sorted(r["spot_per_hour"] for r in rows)
    assert sorted(r["spot_per_hour"] for r in rows if r["provider"] == "vast") == vast_h100_prices(vast[0], "min_bid")


def test_provider_filter_asks_only_that_provider(tiers: Path, vast: tuple[VastFake, str]) -> None:
    result = run("-f", str(tiers), "--provider", "vast", "-o", "json")
    assert result.exit_code == 0
    data = as_json(result)
    assert {r["provider"] for r in data["offers"]} == {"vast"} and data["errors"] == []
    assert vast[0].calls == 2  # one search per capacity, nothing else


def test_a_provider_refusing_the_key_is_an_error_row_and_the_key_is_never_shown(
    tiers: Path, vast: tuple[VastFake, str]
) -> None:
    vast[0].api_key = "someone-elses-key"
    result = run("-f", str(tiers), "-o", "json")
    assert result.exit_code == 0
    data = as_json(result)
    errors = {e["provider"]: e["error"] for e in data["errors"]}
    assert "credentials refused" in errors["vast"] and VAST_ENV in errors["vast"]
    assert "vast" not in {r["provider"] for r in data["offers"]}
    assert {"sph", "simulated"} <= {r["provider"] for r in data["offers"]}
    assert VastFake.api_key not in result.output and SPHERON_KEY not in result.output


def test_exit_1_only_when_every_provider_fails(tiers: Path) -> None:
    result = run("-f", str(tiers), "--provider", "rp", "--provider", "lam")
    assert result.exit_code == 1
    assert RUNPOD_ENV in result.stdout and LAMBDA_ENV in result.stdout
    assert "every provider failed" in result.stderr


def test_bad_arguments_are_usage_errors(tiers: Path) -> None:
    unknown = run("-f", str(tiers), "--provider", "nope")
    assert unknown.exit_code == 2
    assert "nope" in unknown.stderr and "sph" in unknown.stderr  # names the ones that exist
    gpu = run("-f", str(tiers), "--gpu", "TPUv5")
    assert gpu.exit_code == 2 and "TPUv5" in gpu.stderr
    missing = run("-f", str(tiers.parent / "absent.yaml"))
    assert missing.exit_code == 2 and "absent.yaml" in missing.stderr
