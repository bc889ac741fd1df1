"""`scalectl describe tier NAME` as plain data: the tier's spec and status, its latest signals (and which source
failed), what its policy learned, its rollout, instances and recent decisions. The CLI renders this document;
``-o json|yaml`` prints it as it is."""

from __future__ import annotations

from typing import Any

from scalectl.controller.store.repository import Store
from scalectl.controller.views.ages import ago
from scalectl.controller.views.capacity import learned_batch, learned_capacity
from scalectl.controller.views.controls import control_view
from scalectl.controller.views.rollout_status import rollout_status
from scalectl.controller.views.status import fleet_status
from scalectl.policies.types import PolicyState
from scalectl.sources.spec import NO_SOURCE


class UnknownTier(LookupError):
    def __init__(self, name: str, known: list[str]):
        super().__init__(f'unknown tier "{name}"; tiers: {", ".join(sorted(known)) or "(none applied)"}')


def _names_a_source(spec: dict[str, Any]) -> bool:
    block = spec.get("signals") or {}
    return bool(block.get("queue") or block.get("metrics") or block.get("endpoints"))


def describe_tier(store: Store, name: str, now: float, *, decisions: int = 10) -> dict[str, Any]:
    """The document for one tier at ``now`` (the daemon's world time). Raises ``UnknownTier``."""
    from scalectl.tiers.config import TierSpec  # the tiers-file models: describe only

    specs = store.config.tier_specs()
    if name not in specs:
        raise UnknownTier(name, list(specs))
    recent = store.records.decisions(name, limit=decisions)
    status = next((r for r in fleet_status(store.reads, now) if r["tier"] == name), {})
    state = store.policy.states().get(name, (PolicyState(), None))[0]
    tier_spec = TierSpec.model_validate(specs[name])
    last = recent[-1] if recent else None
    signals = dict(last.signals) if last else {}
    errors = signals.pop("errors", {})
    error_counts = signals.pop("error_counts", {})
    held_by = signals.pop("sources", {})  # figures the activator gave (a tier at zero)
    if not any(v is not None for v in signals.values()) and not _names_a_source(specs[name]):
        errors = {**errors, "signals": NO_SOURCE}
    return {
        "tier": name,
        "spec": specs[name],
        "status": status,
        "signals": signals,
        "signal_errors": errors,
        "signal_error_counts": error_counts,
        "signal_sources": held_by,
        "capacity": learned_capacity(tier_spec, state),
        "batch": learned_batch(tier_spec, state),
        "rollout": rollout_status(store, name),
        "control": control_view(store.controls.controls().get(name), now),  # `scalectl scale`, `pause`
        "instances": [
            {
                "key": i.key,
                "state": i.state,
                "provider": i.provider,
                "capacity": i.capacity,
                "gpu": i.gpu,
                "gpu_count": i.gpu_count,
                "region": i.region,
                "price_per_hour": i.price_per_hour,
                "age": ago(now - i.created_at),
                "reason": i.reason,
            }
            for i in store.reads.instances(name)
        ],
        "decisions": [
            {"age": ago(now - d.t), "current": d.current, "desired": d.desired, "reason": d.reason} for d in recent
        ],
    }
