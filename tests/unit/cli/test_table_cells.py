"""Table cells print as written: a decision's reason carries square brackets ("[out: …]", "[not sized on …]")
that rich would otherwise read as markup tags and drop from `describe`, `events` and `backtest`."""

from __future__ import annotations

import pytest

from scalectl.cli.output import Format, emit


def test_square_brackets_in_a_cell_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    reason = "need 2 [out: daily: too little history] [not sized on requests: unknown]; → 2"
    emit([{"tier": "orchestrator", "reason": reason}], Format.table)
    out = capsys.readouterr().out
    assert "[out: daily: too little history]" in out
    assert "[not sized on requests: unknown]" in out


def test_a_cell_that_looks_like_a_style_tag_is_not_one(capsys: pytest.CaptureFixture[str]) -> None:
    emit({"gpu": "[bold]H100[/bold]"}, Format.table)
    assert "[bold]H100[/bold]" in capsys.readouterr().out
