"""Creates through network faults: per adapter and fault class, what the provider saw.

The real reconciler (fake clock, in-memory SQLite) drives the real adapter over loopback HTTP through
tests/fakes/fault_proxy.py to a local provider API whose listing lags behind its creates (the
scenario is tests/fakes/create_faults.py; the last case lags the get-by-id too). Two instances wanted;
prints creates the provider received, duplicates made, machines of ours leaked (billing, no row) at the
end, real machines deleted, and the fake time to convergence (every row holds one machine, no other
machine of ours).

    .venv/bin/python bench/bench_faults.py [--adapters spheron,runpod,vastai]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.create_faults import run_scenario
from tests.fakes.fault_proxy import ProxyFault

# (label, fault, listing lag s, creates hit (None: every one), adapter timeout s (None: its default), get-by-id lag s)
CASES = [
    ("clean network", None, 5.0, None, None, 0.0),
    ("reset after acting, lag 5 s", ProxyFault.RESET_AFTER_ACTING, 5.0, None, None, 0.0),
    ("reset after acting, lag 15 s", ProxyFault.RESET_AFTER_ACTING, 15.0, None, None, 0.0),
    ("reset after acting, lag 45 s", ProxyFault.RESET_AFTER_ACTING, 45.0, None, None, 0.0),
    ("unreadable 2xx, lag 5 s", ProxyFault.UNREADABLE_2XX, 5.0, None, None, 0.0),
    ("hang past timeout x3, lag 5 s", ProxyFault.HANG, 5.0, 3, 0.5, 0.0),
    ("429 Retry-After x3, lag 5 s", ProxyFault.RATE_LIMITED, 5.0, 3, None, 0.0),
    ("500 x3, lag 5 s", ProxyFault.SERVER_ERROR, 5.0, 3, None, 0.0),
    ("list and get-by-id lag 10 s", None, 10.0, None, None, 10.0),
]


async def main(adapters: list[str]) -> None:
    monkeypatch = pytest.MonkeyPatch()
    print(f"{'adapter':8} {'fault':32} {'creates':>7} {'dupes':>5} {'leaked':>6} {'deleted':>7} {'converged':>10}")
    try:
        for adapter in adapters:
            for label, fault, lag, times, timeout, get_lag in CASES:
                out = await run_scenario(
                    adapter, fault, lag, monkeypatch, times=times, timeout=timeout, get_lag=get_lag
                )
                when = f"{out.converged_at:.0f} s" if out.converged_at is not None else "never"
                print(
                    f"{adapter:8} {label:32} {out.creates:>7} {out.duplicates:>5} {out.leaked:>6} "
                    f"{out.deleted:>7} {when:>10}",
                    flush=True,
                )
    finally:
        monkeypatch.undo()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapters", default="spheron,runpod,vastai")
    args = parser.parse_args()
    asyncio.run(main(args.adapters.split(",")))
