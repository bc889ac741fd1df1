"""The shipped alert rules and dashboard against promtool and a live daemon: the rules parse and fire on the
series they should, the daemon's /metrics passes `promtool check metrics`, and every metric a dashboard
query or an alert names is one the daemon exposes (and docs/metrics.md documents)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.helpers import free_port, start_daemon
from tests.services import repo_root

pytestmark = pytest.mark.e2e

ROOT = repo_root()
RULES = ROOT / "deploy" / "prometheus" / "scalectl-alerts.yaml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "scalectl-alerts.test.yaml"
DASHBOARDS = sorted((ROOT / "deploy" / "grafana").glob("*.json"))
METRIC = re.compile(r"\b((?:scalectl|process|python)_[a-zA-Z0-9_]+)")
OWN = re.compile(r"`(scalectl_[a-z0-9_]+)`")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: install Debian's `prometheus` package (scripts/test does it as root)")
    return found


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], input=stdin, capture_output=True, text=True, timeout=60, cwd=RULES.parent
    )


def test_alert_rules_pass_promtool_check_and_their_unit_tests() -> None:
    checked = _run("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = _run("test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    covered = {t["alertname"] for c in yaml.safe_load(RULE_TESTS.read_text())["tests"] for t in c["alert_rule_test"]}
    assert alerts == covered, f"alerts without a promtool test: {alerts - covered}"
    for wanted in ("ScalectlStuckLaunch", "ScalectlSignalLoss", "ScalectlBudgetCapHit", "ScalectlProviderErrors"):
        assert wanted in alerts


@pytest.fixture(scope="module")
def live_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """/metrics of the embedded demo once instances have launched, booted and retired (at 60× speed)."""
    data = tmp_path_factory.mktemp("daemon")
    port = free_port()
    daemon = start_daemon(data, "--port", str(port), "--speed", "60")
    try:
        text = ""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            except httpx.HTTPError:
                text = ""
            if re.search(r'scalectl_instance_events_total\{kind="retired",tier="research"\} [1-9]', text):
                break
            time.sleep(0.5)
        assert "scalectl_tier_desired_instances" in text, "the daemon never served its metrics"
        yield text
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()


def _exposed(text: str) -> set[str]:
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def test_live_metrics_pass_promtool_check_metrics(live_metrics: str) -> None:
    result = _run("check", "metrics", stdin=live_metrics)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), result.stderr


def test_live_metrics_have_what_the_dashboards_need(live_metrics: str) -> None:
    exposed = _exposed(live_metrics)
    for needed in (
        "scalectl_build_info",
        "process_cpu_seconds_total",
        "scalectl_launch_to_ready_seconds_count",
        "scalectl_tier_cost_dollars_total",
    ):
        assert needed in exposed
    # Counters exist before their first increment (rate() sees the first error).
    assert 'scalectl_provider_requests_total{operation="create",outcome="error",provider="simulated"}' in live_metrics
    assert re.search(r'scalectl_launch_to_ready_seconds_count\{tier="research"\} [1-9]', live_metrics)


def _queries(dashboard: dict) -> Iterator[str]:
    def walk(node: object) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "definition") and isinstance(value, str):
                    yield value
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    yield from walk(dashboard)


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_dashboard_query_names_an_exposed_metric(path: Path, live_metrics: str) -> None:
    exposed = _exposed(live_metrics)
    queries = list(_queries(json.loads(path.read_text())))
    assert len(queries) >= 20
    for query in queries:
        names = METRIC.findall(query)
        assert names, f"{path.name}: query names no scalectl metric: {query}"
        missing = [n for n in names if n not in exposed]
        assert not missing, f"{path.name}: {query} names {missing}, which /metrics does not expose"


def test_every_alert_names_an_exposed_metric(live_metrics: str) -> None:
    exposed = _exposed(live_metrics)
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            names = [n for n in METRIC.findall(rule["expr"])]
            assert names or "up{" in rule["expr"], rule["alert"]
            assert all(n in exposed for n in names), (rule["alert"], names)


def test_docs_metrics_md_lists_exactly_the_exposed_scalectl_metrics(live_metrics: str) -> None:
    families = {f.name for f in text_string_to_metric_families(live_metrics) if f.name.startswith("scalectl_")}
    documented = set(OWN.findall((ROOT / "docs" / "metrics.md").read_text()))
    documented_families = {re.sub(r"_total$", "", n) for n in documented}
    assert families <= documented_families, f"undocumented: {families - documented_families}"
    assert documented_families <= families, f"documented but not exposed: {documented_families - families}"
