"""A ``kind: external`` policy that asks SkyServe's own RequestRateAutoscaler (``bench/skyserve/worker.py``,
run by the Python of a virtualenv with skypilot installed) what to do, on the simulator's virtual time.

Options: ``python`` (that virtualenv's interpreter; default ``$SKYPILOT_PYTHON``), ``target_qps_per_replica``,
and optionally ``upscale_delay_seconds`` / ``downscale_delay_seconds`` (SkyServe's defaults otherwise).
The request timestamps SkyServe's load balancer would report are the tier's arrivals of each tick, spread
evenly over the tick.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from scalectl.policies.types import Bounds, Signals

WORKER = Path(__file__).with_name("worker.py")


class SkyServeAutoscaler:
    def __init__(self, options: dict[str, Any], bounds: Bounds) -> None:
        python = options.get("python") or os.environ.get("SKYPILOT_PYTHON")
        if not python:
            raise ValueError("set options.python (or $SKYPILOT_PYTHON) to a Python that has skypilot installed")
        settings = {
            "min_replicas": max(1, bounds.min),
            "max_replicas": bounds.max,
            "target_qps_per_replica": float(options["target_qps_per_replica"]),
            "upscale_delay_seconds": options.get("upscale_delay_seconds"),
            "downscale_delay_seconds": options.get("downscale_delay_seconds"),
        }
        self._proc = subprocess.Popen(
            [str(python), str(WORKER), json.dumps(settings)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._last: float | None = None

    def decide(self, now: float, signals: Signals, current: int) -> tuple[int, str]:
        arrivals = int(signals.arrivals or 0)
        start = self._last if self._last is not None else now
        step = (now - start) / arrivals if arrivals else 0.0
        stamps = [start + step * (i + 1) for i in range(arrivals)]
        self._last = now
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"now": now, "timestamps": stamps}) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the SkyServe worker exited ({self._proc.poll()})")
        target = int(json.loads(line)["target"])
        return target, f"SkyServe RequestRateAutoscaler → {target}"

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
