"""The boot model's figures: boot p50/p95 (minutes) for an 8B on one H100 and a 70B on two, cold and cached,
per provider type, and the mean of each part. The table in docs/simulator.md ("What a boot is made of").
From the repository root (project installed, or PYTHONPATH=.):
    python bench/bench_boot.py
"""

from __future__ import annotations

from scalectl.sizing.boot import BOOT_PATHS, boot_model
from scalectl.sizing.models import lookup_model

CASES = (("8B FP8, 1x H100", "llama-3.1-8b", 1), ("70B FP16, 2x H100", "llama-3.1-70b", 2))
PROVIDERS = ("simulated", "aws", "lambda", "runpod")


def main() -> None:
    print("provider  | " + " | ".join(f"{label} {path}" for label, _, _ in CASES for path in BOOT_PATHS))
    for provider in PROVIDERS:
        cells = []
        for _, model, gpus in CASES:
            for path in BOOT_PATHS:
                p50, p95 = boot_model(provider, gpus, lookup_model(model), path).quantiles(0.5, 0.95)
                cells.append(f"{p50 / 60:.1f} / {p95 / 60:.1f}")
        print(f"{provider:<9} | " + " | ".join(cells))
    for label, model, gpus in CASES:
        for path in BOOT_PATHS:
            parts = boot_model("simulated", gpus, lookup_model(model), path).mean_parts()
            means = ", ".join(f"{name} {seconds / 60:.2f}" for name, seconds in parts.to_dict().items())
            print(f"mean parts (min), {label}, {path}, simulated: {means}; total {parts.total / 60:.2f}")


if __name__ == "__main__":
    main()
