"""Creates through network faults: per adapter and fault class, what the provider saw.

The real reconciler (fake clock, in-memory SQLite) drives the real adapter over loopback HTTP through
tests/fakes/fault_proxy.py to a local provider API whose listing lags behind its creates (the
scenario is tests/fakes/create_faults.py; the last case lags the get-by-id too). Two instances wanted;
prints creates the provider received, duplicates made, machines of ours leaked (billing, no row) at the
end, real machines deleted, and the fake time to convergence (every row holds one machine, no other
machine of ours). The last cases wrap the adapter in the daemon's per-call deadline (1 s; the adapter's own
timeout at its default) and hold every create's answer past it: the provider acts, the call is cut.

    .venv/bin/python bench/bench_faults.py [--adapters spheron,runpod,vastai] [--only deadline]
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

# (label, fault, listing lag s, creates hit (None: every one), adapter timeout s (None: its default), get-by-id
# lag s, the daemon's call deadline around the adapter s (None: none; a HANG then holds the answer past it))
CASES = [
    ("clean network", None, 5.0, None, None, 0.0, None),
    ("reset after acting, lag 5 s", ProxyFault.RESET_AFTER_ACTING, 5.0, None, None, 0.0, None),
    ("reset after acting, lag 15 s", ProxyFault.RESET_AFTER_ACTING, 15.0, None, None, 0.0, None),
    ("reset after acting, lag 45 s", ProxyFault.RESET_AFTER_ACTING, 45.0, None, None, 0.0, None),
    ("unreadable 2xx, lag 5 s", ProxyFault.UNREADABLE_2XX, 5.0, None, None, 0.0, None),
    ("hang past timeout x3, lag 5 s", ProxyFault.HANG, 5.0, 3, 0.5, 0.0, None),
    ("429 Retry-After x3, lag 5 s", ProxyFault.RATE_LIMITED, 5.0, 3, None, 0.0, None),
    ("500 x3, lag 5 s", ProxyFault.SERVER_ERROR, 5.0, 3, None, 0.0, None),
    ("list and get-by-id lag 10 s", None, 10.0, None, None, 10.0, None),
    ("answered past call deadline, lag 15 s", ProxyFault.HANG, 15.0, None, None, 0.0, 1.0),
    ("answered past call deadline, lag 25 s", ProxyFault.HANG, 25.0, None, None, 0.0, 1.0),
]


async def main(adapters: list[str], only: str) -> None:
    monkeypatch = pytest.MonkeyPatch()
    print(f"{'adapter':8} {'fault':38} {'creates':>7} {'dupes':>5} {'leaked':>6} {'deleted':>7} {'converged':>10}")
    try:
        for adapter in adapters:
            for label, fault, lag, times, timeout, get_lag, deadline in CASES:
                if only and only not in label:
                    continue
                out = await run_scenario(
                    adapter, fault, lag, monkeypatch, times=times, timeout=timeout, get_lag=get_lag, deadline=deadline
                )
                when = f"{out.converged_at:.0f} s" if out.converged_at is not None else "never"
                print(
                    f"{adapter:8} {label:38} {out.creates:>7} {out.duplicates:>5} {out.leaked:>6} "
                    f"{out.deleted:>7} {when:>10}",
                    flush=True,
                )
    finally:
        monkeypatch.undo()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapters", default="spheron,runpod,vastai")
    parser.add_argument("--only", default="", help="run the cases whose label contains this (e.g. 'deadline')")
    args = parser.parse_args()
    asyncio.run(main(args.adapters.split(","), args.only))
