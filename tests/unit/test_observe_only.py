"""`scalectl daemon --observe`: a daemon run on the bundled example (simulated cloud, synthetic load) reads,
decides and records, and calls no provider's create or delete (nor list or offers); `scalectl report`
prices what its decisions would have run beside the count the operator gives for the current fleet."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.controller import daemon as daemon_module
from scalectl.controller.daemon import Daemon, DaemonOptions
from scalectl.controller.settings import Settings


class Counted:
    """A provider that counts every call made to it, then passes it on."""

    def __init__(self, inner: Any, calls: Counter[str]):
        self._inner, self._calls = inner, calls

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls[name] += 1
            return attr(*args, **kwargs)

        return call


@pytest.mark.parametrize("observe", [True, False])
async def test_an_observing_daemon_calls_no_provider_and_report_prices_its_decisions(
    observe: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: Counter[str] = Counter()
    build = daemon_module.build_providers
    monkeypatch.setattr(
        daemon_module, "build_providers", lambda *a, **k: {n: Counted(p, calls) for n, p in build(*a, **k).items()}
    )
    # Ten minutes of world time per real second: a tick a minute, at least ten minutes of decisions.
    settings = Settings(data_dir=tmp_path, tick_interval=60.0)
    daemon = Daemon(settings, DaemonOptions(speed=600, max_ticks=10, serve_http=False, observe=observe))
    assert await daemon.run() == 0
    if not observe:  # the same run acting: the counter does see the calls an acting daemon makes
        assert calls["create"] > 0 and calls["list"] > 0
        return
    assert calls["create"] == calls["delete"] == calls["list"] == calls["offers"] == 0, calls
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("SCALECTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    cli = CliRunner()
    decisions = json.loads(cli.invoke(app, ["events", "-o", "json", "--limit", "5"]).stdout)
    assert decisions and all(
        d["what"].split(": ", 1)[1].startswith("observe-only: ") for d in decisions if d["kind"] == "decision"
    )
    tiers = [r["tier"] for r in json.loads(cli.invoke(app, ["status", "-o", "json"]).stdout)["tiers"]]
    result = cli.invoke(app, ["report", "--since", "24h", "--current", f"{tiers[0]}=3", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    rows = {r["tier"]: r for r in json.loads(result.stdout)}
    first = rows[tiers[0]]
    assert first["hours"] > 0.1  # ten ticks a minute apart, at least
    assert first["would_cost"] is not None and first["would_cost"] > 0
    price = first["price_per_hour"]  # hours are shown to 0.01: allow for that rounding
    assert first["current_cost"] == pytest.approx(3 * first["hours"] * price, abs=3 * 0.005 * price + 0.01)
    table = cli.invoke(app, ["report", "--current", f"{tiers[0]}=3"]).stdout
    assert "would_cost" in table and "difference over 1 tier(s): $" in table


def test_each_decision_holds_until_the_next_and_unknown_prices_stay_unknown() -> None:
    from scalectl.controller.views.shadow_report import instance_hours, tier_report

    assert instance_hours([(0.0, 2), (3600.0, 4)], 7200.0) == (6.0, 2.0, 4)
    row = tier_report("web", [(0.0, 2), (3600.0, 4)], 7200.0, 1.5, 5)
    assert (row["would_cost"], row["current_cost"], row["difference"], row["would_avg"]) == (9.0, 15.0, -6.0, 3.0)
    unpriced = tier_report("web", [(0.0, 2)], 3600.0, None, 5)
    assert unpriced["would_cost"] is None and unpriced["current_cost"] is None  # unknown, never zero
    assert tier_report("web", [], 3600.0, 1.5, None)["hours"] == 0.0


def test_observe_refuses_routing_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SCALECTL_ROUTING", "nginx")
    result = CliRunner().invoke(app, ["daemon", "--observe", "--ticks", "1"])
    assert result.exit_code == 2 and "--observe serves no traffic" in result.stderr
    assert not (tmp_path / "scalectl.db").exists()  # refused before anything was written
