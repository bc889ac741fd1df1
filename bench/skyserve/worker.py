"""Runs SkyServe's own RequestRateAutoscaler (skypilot from PyPI) on virtual time, answering over stdin/stdout.

Started by ``bench/skyserve/policy.py`` with the Python of a virtualenv that has ``skypilot`` installed (it
pins click<8.2, so it cannot share scalectl's environment). One JSON object per line in:
``{"now": <virtual seconds>, "timestamps": [<request arrival times>]}``; one per line out:
``{"target": <replicas>}``. The autoscaler's wall clock is replaced by the virtual one.
"""

from __future__ import annotations

import json
import logging
import sys
import types

_OUT = sys.stdout
sys.stdout = sys.stderr  # SkyServe's loggers print; only the answers go to the real stdout

from sky.serve import autoscalers, constants  # noqa: E402

_now = [0.0]


def _clock() -> float:
    return _now[0]


def main() -> int:
    options = json.loads(sys.argv[1])
    logging.getLogger("sky").setLevel(logging.WARNING)
    autoscalers.time = types.SimpleNamespace(time=_clock)  # the module reads time.time() for its window
    spec = types.SimpleNamespace(
        min_replicas=options["min_replicas"],
        max_replicas=options["max_replicas"],
        target_qps_per_replica=options["target_qps_per_replica"],
        upscale_delay_seconds=options.get("upscale_delay_seconds"),
        downscale_delay_seconds=options.get("downscale_delay_seconds"),
        num_overprovision=None,
        use_ondemand_fallback=False,
        dynamic_ondemand_fallback=None,
        base_ondemand_fallback_replicas=None,
    )
    scaler = autoscalers.RequestRateAutoscaler("scalectl-sim", spec)
    assert constants.AUTOSCALER_DEFAULT_DECISION_INTERVAL_SECONDS == 20, "SkyServe's decision interval changed"
    next_decision = None
    for line in sys.stdin:
        msg = json.loads(line)
        _now[0] = float(msg["now"])
        scaler.collect_request_information({"timestamps": msg.get("timestamps", [])})
        if next_decision is None or _now[0] >= next_decision - 1e-9:
            scaler._set_target_num_replicas_with_hysteresis()  # what each scaling decision runs first
            next_decision = _now[0] + scaler.get_decision_interval()
        _OUT.write(json.dumps({"target": int(scaler.get_final_target_num_replicas())}) + "\n")
        _OUT.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
