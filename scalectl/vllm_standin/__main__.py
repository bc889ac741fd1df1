"""``python -m scalectl.vllm_standin --host 127.0.0.1 --port N --model NAME --max-model-len L [--max-num-seqs S]
[--gpu GPU] [--speed F] [--metrics-generation new|old] [--shutdown-timeout SECONDS]``"""

from __future__ import annotations

import argparse
import sys

from scalectl.vllm_standin.app import StandinConfig
from scalectl.vllm_standin.server import serve_forever


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scalectl.vllm_standin", description="A vLLM stand-in server.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--max-model-len", type=int, required=True)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--gpu", default="H100-SXM5-80GB", help="the GPU whose figures the engine model uses")
    p.add_argument("--speed", type=_positive_float, default=1.0, help="run the latency model this many times faster")
    p.add_argument("--metrics-generation", choices=["new", "old"], default="new")
    p.add_argument("--shutdown-timeout", type=float, default=30.0, help="seconds to finish in-flight requests")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = StandinConfig(
        model=args.model,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        gpu=args.gpu,
        speed=args.speed,
        metrics_generation=args.metrics_generation,
    )
    return serve_forever(config, args.host, args.port, args.shutdown_timeout)


if __name__ == "__main__":
    sys.exit(main())
