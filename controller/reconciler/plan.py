"""Phase 4, plan: from a tier's instances, its desired size and the offers, what to do — a typed ``Plan``
of creates, drains and rebalances. Pure: no store, no provider calls; the act phase carries it out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from scalectl.controller.reconciler import placement, scale
from scalectl.controller.reconciler.backoffs import Backoffs
from scalectl.controller.reconciler.decide import tier_price_per_hour
from scalectl.controller.reconciler.fleet_budget import FleetBudget
from scalectl.controller.reconciler.replace import OfferKey, noticed
from scalectl.controller.reconciler.rollout import RolloutView, drifted, voluntary_disruptions
from scalectl.domain.instance import Instance, InstanceState
from scalectl.providers.base import Capacity, Offer
from scalectl.tiers.config import TierSpec
from scalectl.tiers.disruption import active_budget

NO_PLACEMENT = "no-placement"  # the note when capacity (offers, their room, the budget) runs out
SPOT_WAIT = "spot-wait"  # the note while a spot tier waits ``fallback_after`` before falling back
DISRUPTION_WINDOW = "disruption-window"  # the note while an open window holds back scale-in or a rollout
HAND_BACK_SHARE = 0.25  # fallbacks handed back to spot at once when the tier sets no max_disrupted


@dataclass(frozen=True)
class Create:
    tier: str
    placement: placement.Placement
    surge: bool = False  # an extra instance that replaces a fallback one once it is ready
    fill: bool = False  # a member for the tier's warm pool: boots once, then stops (pool.py)
    why: str | None = None  # the reason, when it is none of the usual ones

    @property
    def reason(self) -> str:
        if self.why is not None:
            return self.why
        if self.fill:
            return "fill the warm pool"
        if self.placement.fallback:
            return "fallback to on-demand"
        return "surge: spot is back" if self.surge else "scale out"


@dataclass(frozen=True)
class Drain:
    instance: Instance
    reason: str


@dataclass(frozen=True)
class Note:
    """A condition worth an event (recorded once, then every few minutes while it lasts)."""

    tier: str
    kind: str
    message: str


@dataclass
class Plan:
    creates: list[Create] = field(default_factory=list)
    drains: list[Drain] = field(default_factory=list)  # scale-in
    rebalances: list[Create | Drain] = field(default_factory=list)  # fallback instances handed back to spot
    notes: list[Note] = field(default_factory=list)

    @property
    def launched(self) -> int:
        return len(self.creates) + sum(1 for r in self.rebalances if isinstance(r, Create))

    @property
    def retired(self) -> int:
        return len(self.drains)


def instance_price(name: str, tier: TierSpec, offers: Sequence[Offer], backoffs: Backoffs, now: float) -> float | None:
    """The one price rule of a tier's budget, for the policy's cap and for placement alike: an instance
    costs what placement would pay for the next one (the best acceptable live offer; per primary unit for a
    tier with variants); the catalogue price stands in only while no offer is known."""
    spot_backoff = backoffs.spot_backoff(name, now)
    ranked = placement.ranked_offers(tier, offers, backoffs.offers, now, spot_backoff=spot_backoff)
    return ranked[0].per_unit if ranked else tier_price_per_hour(tier)


def plan_tier(
    name: str,
    tier: TierSpec,
    instances: Sequence[Instance],
    desired: float,
    reason: str,
    offers: Sequence[Offer],
    backoffs: Backoffs,
    now: float,
    *,
    avoid: frozenset[OfferKey] = frozenset(),
    fleet: FleetBudget | None = None,
    rollout: RolloutView | None = None,
) -> Plan:
    """``desired``: the tier's size in primary units (instances, for a tier without variants).
    ``instances``: the tier's live instances (draining and surges included: everything that bills).
    ``rollout``: the server the tier's instances should run; drifted ones retire first and are replaced.
    ``avoid``: offers being taken back (``replace.offers_to_avoid``), used only when nothing else fits.
    ``fleet``: the fleet's budget this tick, shared by the tiers planned before and after this one."""
    counted = scale.counted(instances)
    units = scale.units_of(tier)
    current = scale.total(counted, units)
    if desired > current + scale.EPS:
        # a warned instance holds no place under max: its replacement starts before it is gone
        # stopped machines (a warm pool) hold no place under max either: they are started instead of created
        # and neither do members booting to fill the pool: a scale-out takes them first (pool.py)
        held = scale.total([i for i in instances if i.state is not InstanceState.STOPPED and not i.filling], units)
        room = max(0.0, tier.max - held + scale.total(noticed(instances), units))
        count = min(desired - current, room)
        return plan_creates(name, tier, instances, count, offers, backoffs, now, avoid=avoid, fleet=fleet)
    if desired < current - scale.EPS:
        order = scale.retirement_order(counted, tier.capacity, units)
        if tier.on_demand_base:  # the base's on-demand instances go last (the cheapest ones are the base)
            base = sorted((i for i in counted if _on_demand(i)), key=lambda i: i.price_per_hour)[: tier.on_demand_base]
            order = [i for i in order if i not in base] + base
        if rollout is not None:  # drifted instances go first: scale-in is the cheapest rollout step
            old = drifted(counted, rollout.current_hash)
            order = old + [i for i in order if i not in old]
        room, window = _disruption_room(tier, instances, len(counted), now)
        retiring: list[Instance] = []
        left = current
        for inst in order:  # as many as keep the tier at its desired size (in units), within the budget
            if len(retiring) >= room:
                break
            if left - units(inst) >= desired - scale.EPS:
                retiring.append(inst)
                left -= units(inst)
        plan = Plan(drains=[Drain(i, f"scale in: {reason}") for i in retiring])
        held_back = any(left - units(i) >= desired - scale.EPS for i in order if i not in retiring)
        if window is not None and held_back:
            plan.notes.append(Note(name, DISRUPTION_WINDOW, f"scale-in to {desired:.4g} waits: {window}"))
        return plan
    plan = plan_rebalance(name, tier, instances, offers, backoffs, now, fleet=fleet)
    if plan.rebalances:
        return plan
    if rollout is not None:
        plan = plan_rollout(name, tier, instances, rollout, offers, backoffs, now, fleet=fleet)
        if plan.rebalances or drifted(instances, rollout.current_hash):
            return plan
    return plan_upgrade(name, tier, instances, offers, backoffs, now, fleet=fleet)


def _disruption_room(tier: TierSpec, instances: Sequence[Instance], counted: int, now: float) -> tuple[int, str | None]:
    """How many more instances may start draining by our choice now (``max_disrupted``, or an open
    disruption window's budget; none set: all), and the open window that set it."""
    allowed, window = active_budget(tier.max_disrupted, tier.disruption_windows, counted, now)
    if allowed is None:
        return counted, None
    return max(0, allowed - voluntary_disruptions(instances)), window


def plan_rollout(
    name: str,
    tier: TierSpec,
    instances: Sequence[Instance],
    rollout: RolloutView,
    offers: Sequence[Offer],
    backoffs: Backoffs,
    now: float,
    *,
    fleet: FleetBudget | None = None,
) -> Plan:
    """One step of replacing drifted instances (see ``rollout``): a surge instance on the current server
    while there is room, else (at ``max``, or ``max_surge: 0``) the oldest drifted one drains first."""
    old = drifted(instances, rollout.current_hash)
    if not old or rollout.paused or rollout.stopped:
        return Plan()
    surges = sum(1 for i in instances if i.surge)
    if surges + voluntary_disruptions(instances) >= max(1, tier.max_surge):
        return Plan()  # a step is under way
    counted = len(scale.counted(instances))
    room, window = _disruption_room(tier, instances, counted, now)
    if room < 1 and window is not None:  # a surge step ends in a drain too: an open window holds both kinds
        return Plan(notes=[Note(name, DISRUPTION_WINDOW, f"rollout waits ({len(old)} drifted): {window}")])
    if len(instances) >= tier.max or tier.max_surge < 1:
        if room < 1:
            return Plan()
        return Plan(rebalances=[Drain(old[0], f"rollout: runs an old server ({len(old)} drifted); drain first")])
    plan = plan_creates(name, tier, instances, 1, offers, backoffs, now, surge=True, fleet=fleet)
    return Plan(rebalances=list(plan.creates), notes=plan.notes)


def plan_creates(
    name: str,
    tier: TierSpec,
    instances: Sequence[Instance],
    count: float,
    offers: Sequence[Offer],
    backoffs: Backoffs,
    now: float,
    *,
    surge: bool = False,
    avoid: frozenset[OfferKey] = frozenset(),
    fleet: FleetBudget | None = None,
) -> Plan:
    """Creates on the best offers until they add ``count`` primary units (``count`` instances, for a tier
    without variants), within the tier's and the fleet's budget and the offers' room; offers in ``avoid``
    come last."""
    plan = Plan()
    fleet = fleet or FleetBudget(None, 0.0)
    if count <= 0 or backoffs.creates_blocked(name, now):
        return plan  # nothing wanted, or creates keep failing: wait out the back-off
    spend = sum(i.billing_per_hour for i in instances)
    spot_backoff = backoffs.spot_backoff(name, now)
    ranked = _avoiding(placement.ranked_offers(tier, offers, backoffs.offers, now, spot_backoff=spot_backoff), avoid)
    waiting = not spot_backoff and not backoffs.fallback_allowed(name, now, tier.fallback_after)
    if waiting:
        ranked = [p for p in ranked if not p.fallback]
    base_missing = max(0, tier.on_demand_base - sum(1 for i in scale.counted(instances) if _on_demand(i)))
    base_ranked = ranked
    if base_missing and not surge:  # the base first; spot stands in only when no on-demand offer can
        base_tier = tier.model_copy(update={"capacity": "on-demand", "fallback": None})
        base_ranked = [*_avoiding(placement.ranked_offers(base_tier, offers, backoffs.offers, now), avoid), *ranked]
    in_use: dict[str, int] = defaultdict(int)
    added, n = 0.0, 0
    while added < count - scale.EPS:
        budget = fleet.budget_for(name, tier.budget_per_hour, spend)
        chosen = placement.choose(base_ranked if n < base_missing and not surge else ranked, spend, budget, in_use)
        if chosen is None:
            if waiting and tier.fallback is not None:
                wait = f"waiting up to {tier.fallback_after:g}s before on-demand"
                message = f"no spot offer for {_hardware(tier)}: {wait}"
                plan.notes.append(Note(name, SPOT_WAIT, message))
            else:
                why = _why_unplaced(name, tier, instances, ranked, fleet, spend)
                plan.notes.append(Note(name, NO_PLACEMENT, f"cannot place an instance of {_hardware(tier)}: {why}"))
            break
        in_use[chosen.offer.offer_id] += 1
        spend += chosen.price_per_hour
        fleet.add(chosen.price_per_hour)
        plan.creates.append(Create(name, chosen, surge))
        added, n = added + chosen.units, n + 1
    return plan


def _why_unplaced(
    name: str,
    tier: TierSpec,
    instances: Sequence[Instance],
    ranked: Sequence[placement.Placement],
    fleet: FleetBudget,
    spend: float,
) -> str:
    """Which limit stopped the next instance. "budget" only when a budget (the tier's or the fleet's) is set
    and is what refused it; with none, the offers' room ran out."""
    if not ranked:
        return "no available offer"
    counted = len(scale.counted(instances))
    below = f"; the tier is below its floor ({counted} of min {tier.min})" if counted < tier.min else ""
    if fleet.binds(name, tier.budget_per_hour, spend):
        return f"budget: {fleet.describe()}{below}"
    limit = tier.budget_per_hour
    if limit is not None and all(spend + p.price_per_hour > limit + 1e-9 for p in ranked):
        return f"budget: the tier's budget_per_hour ${limit:g}/h is reached (${spend:.2f}/h billed or planned){below}"
    return f"no room: the offers report no capacity left for another instance{below}"


def _hardware(tier: TierSpec) -> str:
    """The tier's GPU, and its variants when it has some (for notes)."""
    if not tier.variants:
        return tier.gpu
    return f"{tier.gpu} or its variants ({', '.join(v.label for v in tier.variants)})"


def _on_demand(inst: Instance) -> bool:
    return inst.capacity == Capacity.ON_DEMAND.value and not inst.surge


def _avoiding(ranked: list[placement.Placement], avoid: frozenset[OfferKey]) -> list[placement.Placement]:
    """Offers being taken back go last (a stable sort keeps the rest in order)."""
    return sorted(ranked, key=lambda p: (p.offer.provider, p.offer.offer_id, p.capacity.value) in avoid)


def plan_rebalance(
    name: str,
    tier: TierSpec,
    instances: Sequence[Instance],
    offers: Sequence[Offer],
    backoffs: Backoffs,
    now: float,
    *,
    fleet: FleetBudget | None = None,
) -> Plan:
    """Spot is back and cheaper: replace on-demand fallback instances with spot, several at once — as many
    as the tier's disruption budget allows (``hand_back_budget``), counting those under way (surges not yet
    ready, voluntary drains). Make-before-break (a surge instance each; once ready, a fallback drains,
    ``replace.hand_backs``) while the tier has room under ``max``; at ``max`` or with ``max_surge: 0``
    break-before-make (the fallbacks drain, and the scale-out that follows places spot). So the fleet
    never bills more than the desired size plus the budget."""
    if tier.capacity != "spot" or tier.fallback is None or backoffs.spot_backoff(name, now):
        return Plan()
    ready = InstanceState.READY
    surges = sum(1 for i in instances if i.surge)
    fallbacks = [i for i in instances if i.state is ready and i.capacity == Capacity.ON_DEMAND.value]
    if len(fallbacks) <= tier.on_demand_base + surges:  # none left to replace beyond the base and the surges
        return Plan()
    allowed, window = hand_back_budget(tier, instances, now)
    room = allowed - surges - voluntary_disruptions(instances)
    if room < 1:
        if window is not None and allowed < 1:
            return Plan(notes=[Note(name, DISRUPTION_WINDOW, f"hand-back to spot waits: {window}")])
        return Plan()  # the budget's hand-backs are under way
    # the costliest go first; the base (the cheapest on-demand ones) and those surges already replace stay
    replaceable = sorted(fallbacks, key=lambda i: i.price_per_hour)[tier.on_demand_base :]
    replaceable = sorted(replaceable, key=lambda i: -i.price_per_hour)[: len(replaceable) - surges]
    headroom = tier.max - len(instances) if tier.max_surge >= 1 else 0
    drain_first = headroom < 1
    count = min(room, len(replaceable)) if drain_first else min(room, len(replaceable), headroom)
    spend = sum(i.billing_per_hour for i in instances)
    spot_tier = tier.model_copy(update={"fallback": None})
    ranked = placement.ranked_offers(spot_tier, offers, backoffs.offers, now)
    fleet = fleet or FleetBudget(None, 0.0)
    plan, in_use = Plan(), defaultdict[str, int](int)
    why = ("at max" if len(instances) >= tier.max else "max_surge 0") if drain_first else ""
    for replaced in replaceable[:count]:
        if drain_first:
            spend -= replaced.price_per_hour  # its place is what the spot instance takes
        chosen = placement.choose(ranked, spend, fleet.budget_for(name, tier.budget_per_hour, spend), in_use)
        if chosen is None or chosen.price_per_hour >= replaced.price_per_hour:
            break  # no spot, or spot no cheaper (A100 spot sometimes costs more): keep what runs
        in_use[chosen.offer.offer_id] += 1
        if drain_first:
            plan.rebalances.append(Drain(replaced, f"hand back to spot ({why}: drain first)"))
        else:
            spend += chosen.price_per_hour
            fleet.add(chosen.price_per_hour)
            plan.rebalances.append(Create(name, chosen, surge=True))
    return plan


UPGRADE_MARGIN = 0.10  # a variant is swapped for better capacity per dollar only when it saves at least this


def plan_upgrade(
    name: str,
    tier: TierSpec,
    instances: Sequence[Instance],
    offers: Sequence[Offer],
    backoffs: Backoffs,
    now: float,
    *,
    fleet: FleetBudget | None = None,
) -> Plan:
    """A tier with variants at its size whose fleet runs capacity dearer per unit than placement can buy now
    (a shortage of the better GPU is over): surge instances of the best buy; once ready each joins the tier
    (``replace.hand_backs``) and scale-in retires the dearest per unit down to the desired size. As many at
    once as the tier's hand-back budget allows (``hand_back_budget``: a quarter of the fleet by default, at
    least ``max_surge``), only as many units as the dearer ready instances hold (else the swap would grow the
    fleet), once the fleet has settled, and within ``max`` (in units) and the budgets."""
    if not tier.variants or any(i.surge for i in instances):
        return Plan()
    units = scale.units_of(tier)
    ready = [i for i in instances if i.state is InstanceState.READY]
    if len(ready) < len(scale.counted(instances)):
        return Plan()  # something still boots: let the fleet settle first
    allowed, window = hand_back_budget(tier, instances, now)
    room = allowed - voluntary_disruptions(instances)
    if room < 1:
        return Plan(notes=[Note(name, DISRUPTION_WINDOW, f"swap to a better buy waits: {window}")] if window else [])
    held = scale.total([i for i in instances if i.state is not InstanceState.STOPPED], units)
    probe = plan_creates(name, tier, instances, 0.001, offers, backoffs, now, surge=True, fleet=FleetBudget(None, 0.0))
    if not probe.creates:
        return Plan()
    best = probe.creates[0].placement
    dearer = [i for i in ready if i.price_per_hour / units(i) > best.per_unit * (1 + UPGRADE_MARGIN)]
    swappable = min(scale.total(dearer, units), tier.max - held)
    if swappable < best.units - scale.EPS:
        return Plan()
    wanted = plan_creates(
        name, tier, instances, swappable, offers, backoffs, now, surge=True, fleet=FleetBudget(None, 0.0)
    )
    shared = fleet or FleetBudget(None, 0.0)
    spend = sum(i.billing_per_hour for i in instances)
    worst = max(i.price_per_hour / units(i) for i in dearer)
    plan, took = Plan(), 0.0
    for create in wanted.creates[:room]:
        chosen = create.placement
        limit = shared.budget_for(name, tier.budget_per_hour, spend)
        if chosen.per_unit > best.per_unit + 1e-9 or took + chosen.units > swappable + scale.EPS:
            break  # only the best buy, and no more than the dearer capacity it replaces
        if limit is not None and spend + chosen.price_per_hour > limit + 1e-9:
            break
        why = (
            f"surge: {chosen.offer.gpu} at ${chosen.per_unit:.2f}/h per unit replaces capacity at up to ${worst:.2f}/h"
        )
        plan.rebalances.append(Create(name, chosen, surge=True, why=why))
        spend, took = spend + chosen.price_per_hour, took + chosen.units
        shared.add(chosen.price_per_hour)
    return plan


def hand_back_budget(tier: TierSpec, instances: Sequence[Instance], now: float) -> tuple[int, str | None]:
    """How many fallbacks may be handed back at once: the tier's disruption budget (``max_disrupted``, by
    default a quarter of the counted instances, at least one) but never fewer than ``max_surge``; an open
    disruption window's budget caps it (0: no hand-back while it is open). And the window, if one set it."""
    share = tier.max_disrupted if tier.max_disrupted is not None else HAND_BACK_SHARE
    counted = len(scale.counted(instances))
    allowed, window = active_budget(share, tier.disruption_windows, counted, now)
    assert allowed is not None  # a budget is always given, so there is always a count
    return (allowed, window) if window is not None else (max(allowed, tier.max_surge, 1), None)
