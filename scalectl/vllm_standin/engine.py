"""A continuous-batching engine: what makes the stand-in's latencies and metrics move like vLLM's.

Each engine step decodes one token for every running request and prefills up to ``max_num_batched_tokens``
prompt tokens (chunked prefill). How long a step takes comes from the project's one engine model
(``scalectl.sizing.engine.EngineProfile.step_s``, the roofline the simulator uses): decode streams the weights and
the batch's KV cache, prompt tokens fill the compute the memory-bound step leaves idle and stretch it
beyond. So TTFT grows with queueing and prefill and the inter-token latency with the batch and its KV.
Wall-clock sleeps are model time divided by ``speed``; the recorded metrics are model time, so a fast test
still reads realistic seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from dataclasses import dataclass, field

from scalectl.sizing.engine import EngineProfile
from scalectl.vllm_standin.metrics import MetricsState


@dataclass(eq=False)
class Request:
    prompt_tokens: int
    max_tokens: int
    target_tokens: int
    arrived: float
    tokens: asyncio.Queue[int | None] = field(default_factory=asyncio.Queue)
    prefill_remaining: int = 0
    generated: int = 0
    scheduled: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    finish_reason: str | None = None
    new: bool = True  # not yet admitted once (prefix-cache lookups happen on first admission)

    def __post_init__(self) -> None:
        self.prefill_remaining = self.prompt_tokens

    @property
    def kv_tokens(self) -> int:
        return self.prompt_tokens + self.generated


class Engine:
    """Runs the step loop as an asyncio task. ``submit`` queues a request; read its ``tokens`` queue
    (token index per step, ``None`` when finished)."""

    def __init__(self, state: MetricsState, profile: EngineProfile, *, speed: float):
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.state = state
        self.profile = profile
        self.max_num_seqs = profile.max_num_seqs
        self.speed = speed
        self.kv_capacity = profile.kv_capacity_tokens
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.healthy = True
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._seen_blocks: set[int] = set()
        self._prefix_queries = 0.0
        self._prefix_hits = 0.0

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for r in [*self.waiting, *self.running]:  # wake anyone still streaming
            r.finish_reason = r.finish_reason or "abort"
            r.tokens.put_nowait(None)

    @property
    def in_flight(self) -> int:
        return len(self.waiting) + len(self.running)

    # -- requests ----------------------------------------------------------------------------------
    def submit(self, prompt: str, prompt_tokens: int, max_tokens: int, target_tokens: int) -> Request:
        req = Request(prompt_tokens, max_tokens, min(max_tokens, max(1, target_tokens)), time.monotonic())
        self._lookup_prefix(req, prompt)
        with self.state.lock:
            self.state.histograms["params_n"].observe(1)
            self.state.histograms["params_max_tokens"].observe(max_tokens)
            self.state.histograms["max_generation_len"].observe(max_tokens)
        self.waiting.append(req)
        self._publish_gauges()
        self._wake.set()
        return req

    def abort(self, req: Request) -> None:
        """The client went away: free its slot."""
        if req.finish_reason is not None:
            return
        req.finish_reason = "abort"
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        with self.state.lock:
            self.state.successes["abort"] += 1
        self._publish_gauges()

    def _lookup_prefix(self, req: Request, prompt: str) -> None:
        """Prefix caching by 64-character blocks (~16 tokens, vLLM's default block size)."""
        block_chars, hits, h, leading = 64, 0, 0, True
        for start in range(0, len(prompt) - block_chars + 1, block_chars):
            h = hash((h, prompt[start : start + block_chars]))
            if leading and h in self._seen_blocks:
                hits += 16
            else:
                leading = False
            self._seen_blocks.add(h)
        if len(self._seen_blocks) > 200_000:
            self._seen_blocks.clear()
        self._prefix_queries += req.prompt_tokens
        self._prefix_hits += min(hits, req.prompt_tokens)
        with self.state.lock:
            if "prefix_queries" in self.state.counters:
                self.state.counters["prefix_queries"] = self._prefix_queries
                self.state.counters["prefix_hits"] = self._prefix_hits
            if "prefix_hit_rate" in self.state.gauges and self._prefix_queries:
                self.state.gauges["prefix_hit_rate"] = self._prefix_hits / self._prefix_queries

    # -- the step loop -------------------------------------------------------------------------------
    async def _loop(self) -> None:
        while True:
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
            self._admit()
            kv_tokens = sum(r.kv_tokens for r in self.running)
            prefill_tokens, decoding = self._plan_step()
            step_s = self.profile.step_s(len(decoding), kv_tokens, prefill_tokens)
            await asyncio.sleep(step_s / self.speed)
            self._finish_step(prefill_tokens, decoding, time.monotonic())

    def _admit(self) -> None:
        kv_used = sum(r.kv_tokens for r in self.running)
        now = time.monotonic()
        while self.waiting and len(self.running) < self.max_num_seqs:
            nxt = self.waiting[0]
            if self.running and kv_used + nxt.kv_tokens > self.kv_capacity:
                break
            self.waiting.popleft()
            kv_used += nxt.kv_tokens
            if nxt.scheduled is None:
                nxt.scheduled = now
            nxt.new = False
            self.running.append(nxt)
        # Preempt (recompute) the newest requests while decoding would overflow the KV cache.
        while len(self.running) > 1 and kv_used + len(self.running) > self.kv_capacity:
            victim = self.running.pop()
            kv_used -= victim.kv_tokens
            victim.prefill_remaining = victim.kv_tokens
            self.waiting.appendleft(victim)
            with self.state.lock:
                self.state.counters["preemptions"] += 1

    def _plan_step(self) -> tuple[int, list[Request]]:
        budget = self.profile.max_num_batched_tokens
        decoding = [r for r in self.running if r.prefill_remaining == 0]
        budget -= len(decoding)
        prefill_tokens = 0
        for r in self.running:
            if r.prefill_remaining and budget > 0:
                chunk = min(budget, r.prefill_remaining)
                r.prefill_remaining -= chunk
                budget -= chunk
                prefill_tokens += chunk
                if r.prefill_remaining == 0:
                    decoding.append(r)  # the step that finishes a prefill samples its first token
        return prefill_tokens, decoding

    def _finish_step(self, prefill_tokens: int, decoding: list[Request], now: float) -> None:
        s = self.state
        sp = self.speed
        finished: list[Request] = []
        with s.lock:
            h = s.histograms
            h["iteration_tokens"].observe(prefill_tokens + len(decoding))
            s.counters["prompt_tokens"] += prefill_tokens
            for r in decoding:
                if r.finish_reason is not None:  # aborted during the step
                    continue
                r.generated += 1
                if r.first_token is None:
                    r.first_token = now
                    h["ttft"].observe((now - r.arrived) * sp)
                else:
                    h["itl"].observe((now - (r.last_token or now)) * sp)
                r.last_token = now
                r.tokens.put_nowait(r.generated)
                if r.generated >= r.target_tokens:
                    r.finish_reason = "length" if r.generated >= r.max_tokens else "stop"
                    finished.append(r)
            s.counters["generation_tokens"] += len(decoding)
            if "all_tokens" in s.counters:
                s.counters["all_tokens"] += prefill_tokens + len(decoding)
            for r in finished:
                self._record_finished(r, now)
            s.bump()
        for r in finished:
            self.running.remove(r)
            r.tokens.put_nowait(None)
        self._publish_gauges()

    def _record_finished(self, r: Request, now: float) -> None:
        sp, h = self.speed, self.state.histograms
        scheduled = r.scheduled if r.scheduled is not None else r.arrived
        first = r.first_token if r.first_token is not None else now
        h["e2e"].observe((now - r.arrived) * sp)
        h["queue_time"].observe((scheduled - r.arrived) * sp)
        h["inference_time"].observe((now - scheduled) * sp)
        h["prefill_time"].observe((first - scheduled) * sp)
        h["decode_time"].observe((now - first) * sp)
        if "tpot_request" in h and r.generated > 1:
            h["tpot_request"].observe((now - first) * sp / (r.generated - 1))
        h["prompt_len"].observe(r.prompt_tokens)
        h["generation_len"].observe(r.generated)
        self.state.successes[r.finish_reason or "stop"] += 1

    def _publish_gauges(self) -> None:
        s = self.state
        kv = sum(r.kv_tokens for r in self.running)
        with s.lock:
            s.gauges["running"] = float(len(self.running))
            s.gauges["waiting"] = float(len(self.waiting))
            s.gauges["kv_usage"] = min(1.0, kv / self.kv_capacity) if self.kv_capacity else 0.0
            s.bump()


def count_tokens(text: str) -> int:
    """About four characters per token, like common BPE vocabularies on English text."""
    return max(1, math.ceil(len(text) / 4))
