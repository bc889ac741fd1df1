"""A vLLM stand-in: vLLM's HTTP surface and exact ``/metrics`` format, driven by a continuous-batching
latency model. Used by tests, the simulator, benchmarks and the local provider."""

from scalectl.vllm_standin.app import Standin, StandinConfig
from scalectl.vllm_standin.server import RunningStandins, run_in_thread

__all__ = ["RunningStandins", "Standin", "StandinConfig", "run_in_thread"]
