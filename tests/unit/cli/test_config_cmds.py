"""scalectl apply / diff / get / status / describe / events: results, formats, exit codes, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scalectl.cli.main import app

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiers.yaml"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SCALECTL_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return CliRunner()


def run(cli: CliRunner, *args: str) -> tuple[int, str, str]:
    result = cli.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_issue_example_is_accepted_as_written_and_versioned(cli: CliRunner) -> None:
    code, out, _ = run(cli, "apply", "-f", str(EXAMPLE), "-o", "json")
    assert code == 0
    applied = json.loads(out)
    assert applied["version"] == 1 and applied["changed"] is True
    assert {t["tier"] for t in applied["tiers"]} == {"orchestrator", "research", "support-daytime"}
    code, out, _ = run(cli, "apply", "-f", str(EXAMPLE), "-o", "json")
    assert code == 0 and json.loads(out)["changed"] is False  # same file: no new version
    code, out, _ = run(cli, "get", "tiers", "-o", "json")
    tiers = json.loads(out)["tiers"]
    assert tiers["research"]["policy"]["kind"] == "scale-to-zero"
    assert tiers["orchestrator"]["policy"]["ttft_max"] == "500ms"


def test_diff_exit_codes(cli: CliRunner, tmp_path: Path) -> None:
    assert run(cli, "diff", "-f", str(EXAMPLE))[0] == 3  # nothing stored yet: everything is new
    run(cli, "apply", "-f", str(EXAMPLE))
    code, out, _ = run(cli, "diff", "-f", str(EXAMPLE))
    assert code == 0 and "no changes" in out
    changed = tmp_path / "t.yaml"
    changed.write_text(EXAMPLE.read_text().replace("max: 20", "max: 25"))
    code, out, _ = run(cli, "diff", "-f", str(changed))
    assert code == 3
    assert "tier orchestrator: changed" in out and "+max: 25" in out and "-max: 20" in out
    code, out, _ = run(cli, "diff", "-f", str(changed), "-o", "json")
    assert code == 3 and json.loads(out)[0]["after"]["max"] == 25


BAD_CASES = {
    "invalid YAML": ("tiers: [a, b\n", "invalid YAML"),
    "unknown policy kind": (
        EXAMPLE.read_text().replace("kind: min-floor", "kind: hyperdrive"),
        "tier \"orchestrator\": policy: unknown policy kind 'hyperdrive'",
    ),
    "inverted bounds": (
        EXAMPLE.read_text().replace("min: 1\n    max: 20", "min: 30\n    max: 20"),
        'tier "orchestrator": min (30) is above max (20)',
    ),
    "negative bound": (EXAMPLE.read_text().replace("min: 0", "min: -1"), 'tier "research": min:'),
    "unparsable duration": (
        EXAMPLE.read_text().replace("idle_after: 5m", "idle_after: five"),
        'tier "research": policy.idle_after: expected a duration',
    ),
    "unparsable cron": (
        EXAMPLE.read_text().replace('cron: "0 8 * * mon-fri"', 'cron: "every morning"'),
        'tier "support-daytime": policy.schedule[0].cron: expected a 5-field cron expression',
    ),
    "unknown field": (EXAMPLE.read_text().replace("min: 1\n", "min: 1\n    minn: 2\n", 1), "minn: unknown field"),
    "unknown provider": (EXAMPLE.read_text().replace("[simulated]", "[nebula]", 1), 'unknown provider "nebula"'),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_names_file_tier_field_exits_2_and_stores_nothing(cli: CliRunner, tmp_path: Path, case: str) -> None:
    text, expected = BAD_CASES[case]
    path = tmp_path / "tiers.yaml"
    path.write_text(text)
    code, out, err = run(cli, "apply", "-f", str(path))
    assert code == 2, (out, err)
    message = " ".join(err.split())  # rich wraps long lines
    assert str(path) in message.replace(" ", "") or str(path) in message
    assert " ".join(expected.split()) in message, message
    assert "Nothing was changed" in message
    code, out, _ = run(cli, "get", "tiers", "-o", "json")
    assert code == 0 and json.loads(out) == {"version": None, "tiers": {}}


def test_missing_file_is_a_usage_error(cli: CliRunner, tmp_path: Path) -> None:
    code, _, err = run(cli, "apply", "-f", str(tmp_path / "nope.yaml"))
    assert code == 2 and "cannot read the file" in err


def test_status_describe_and_events_on_an_applied_config(cli: CliRunner) -> None:
    run(cli, "apply", "-f", str(EXAMPLE))
    code, out, _ = run(cli, "status", "-o", "json")
    assert code == 4  # no daemon is running (test_status_stale.py)
    document = json.loads(out)
    assert set(document) == {"tiers", "leader", "replicas", "daemon"}  # the document GET /v1/status answers
    rows = {r["tier"]: r for r in document["tiers"]}
    assert rows["research"]["ready"] == 0 and rows["research"]["capacity"] == "spot"
    code, out, _ = run(cli, "describe", "tier", "research", "-o", "yaml")
    assert code == 0 and "scale-to-zero" in out
    code, _, err = run(cli, "describe", "tier", "nope")
    assert code == 2 and 'unknown tier "nope"' in err
    code, out, _ = run(cli, "events", "-o", "json")
    assert code == 0 and {e["kind"] for e in json.loads(out)} == {"tier-added"}
    code, _, err = run(cli, "events", "--since", "soon")
    assert code == 2 and "--since" in err


def test_unreachable_database_is_a_clean_error_without_the_password(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALECTL_DATABASE_URL", "postgresql+psycopg://fleet:hunter2secret@127.0.0.1:1/fleet")
    code, out, err = run(cli, "status")
    assert code == 1
    assert "cannot open the database" in err and "127.0.0.1:1" in err
    assert "hunter2secret" not in err + out


def test_offers_defaults_to_the_applied_configuration(cli: CliRunner) -> None:
    code, _, err = run(cli, "offers")
    assert code == 2 and "no configuration applied yet" in err
    run(cli, "apply", "-f", str(EXAMPLE))
    code, out, _ = run(cli, "offers", "--gpu", "H100", "-o", "json")
    assert code == 0
    offers = json.loads(out)["offers"]
    assert offers and {o["provider"] for o in offers} == {"simulated"}
    assert {o["gpu"] for o in offers} == {"H100-SXM5-80GB"}


def test_describe_tier_shows_capacity_per_instance_and_what_was_learned(cli: CliRunner) -> None:
    from scalectl.cli.context import open_store, settings
    from scalectl.policies.core.capacity import CapacityState, observe
    from scalectl.policies.core.pipeline import CoreState, MeasureState
    from scalectl.policies.types import PolicyState

    run(cli, "apply", "-f", str(EXAMPLE))
    code, out, _ = run(cli, "describe", "tier", "orchestrator", "-o", "json")
    capacity = json.loads(out)["capacity"]
    assert code == 0 and capacity["in_flight_prior"] == 160.0  # 0.8 × max-num-seqs 200
    assert capacity["capacity_per_instance"] is None and capacity["measures"] == {}  # nothing read yet: unknown
    cap = CapacityState()
    for i in range(400):  # a fleet of 8 at 40–80 req/s per instance against a prior of 100; breaching above 60
        per_instance = 40 + (i % 40)
        ttft = 2.0 if per_instance >= 60 else 0.2
        cap = observe(cap, now=60.0 * i, prior=100.0, rate=8 * per_instance, ready=8, ttft=ttft, target=0.5, waiting=0)
    core = CoreState(last_t=1.0, measures={"requests": MeasureState(capacity=cap)})
    store = open_store(settings())
    with store.sessions.begin() as session:
        store.policy.save(session, "orchestrator", PolicyState(learned={"svc.ref": 1.6}, core=core), 4, 1.0)
    code, out, _ = run(cli, "describe", "tier", "orchestrator", "-o", "json")
    capacity = json.loads(out)["capacity"]
    requests = capacity["measures"]["requests"]
    assert capacity["capacity_per_instance"] == requests["per_instance"] == 60.0  # the knee, below the prior
    assert requests["prior"] == 100.0 and requests["ratio_to_prior"] == 0.6 and requests["unit"] == "req/s"
    assert "breached from 60" in requests["why"] and requests["forecast_error_p90"] is None
    assert capacity["service_time_s"] == 1.6 and capacity["stabilization_s"] == 300.0
    code, out, _ = run(cli, "describe", "tier", "orchestrator")
    assert code == 0 and "capacity per instance (target mode)" in out and "breached from 60" in out
    assert "requests forecast error p90" in out and "not measured yet" in out
    code, out, _ = run(cli, "describe", "tier", "research", "-o", "json")
    assert json.loads(out)["capacity"] is None  # scale-to-zero tracks no capacity
    assert json.loads(out)["batch"] is None  # nor, without max_wait, learns task times


def test_describe_tier_shows_what_a_max_wait_batch_tier_learned(cli: CliRunner) -> None:
    from scalectl.cli.context import open_store, settings
    from scalectl.policies.types import PolicyState
    from tests.unit.policies.batch_learned import learned_runner, measured_boots

    batch_night = EXAMPLE.parent / "tiers" / "batch-night.yaml"  # `max_wait: 10m` only
    run(cli, "apply", "-f", str(batch_night))
    code, out, _ = run(cli, "describe", "tier", "research", "-o", "json")
    view = json.loads(out)["batch"]
    assert code == 0 and view["max_wait_s"] == 600.0
    assert view["task_time_s"] is None and view["slots_per_instance"] is None and view["rounds"] is False
    # two hours of four busy workers (90 s tasks, 8 slots), three measured boots of 3 minutes
    learned = measured_boots(learned_runner(), 180, 180, 180).state.learned
    store = open_store(settings())
    with store.sessions.begin() as session:
        store.policy.save(session, "research", PolicyState(learned=learned), 4, 1.0)
    code, out, _ = run(cli, "describe", "tier", "research", "-o", "json")
    view = json.loads(out)["batch"]
    assert abs(view["task_time_s"] - 90) < 1 and view["slots_per_instance"] == 8.0
    assert view["boots_measured"] == 3 and view["boot_time_s"] == 180
    assert view["round_saving"] == pytest.approx(0.11, abs=0.01) and view["rounds"] is False  # 10 minutes: kept
    code, out, _ = run(cli, "describe", "tier", "research")
    assert code == 0 and "batch sizing (max_wait): learned" in out
    assert json.loads(run(cli, "describe", "tier", "research", "-o", "json")[1])["capacity"] is None
