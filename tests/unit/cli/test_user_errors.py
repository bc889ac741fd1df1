"""Bad input exits 2 with one line per problem naming the file, the field and the fix, never a traceback:
missing traces, absurdly nested YAML, and every validation problem of a file in one run."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from scalectl.cli.main import app
from scalectl.cli.traces import MissingTrace, resolve_traces
from scalectl.simulator.workloads.spec import TraceLoad, load_workload

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
TRACE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n"
)
WORKLOAD = "duration: 1h\ntiers:\n  orchestrator: {kind: trace, path: ../traces/conv.csv, format: azure}\n"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SCALECTL_DATA_DIR", str(tmp_path / "data"))
    for name in ("SCALECTL_DATABASE_URL", "DATABASE_URL", "SCALECTL_TRACES"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def _error_lines(result: Result) -> list[str]:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.stderr
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_simulate_with_a_missing_trace_is_one_line_naming_file_tier_field_and_fix(
    cli: CliRunner, tmp_path: Path
) -> None:
    workload = tmp_path / "w" / "day.yaml"
    workload.parent.mkdir()
    workload.write_text(WORKLOAD)
    result = cli.invoke(
        app, ["simulate", "-f", str(EXAMPLES / "tiers" / "azure-conversation.yaml"), "-w", str(workload)]
    )
    (line,) = _error_lines(result)
    assert str(workload) in line and 'tier "orchestrator": path: trace file not found' in line
    assert "SCALECTL_TRACES" in line


def test_traces_are_found_relative_to_the_file_else_in_scalectl_traces(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "day.yaml").write_text(WORKLOAD)
    workload = load_workload(tmp_path / "w" / "day.yaml")
    with pytest.raises(MissingTrace, match=r"SCALECTL_TRACES has no conv\.csv"):
        resolve_traces(workload, "day.yaml", {"SCALECTL_TRACES": str(tmp_path / "elsewhere")})
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "conv.csv").write_text(TRACE)
    found = resolve_traces(workload, "day.yaml", {"SCALECTL_TRACES": str(tmp_path / "elsewhere")})
    load = found.tiers["orchestrator"]
    assert isinstance(load, TraceLoad) and found.trace_path(load) == tmp_path / "elsewhere" / "conv.csv"
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "conv.csv").write_text(TRACE)
    here = resolve_traces(workload, "day.yaml", {"SCALECTL_TRACES": str(tmp_path / "elsewhere")})
    load = here.tiers["orchestrator"]
    assert isinstance(load, TraceLoad) and here.trace_path(load) == tmp_path / "traces" / "conv.csv"


def _deep(kind: str) -> str:
    if kind == "flow":
        return "tiers: " + "[" * 600 + "]" * 600 + "\n"
    return "tiers:\n" + "".join("  " * i + f"a{i}:\n" for i in range(600)) + "  " * 600 + "x: 1\n"


@pytest.mark.parametrize("kind", ["flow", "block"])
@pytest.mark.parametrize("command", ["apply", "diff", "backtest", "simulate-tiers", "simulate-workload"])
def test_absurdly_nested_yaml_is_a_usage_error(cli: CliRunner, tmp_path: Path, command: str, kind: str) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text(_deep(kind))
    timeline = tmp_path / "timeline.jsonl"
    timeline.write_text("")
    args = {
        "apply": ["apply", "-f", str(deep)],
        "diff": ["diff", "-f", str(deep)],
        "backtest": ["backtest", "-f", str(deep), "-s", str(timeline)],
        "simulate-tiers": ["simulate", "-f", str(deep), "-w", str(EXAMPLES / "workloads" / "batch-night.yaml")],
        "simulate-workload": ["simulate", "-f", str(EXAMPLES / "tiers" / "batch-night.yaml"), "-w", str(deep)],
    }[command]
    lines = _error_lines(cli.invoke(app, args))
    assert str(deep) in lines[0] and "nested more than 64 levels deep" in lines[0]


def test_validation_reports_every_problem_in_one_run(cli: CliRunner, tmp_path: Path) -> None:
    text = (EXAMPLES / "tiers.yaml").read_text()
    text = text.replace("[simulated]", "[nebula]", 1)  # orchestrator: unknown provider
    text = text.replace("idle_after: 5m", "idle_after: five")  # research: bad duration
    text = text.replace("min: 1\n    max: 30", "min: 40\n    max: 30")  # support-daytime: min above max
    text = text.replace("floor: 2\n", "floor: 2\n      flor: 2\n", 1)  # typo
    path = tmp_path / "tiers.yaml"
    path.write_text(text)
    lines = _error_lines(cli.invoke(app, ["apply", "-f", str(path)]))
    problems = [line.removeprefix("error: ") for line in lines if str(path) in line]
    joined = "\n".join(problems)
    assert 'tier "orchestrator": providers: unknown provider "nebula"' in joined
    assert 'tier "orchestrator": policy.flor: unknown field' in joined
    assert 'tier "research": policy.idle_after: expected a duration' in joined
    assert 'tier "support-daytime": min (40) is above max (30)' in joined
    assert len(problems) == 4 and lines[-1] == "Nothing was changed."
