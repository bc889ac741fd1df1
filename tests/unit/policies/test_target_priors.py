"""Target mode's requests prior: sequence slots over the measured service time, bound by the engine's compute
over the tokens one request costs (long prompts bind the compute long before the slots)."""

from __future__ import annotations

from scalectl.policies import target
from scalectl.policies.spec import ReactiveRules
from scalectl.policies.types import PolicyInput, PolicyState, Signals
from tests.unit.policies.core.synth import T0

RULES = ReactiveRules.model_validate({})
SLOTS, COMPUTE = 160.0, 61_600.0  # requests in flight one instance serves; tokens/s it computes


def reason_after(tokens_per_request: float, ticks: int = 4) -> str:
    """Ticks of 10 req/s, 10 running (a 1 s service time), nothing waiting; the last decision's reason."""
    state, reason = PolicyState(), ""
    for k in range(ticks):
        signals = Signals(
            arrivals=150.0, request_rate=10.0, finish_rate=10.0, requests_running=10.0, requests_waiting=0.0,
            prompt_tokens_rate=10.0 * tokens_per_request, generation_tokens_rate=0.0, ttft_p99_s=0.2,
        )  # fmt: skip
        inp = PolicyInput(T0 + 15.0 * k, signals, 2, state, capacity_prior=SLOTS, compute_prior=COMPUTE)
        decision = target.evaluate(RULES, 1, inp)
        state, reason = decision.state, decision.reason
    return reason


def test_long_prompts_bind_the_requests_prior_by_compute() -> None:
    # 0.8 × 61,600 tokens/s ÷ 2,000 tokens a request = 24.6 req/s, far below 160 in flight ÷ 1 s
    assert "49280 tokens/s ÷ 2000 per request" in reason_after(2000.0)


def test_short_prompts_leave_the_slots_binding() -> None:
    # 0.8 × 61,600 ÷ 100 = 493 req/s: the 160 slots over a 1 s service time bind first
    reason = reason_after(100.0)
    assert "160 in flight ÷ 1s service" in reason and "per request" not in reason


def test_the_tokens_per_request_reference_moves_only_past_the_drift() -> None:
    learned = target._observe_tokens_per_request({}, Signals(request_rate=10.0, prompt_tokens_rate=20_000.0))
    assert learned["tpr.ref"] == 2000.0
    near = target._observe_tokens_per_request(learned, Signals(request_rate=10.0, prompt_tokens_rate=22_000.0))
    assert near["tpr.ref"] == 2000.0  # 10% off: the prior (and what capacity has learned) stays
    far = target._observe_tokens_per_request(learned, Signals(request_rate=10.0, prompt_tokens_rate=30_000.0))
    assert far["tpr.ref"] == 3000.0
