"""Stopping the daemon while a tick runs: the tick finishes and commits before anything is closed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from scalectl.controller.daemon import Daemon, DaemonOptions
from scalectl.controller.settings import Settings


async def test_a_stop_during_a_tick_lets_the_tick_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    daemon = Daemon(Settings(data_dir=tmp_path, tick_interval=0.05), DaemonOptions(serve_http=False))
    began, release = asyncio.Event(), asyncio.Event()
    outcome: list[str] = []
    build = daemon.build

    def build_with_a_slow_tick() -> Any:
        controller = build()
        real_tick = controller.reconciler.tick

        async def slow_tick(scope: Any = None) -> Any:
            began.set()
            try:
                await release.wait()  # the tick is in the middle of its work when the stop comes
            except asyncio.CancelledError:
                outcome.append("cancelled")
                raise
            report = await real_tick(scope)
            outcome.append("finished")
            return report

        controller.reconciler.tick = slow_tick  # type: ignore[method-assign]
        return controller

    monkeypatch.setattr(daemon, "build", build_with_a_slow_tick)
    running = asyncio.create_task(daemon.run())
    await asyncio.wait_for(began.wait(), 30)
    daemon._stop.set()  # what SIGTERM does
    for _ in range(20):  # the shutdown path runs (and stops the scheduler) while the tick is still busy
        await asyncio.sleep(0)
    assert not running.done()  # waiting for the tick
    release.set()
    assert await asyncio.wait_for(running, 30) == 0
    assert outcome == ["finished"]
    assert daemon._ticks == 1
