"""A tier's load: demand that does not vanish when the fleet is right-sized (unlike a queue's backlog).

The measure is *requests in flight*: for a vLLM tier, ``vllm:num_requests_running`` +
``vllm:num_requests_waiting`` summed over its endpoints (the queue in front of vLLM stands in for the
waiting figure when vLLM does not report it); for a Celery tier, tasks in flight (delivered,
unacknowledged) + tasks queued. It counts what is being served as well as what waits, so it reads the
same whether the fleet keeps up or not, and grows when it does not. The arrival rate (requests per
second: finished + growth of what is in flight, over the reading window) goes along for the reasons.

Unknown (a missing, failed or stale figure; no instance answering) is None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalectl.policies.common import num
from scalectl.policies.types import Signals

UNIT = "in flight"


@dataclass(frozen=True, slots=True)
class Load:
    in_flight: float | None  # requests (or tasks) in flight, running + waiting; None = unknown
    rate: float | None  # arrivals per second over the reading window; None = unknown
    source: str  # "vLLM", "Celery" or the reason it is unknown
    waiting: float | None = None  # of ``in_flight``, not started yet (the backlog)

    @property
    def running(self) -> float | None:
        return None if self.in_flight is None else self.in_flight - (self.waiting or 0.0)

    @property
    def known(self) -> bool:
        return self.in_flight is not None

    @property
    def idle(self) -> bool:
        """No work at all: nothing in flight or queued, and nothing arriving (when the rate is known)."""
        return self.in_flight == 0 and not self.rate

    def text(self) -> str:
        if self.in_flight is None:
            return f"load unknown ({self.source})"
        rate = f" ({rate_text(self.rate)})" if self.rate is not None else ""
        return f"load {num(round(self.in_flight, 1))} {UNIT}{rate}"


def rate_text(rate: float) -> str:
    return f"{num(round(rate, 1))} req/s"


def load_of(signals: Signals) -> Load:
    """The tier's load from one reading: vLLM gauges when present, else the Celery queue's counts."""
    running, waiting = signals.requests_running, signals.requests_waiting
    if running is not None and waiting is None:
        waiting = signals.queue_depth  # work asked for and not yet served, held in front of vLLM
    if running is not None or waiting is not None:
        if running is None or waiting is None:
            missing = "num_requests_running" if running is None else "num_requests_waiting"
            return Load(None, signals.request_rate, f"vLLM {missing} missing")
        return Load(running + waiting, signals.request_rate, "vLLM", waiting)
    depth, in_flight = signals.queue_depth, signals.in_flight
    if depth is not None and in_flight is not None:
        return Load(depth + in_flight, signals.request_rate, "Celery", depth)
    if depth is not None:
        return Load(None, signals.request_rate, "Celery in-flight count missing")
    if in_flight is not None:
        return Load(None, signals.request_rate, "Celery queue depth missing")
    return Load(None, signals.request_rate, "no vLLM or queue figures")


def offered(load: Load, service_time: float | None) -> float | None:
    """The concurrency the arrivals ask for: arrival rate × service time (Little's law), never below what
    runs now; without a rate or a learned service time, what is in flight. A backlog that built up while
    the fleet was short is not a steady load: it is left out when the rate is known (the breach rule and
    the capacity learning see it)."""
    if load.in_flight is None:
        return None
    if load.rate is None or service_time is None:
        return load.in_flight
    return max(load.rate * service_time, load.running or 0.0)


def computed_tokens(signals: Signals) -> float | None:
    """Tokens per second the tier's engines compute: prompt tokens not found in the prefix cache, plus the
    tokens generated. None when the prompt token rate is unknown; an unknown hit rate counts every prompt
    token (the cautious reading), an unknown generation rate counts none (the prompt dominates the compute)."""
    prompt = signals.prompt_tokens_rate
    if prompt is None:
        return None
    hit = min(max(signals.prefix_cache_hit_rate or 0.0, 0.0), 1.0)
    return prompt * (1.0 - hit) + (signals.generation_tokens_rate or 0.0)
