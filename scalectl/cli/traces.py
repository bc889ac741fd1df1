"""Where a workload's trace files are: relative to the workload file (a checkout beside the traces), else in
``$SCALECTL_TRACES``. A trace found nowhere is a usage error naming the file, the tier, the field and the fix."""

from __future__ import annotations

import os
from pathlib import Path

from scalectl.simulator.workloads.spec import TraceLoad, Workload

TRACES_ENV = "SCALECTL_TRACES"


class MissingTrace(ValueError):
    pass


def resolve_traces(workload: Workload, source: str, env: dict[str, str] | None = None) -> Workload:
    """The workload with every trace path pointing at an existing file, or MissingTrace."""
    env = dict(os.environ) if env is None else env
    folder = env.get(TRACES_ENV)
    tiers = dict(workload.tiers)
    for tier, load in workload.tiers.items():
        if not isinstance(load, TraceLoad):
            continue
        where = workload.trace_path(load)
        if where.is_file():
            continue
        name = Path(load.path).name
        fallback = Path(folder).expanduser().absolute() / name if folder else None
        if fallback is not None and fallback.is_file():
            tiers[tier] = load.model_copy(update={"path": str(fallback)})
            continue
        looked = f"{where}" + (f" or {fallback}" if fallback is not None else "")
        fix = (
            f"{TRACES_ENV} has no {name} either; point it at the folder that holds it"
            if folder
            else f"set {TRACES_ENV} to the folder that holds {name} (docs/simulator.md#traces), or fix the path"
        )
        raise MissingTrace(f'{source}: tier "{tier}": path: trace file not found ({looked}); {fix}')
    return workload.model_copy(update={"tiers": tiers})
