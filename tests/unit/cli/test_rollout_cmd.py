"""scalectl rollout status|restart|pause|resume: what they store, what they print, bad input."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tests.unit.cli.test_config_cmds import EXAMPLE, cli, run  # noqa: F401 (the fixture)


def test_rollout_commands_store_the_generation_and_the_pause(cli: CliRunner) -> None:  # noqa: F811
    assert run(cli, "apply", "-f", str(EXAMPLE))[0] == 0
    code, out, _ = run(cli, "rollout", "status", "orchestrator", "-o", "json")
    status = json.loads(out)
    assert code == 0 and status["state"] == "complete" and status["generation"] == 0 and len(status["server"]) == 16
    code, out, _ = run(cli, "rollout", "restart", "orchestrator")
    assert code == 0 and out.strip() == "orchestrator: rollout generation 1, running"
    restarted = json.loads(run(cli, "rollout", "status", "orchestrator", "-o", "json")[1])
    assert restarted["generation"] == 1 and restarted["server"] != status["server"]  # every instance now drifts
    assert run(cli, "rollout", "pause", "orchestrator")[1].strip() == "orchestrator: rollout generation 1, paused"
    assert json.loads(run(cli, "rollout", "status", "orchestrator", "-o", "json")[1])["state"] == "paused"
    assert run(cli, "rollout", "resume", "orchestrator")[0] == 0
    kinds = [e["kind"] for e in json.loads(run(cli, "events", "-o", "json", "--limit", "100")[1])]
    assert {"rollout-restart", "rollout-paused", "rollout-resumed"} <= set(kinds)
    described = json.loads(run(cli, "describe", "tier", "orchestrator", "-o", "json")[1])
    assert described["rollout"]["generation"] == 1


def test_an_unknown_tier_is_one_line_and_exit_2(cli: CliRunner) -> None:  # noqa: F811
    run(cli, "apply", "-f", str(EXAMPLE))
    code, _, err = run(cli, "rollout", "restart", "nope")
    assert code == 2 and 'unknown tier "nope"' in err and "Traceback" not in err
