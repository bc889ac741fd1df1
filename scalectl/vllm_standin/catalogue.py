"""vLLM's Prometheus metrics, as vLLM defines them: names, help texts, label names and bucket boundaries.

Two generations are modelled, because fleets run both:

* ``new`` — the V1 engine (vLLM 0.9 and later, ``vllm/v1/metrics/loggers.py``): labels ``model_name`` and
  ``engine``, ``vllm:kv_cache_usage_perc``, prefix-cache hit/query counters, ``_created`` series (vLLM leaves
  prometheus_client's created series on).
* ``old`` — the V0 engine (vLLM 0.6–0.8, ``vllm/engine/metrics.py``): label ``model_name`` only,
  ``vllm:gpu_cache_usage_perc``, ``vllm:gpu_prefix_cache_hit_rate`` gauge, no ``_created`` series.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Generation = Literal["new", "old"]
Kind = Literal["gauge", "counter", "histogram"]

TTFT_BUCKETS_NEW = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
TTFT_BUCKETS_OLD = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TOKEN_LATENCY_BUCKETS_NEW = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
TOKEN_LATENCY_BUCKETS_OLD = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
REQUEST_LATENCY_BUCKETS_NEW = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS_OLD = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
ITERATION_TOKENS_BUCKETS_NEW = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
ITERATION_TOKENS_BUCKETS_OLD = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8096)
PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
FINISH_REASONS = ("stop", "length", "abort")


def build_1_2_5_buckets(max_value: int) -> tuple[int, ...]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, … up to ``max_value``."""
    buckets: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(buckets)
            buckets.append(value)
        exponent += 1


@dataclass(frozen=True, slots=True)
class MetricDef:
    key: str  # what the stand-in's engine records into (same key in both generations)
    name: str  # family name without the counter ``_total`` suffix (as prometheus_client stores it)
    kind: Kind
    help: str
    buckets: tuple[float, ...] = ()
    extra_label: str | None = None  # e.g. finished_reason


def _hist(key: str, name: str, help: str, buckets: tuple[float, ...]) -> MetricDef:
    return MetricDef(key, name, "histogram", help, buckets)


def _catalogue_new(max_model_len: int) -> tuple[MetricDef, ...]:
    tokens = tuple(float(b) for b in build_1_2_5_buckets(max_model_len))
    latency = REQUEST_LATENCY_BUCKETS_NEW
    return (
        MetricDef("running", "vllm:num_requests_running", "gauge", "Number of requests in model execution batches."),
        MetricDef("waiting", "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."),
        MetricDef("kv_usage", "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."),
        MetricDef(
            "prefix_queries",
            "vllm:prefix_cache_queries",
            "counter",
            "Prefix cache queries, in terms of number of queried tokens.",
        ),
        MetricDef(
            "prefix_hits",
            "vllm:prefix_cache_hits",
            "counter",
            "Prefix cache hits, in terms of number of cached tokens.",
        ),
        MetricDef("preemptions", "vllm:num_preemptions", "counter", "Cumulative number of preemption from the engine."),
        MetricDef("prompt_tokens", "vllm:prompt_tokens", "counter", "Number of prefill tokens processed."),
        MetricDef("generation_tokens", "vllm:generation_tokens", "counter", "Number of generation tokens processed."),
        MetricDef(
            "request_success",
            "vllm:request_success",
            "counter",
            "Count of successfully processed requests.",
            extra_label="finished_reason",
        ),
        MetricDef(
            "prompt_len", "vllm:request_prompt_tokens", "histogram", "Number of prefill tokens processed.", tokens
        ),
        MetricDef(
            "generation_len",
            "vllm:request_generation_tokens",
            "histogram",
            "Number of generation tokens processed.",
            tokens,
        ),
        MetricDef(
            "iteration_tokens",
            "vllm:iteration_tokens_total",
            "histogram",
            "Histogram of number of tokens per engine_step.",
            tuple(float(b) for b in ITERATION_TOKENS_BUCKETS_NEW),
        ),
        MetricDef(
            "max_generation_len",
            "vllm:request_max_num_generation_tokens",
            "histogram",
            "Histogram of maximum number of requested generation tokens.",
            tokens,
        ),
        MetricDef(
            "params_n",
            "vllm:request_params_n",
            "histogram",
            "Histogram of the n request parameter.",
            tuple(float(b) for b in PARAMS_N_BUCKETS),
        ),
        MetricDef(
            "params_max_tokens",
            "vllm:request_params_max_tokens",
            "histogram",
            "Histogram of the max_tokens request parameter.",
            tokens,
        ),
        MetricDef(
            "ttft",
            "vllm:time_to_first_token_seconds",
            "histogram",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS_NEW,
        ),
        MetricDef(
            "itl",
            "vllm:inter_token_latency_seconds",
            "histogram",
            "Histogram of inter-token latency in seconds.",
            TOKEN_LATENCY_BUCKETS_NEW,
        ),
        MetricDef(
            "tpot_request",
            "vllm:request_time_per_output_token_seconds",
            "histogram",
            "Histogram of time_per_output_token_seconds per request.",
            TOKEN_LATENCY_BUCKETS_NEW,
        ),
        MetricDef(
            "e2e",
            "vllm:e2e_request_latency_seconds",
            "histogram",
            "Histogram of e2e request latency in seconds.",
            latency,
        ),
        MetricDef(
            "queue_time",
            "vllm:request_queue_time_seconds",
            "histogram",
            "Histogram of time spent in WAITING phase for request.",
            latency,
        ),
        MetricDef(
            "inference_time",
            "vllm:request_inference_time_seconds",
            "histogram",
            "Histogram of time spent in RUNNING phase for request.",
            latency,
        ),
        MetricDef(
            "prefill_time",
            "vllm:request_prefill_time_seconds",
            "histogram",
            "Histogram of time spent in PREFILL phase for request.",
            latency,
        ),
        MetricDef(
            "decode_time",
            "vllm:request_decode_time_seconds",
            "histogram",
            "Histogram of time spent in DECODE phase for request.",
            latency,
        ),
    )


def _catalogue_old(max_model_len: int) -> tuple[MetricDef, ...]:
    tokens = tuple(float(b) for b in build_1_2_5_buckets(max_model_len))
    latency = REQUEST_LATENCY_BUCKETS_OLD
    return (
        MetricDef("running", "vllm:num_requests_running", "gauge", "Number of requests currently running on GPU."),
        MetricDef("waiting", "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."),
        MetricDef("swapped", "vllm:num_requests_swapped", "gauge", "Number of requests swapped to CPU."),
        MetricDef("kv_usage", "vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage."),
        MetricDef(
            "cpu_kv_usage", "vllm:cpu_cache_usage_perc", "gauge", "CPU KV-cache usage. 1 means 100 percent usage."
        ),
        MetricDef("cpu_prefix_hit_rate", "vllm:cpu_prefix_cache_hit_rate", "gauge", "CPU prefix cache block hit rate."),
        MetricDef("prefix_hit_rate", "vllm:gpu_prefix_cache_hit_rate", "gauge", "GPU prefix cache block hit rate."),
        MetricDef("preemptions", "vllm:num_preemptions", "counter", "Cumulative number of preemption from the engine."),
        MetricDef("prompt_tokens", "vllm:prompt_tokens", "counter", "Number of prefill tokens processed."),
        MetricDef("generation_tokens", "vllm:generation_tokens", "counter", "Number of generation tokens processed."),
        MetricDef("all_tokens", "vllm:tokens", "counter", "Number of prefill plus generation tokens processed."),
        MetricDef(
            "iteration_tokens",
            "vllm:iteration_tokens_total",
            "histogram",
            "Histogram of number of tokens per engine_step.",
            tuple(float(b) for b in ITERATION_TOKENS_BUCKETS_OLD),
        ),
        MetricDef(
            "ttft",
            "vllm:time_to_first_token_seconds",
            "histogram",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS_OLD,
        ),
        MetricDef(
            "itl",
            "vllm:time_per_output_token_seconds",
            "histogram",
            "Histogram of time per output token in seconds.",
            TOKEN_LATENCY_BUCKETS_OLD,
        ),
        MetricDef(
            "e2e",
            "vllm:e2e_request_latency_seconds",
            "histogram",
            "Histogram of end to end request latency in seconds.",
            latency,
        ),
        MetricDef(
            "queue_time",
            "vllm:request_queue_time_seconds",
            "histogram",
            "Histogram of time spent in WAITING phase for request.",
            latency,
        ),
        MetricDef(
            "inference_time",
            "vllm:request_inference_time_seconds",
            "histogram",
            "Histogram of time spent in RUNNING phase for request.",
            latency,
        ),
        MetricDef(
            "prefill_time",
            "vllm:request_prefill_time_seconds",
            "histogram",
            "Histogram of time spent in PREFILL phase for request.",
            latency,
        ),
        MetricDef(
            "decode_time",
            "vllm:request_decode_time_seconds",
            "histogram",
            "Histogram of time spent in DECODE phase for request.",
            latency,
        ),
        MetricDef(
            "prompt_len", "vllm:request_prompt_tokens", "histogram", "Number of prefill tokens processed.", tokens
        ),
        MetricDef(
            "generation_len",
            "vllm:request_generation_tokens",
            "histogram",
            "Number of generation tokens processed.",
            tokens,
        ),
        MetricDef(
            "max_generation_len",
            "vllm:request_max_num_generation_tokens",
            "histogram",
            "Histogram of maximum number of requested generation tokens.",
            tokens,
        ),
        MetricDef(
            "params_n",
            "vllm:request_params_n",
            "histogram",
            "Histogram of the n request parameter.",
            tuple(float(b) for b in PARAMS_N_BUCKETS),
        ),
        MetricDef(
            "params_max_tokens",
            "vllm:request_params_max_tokens",
            "histogram",
            "Histogram of the max_tokens request parameter.",
            tokens,
        ),
        MetricDef(
            "request_success",
            "vllm:request_success",
            "counter",
            "Count of successfully processed requests.",
            extra_label="finished_reason",
        ),
    )


def catalogue(generation: Generation, max_model_len: int) -> tuple[MetricDef, ...]:
    return _catalogue_new(max_model_len) if generation == "new" else _catalogue_old(max_model_len)


def label_names(generation: Generation) -> tuple[str, ...]:
    return ("model_name", "engine") if generation == "new" else ("model_name",)
