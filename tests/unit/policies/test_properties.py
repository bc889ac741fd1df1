"""Properties that must hold for any load pattern: bounds, no zero with work in flight, hold on missing data,
and replay from recorded (serialised) state."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scalectl.policies.clamp import max_affordable
from scalectl.policies.engine import decide
from scalectl.policies.spec import PolicySpec
from scalectl.policies.types import Bounds, Decision, PolicyInput, PolicyState, Signals
from tests.unit.policies.helpers import T0, spec

maybe_count = st.one_of(st.none(), st.integers(0, 400).map(float))
maybe_latency = st.one_of(st.none(), st.floats(0.01, 3.0))

signals = st.builds(
    Signals,
    queue_depth=maybe_count,
    in_flight=maybe_count,
    ttft_p95_s=maybe_latency,
    requests_running=maybe_count,
    requests_waiting=maybe_count,
    request_rate=maybe_count,
    arrivals=maybe_count,
)
ticks = st.lists(st.tuples(st.floats(1, 120), signals), min_size=1, max_size=60)

policies_ = st.one_of(
    st.builds(
        lambda f, cap, fraction, window: spec(
            kind="min-floor", floor=f, capacity=cap, scale_in_max_fraction=fraction, stabilization=window
        ),
        st.integers(0, 3),
        st.integers(1, 300),
        st.floats(0.1, 1.0),
        st.integers(0, 600),
    ),
    st.builds(
        lambda q, a, i, w: spec(kind="scale-to-zero", queue_per_instance=q, activate_after=a, idle_after=i, max_wait=w),
        st.integers(1, 40),
        st.integers(0, 60),
        st.integers(0, 600),
        st.one_of(st.none(), st.integers(60, 3600)),
    ),
    st.builds(
        lambda h, n: spec(
            kind="predictive",
            headroom=h,
            lead_time="5m",
            schedule=[{"cron": "0 */2 * * *", "until": "23:00", "instances": n}],
        ),
        st.floats(0, 1),
        st.integers(0, 20),
    ),
)


@st.composite
def bounds_(draw: st.DrawFn) -> Bounds:
    low = draw(st.integers(0, 4))
    high = draw(st.integers(low, 40))
    budget = draw(st.one_of(st.none(), st.floats(0.5, 100)))
    return Bounds(min=low, max=high, budget_per_hour=budget, price_per_instance_hour=2.4 if budget else None)


def replay(policy: PolicySpec, bounds: Bounds, current: int, steps: list[tuple[float, Signals]]) -> list[Decision]:
    state, now, out = PolicyState(), T0, []
    for gap, sig in steps:
        now += gap
        decision = decide(policy, PolicyInput(now, sig, current, state), bounds)
        out.append(decision)
        state, current = decision.state, decision.desired
    return out


@settings(max_examples=150, deadline=None)
@given(policies_, bounds_(), st.integers(0, 40), ticks)
def test_every_decision_is_within_min_max_and_budget(
    policy: PolicySpec, bounds: Bounds, current: int, steps: list[tuple[float, Signals]]
) -> None:
    affordable = max_affordable(bounds)
    for decision in replay(policy, bounds, current, steps):
        assert decision.desired <= bounds.max
        if affordable is not None:
            assert decision.desired <= affordable
        if affordable is None or affordable >= bounds.min:
            assert decision.desired >= bounds.min
        assert decision.reason


@settings(max_examples=150, deadline=None)
@given(
    st.builds(
        lambda q, a, i: spec(kind="scale-to-zero", queue_per_instance=q, activate_after=a, idle_after=i),
        st.integers(1, 40),
        st.integers(0, 60),
        st.integers(0, 600),
    ),
    st.integers(0, 10),
    ticks,
)
def test_scale_to_zero_is_never_zero_with_tasks_in_flight(
    policy: PolicySpec, current: int, steps: list[tuple[float, Signals]]
) -> None:
    """Without ``max_wait``. With it, a tier goes to zero once its queue is empty and its last tasks run on
    draining instances, which finish them (tests/unit/policies/test_batch_max_wait.py pins that rule)."""
    for (_, sig), decision in zip(steps, replay(policy, Bounds(min=0, max=50), current, steps), strict=True):
        if sig.in_flight is not None and sig.in_flight > 0:
            assert decision.desired >= 1


@settings(max_examples=150, deadline=None)
@given(policies_, st.integers(0, 30), ticks, st.floats(1, 3600))
def test_missing_signals_never_reduce_the_count(
    policy: PolicySpec, current: int, steps: list[tuple[float, Signals]], gap: float
) -> None:
    bounds = Bounds(min=0, max=40)
    history = replay(policy, bounds, current, steps)
    before = history[-1]
    now = T0 + sum(g for g, _ in steps) + gap
    for blind in (Signals(), Signals(queue_depth=None, in_flight=0, ttft_p95_s=0.1)):
        after = decide(policy, PolicyInput(now, blind, before.desired, before.state), bounds)
        assert after.desired >= before.desired
        assert "unknown" in after.reason


@settings(max_examples=100, deadline=None)
@given(policies_, bounds_(), st.integers(0, 40), ticks)
def test_a_run_replays_identically_from_serialised_state(
    policy: PolicySpec, bounds: Bounds, current: int, steps: list[tuple[float, Signals]]
) -> None:
    first = replay(policy, bounds, current, steps)
    state, now, cur = PolicyState(), T0, current
    for (gap, sig), expected in zip(steps, first, strict=True):
        now += gap
        state = PolicyState.from_dict(state.to_dict())
        decision = decide(policy, PolicyInput(now, sig, cur, state), bounds)
        assert (decision.desired, decision.reason) == (expected.desired, expected.reason)
        state, cur = decision.state, decision.desired
