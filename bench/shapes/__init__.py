"""Workload shape generators for bench/bench_shapes.py: each family a function (seed, scale, gpu, hours)
returning a tiers file and a workload file (``ShapeFiles``); see bench/README.md, "Shape suite"."""

from bench.shapes.common import GPUS, SCALES, ShapeError, ShapeFiles
from bench.shapes.families import FAMILIES, generate

__all__ = ["FAMILIES", "GPUS", "SCALES", "ShapeError", "ShapeFiles", "generate"]
