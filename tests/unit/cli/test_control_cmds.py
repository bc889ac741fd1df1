"""scalectl scale|pause|resume: what they store, how status and describe show it, bad input."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tests.unit.cli.test_config_cmds import EXAMPLE, cli, run  # noqa: F401 (the fixture)


def _status_row(cli: CliRunner, tier: str) -> dict:  # noqa: F811
    return next(r for r in json.loads(run(cli, "status", "-o", "json")[1])["tiers"] if r["tier"] == tier)


def test_scale_pause_and_resume_are_stored_and_shown(cli: CliRunner) -> None:  # noqa: F811
    assert run(cli, "apply", "-f", str(EXAMPLE))[0] == 0
    code, out, _ = run(cli, "scale", "orchestrator", "5", "--for", "1h")
    assert code == 0 and out.startswith("orchestrator: override 5 until ") and out.strip().endswith("UTC")
    control = _status_row(cli, "orchestrator")["control"]
    assert control["override"]["count"] == 5 and control["override"]["active"] and not control["paused"]
    code, out, _ = run(cli, "status")
    assert code == 4 and "orchestrator: override 5 until " in out and "(scalectl scale)" in out  # 4: no daemon
    assert run(cli, "pause", "orchestrator")[0] == 0
    described = json.loads(run(cli, "describe", "tier", "orchestrator", "-o", "json")[1])
    assert described["control"]["paused"] and "paused (scalectl pause)" in described["control"]["summary"]
    assert "control: override 5" in run(cli, "describe", "tier", "orchestrator")[1]
    assert run(cli, "scale", "orchestrator", "--clear")[1].strip() == "orchestrator: override cleared"
    assert run(cli, "resume", "orchestrator")[0] == 0
    assert _status_row(cli, "orchestrator")["control"] is None
    kinds = [e["kind"] for e in json.loads(run(cli, "events", "-o", "json", "--limit", "100")[1])]
    assert {"override", "paused", "resumed"} <= set(kinds)


def test_bad_input_is_one_line_exit_2_and_changes_nothing(cli: CliRunner) -> None:  # noqa: F811
    run(cli, "apply", "-f", str(EXAMPLE))
    for args, message in [
        (("scale", "nope", "3"), 'unknown tier "nope"'),
        (("scale", "orchestrator"), "give a count"),
        (("scale", "orchestrator", "3", "--clear"), "give a count"),
        (("scale", "orchestrator", "--", "-1"), "expected 0 or more"),
        (("scale", "orchestrator", "3", "--for", "soon"), "--for:"),
        (("pause", "nope"), 'unknown tier "nope"'),
    ]:
        code, _, err = run(cli, *args)
        assert code == 2 and message in err and "Traceback" not in err, (args, err)
    assert _status_row(cli, "orchestrator")["control"] is None
