"""Recorded vLLM /metrics texts and the raw samples behind them (tests/fixtures/vllm)."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"


def text(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text()


def samples(generation: str, batch: str) -> list[float]:
    return json.loads((FIXTURES / "samples.json").read_text())[generation][batch]


ALL = ["new_1", "new_2", "new_3_restarted", "old_1", "old_2", "old_3_restarted"]
