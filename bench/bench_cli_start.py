"""How long `scalectl status`, `--help`, `--version` and a shell completion take from process start to exit
(target: < 0.3 s each), and which imports cost most.

    python bench/bench_cli_start.py                     # this checkout, 10 runs of each
    python bench/bench_cli_start.py --root /other/tree  # another checkout (e.g. the previous release)
    python bench/bench_cli_start.py --runs 20 --top 15

Runs each command line against a fresh SQLite data directory (created, migrated and given the example tiers
once before timing), prints the median and best wall and CPU seconds, then the slowest top-level imports of
`status -o json` from one run under `-X importtime`.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# name -> (arguments, extra environment). Completion is what bash asks on each TAB (click's protocol).
CASES: dict[str, tuple[list[str], dict[str, str]]] = {
    "status -o json": (["status", "-o", "json"], {}),
    "--help": (["--help"], {}),
    "--version": (["--version"], {}),
    "TAB: scalectl <TAB>": ([], {"_SCALECTL_COMPLETE": "complete_bash", "COMP_WORDS": "scalectl ", "COMP_CWORD": "1"}),
    "TAB: scalectl apply --<TAB>": (
        [],
        {"_SCALECTL_COMPLETE": "complete_bash", "COMP_WORDS": "scalectl apply --", "COMP_CWORD": "2"},
    ),
}
OK = (0, 4)  # status exits 4 when no daemon is running (the bench starts none)


def _env(root: Path, data: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALECTL_") and k != "DATABASE_URL"}
    env.update({"PYTHONPATH": str(root), "SCALECTL_DATA_DIR": str(data), **(extra or {})})
    return env


def _run(root: Path, data: Path, *python: str, case: str = "status -o json") -> tuple[float, float, str]:
    args, extra = CASES[case]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *python, "-m", "scalectl.cli.main", *args],
        cwd=root,
        env=_env(root, data, extra),
        capture_output=True,
        text=True,
    )
    if done.returncode not in OK:
        raise SystemExit(f"{case}: exit {done.returncode}\n{done.stderr}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stderr


def _top_imports(stderr: str, top: int) -> list[tuple[float, str]]:
    """Cumulative microseconds of top-level packages from `-X importtime` output."""
    totals: dict[str, float] = {}
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if m and len(m.group(2)) == 1:  # top level: one space of indent
            name = m.group(3).split(".")[0]
            totals[name] = totals.get(name, 0.0) + int(m.group(1)) / 1e6
    return sorted(((s, n) for n, s in totals.items()), reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout to measure")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    root = args.root.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        subprocess.run(
            [sys.executable, "-m", "scalectl.cli.main", "apply", "-f", str(root / "examples" / "tiers.yaml")],
            cwd=root,
            env=_env(root, data),
            capture_output=True,
            check=True,
        )
        print(f"scalectl ({root}), {args.runs} runs each:")
        for case in CASES:
            _run(root, data, case=case)  # warm the OS file cache and .pyc files
            samples = [_run(root, data, case=case)[:2] for _ in range(args.runs)]
            walls, cpus = [w for w, _ in samples], [c for _, c in samples]
            print(
                f"  {case:<28} wall median {statistics.median(walls):.3f} s  best {min(walls):.3f} s   "
                f"cpu median {statistics.median(cpus):.3f} s"
            )
        _, _, trace = _run(root, data, "-X", "importtime")
        print("  slowest top-level imports (cumulative):")
        for seconds, name in _top_imports(trace, args.top):
            print(f"    {seconds:7.3f} s  {name}")


if __name__ == "__main__":
    main()
