"""Everything failures taught the reconciler, in one object: offers and providers to skip for a while,
tiers whose creates keep failing, and spot interruptions per tier.

It lives in memory between ticks, and is rebuilt from the store's records (``Store.failures.history``)
when the reconciler starts, so a restarted daemon neither storms a refusing provider nor forgets that
spot kept being reclaimed."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Collection

from scalectl.controller.reconciler.placement import PROVIDER_UNAVAILABLE_FOR, UNAVAILABLE_FOR, UnavailableOffers
from scalectl.domain.failures import FailureHistory
from scalectl.providers.base import Capacity, Offer

SPOT_BACKOFF_AFTER = 3  # interruptions within the window that switch a tier to its fallback
SPOT_BACKOFF_WINDOW = 1800.0
CREATE_BACKOFF_FIRST = 10.0  # seconds a tier waits after a create failed for a non-retryable reason
CREATE_BACKOFF_MAX = 600.0
CRASH_WITHIN = 300.0  # an instance that fails within this long of its launch counts as a crash
CRASH_BACKOFF_FIRST = 15.0  # an offer whose instances crash is skipped 15 s, 30 s, 60 s, … up to 10 min
CRASH_TIER_FIRST = 10.0  # and the tier's creates wait 10 s, 20 s, 40 s, … up to 10 min
CRASH_BACKOFF_MAX = 600.0
CRASH_MEMORY = 1800.0  # crashes older than this no longer lengthen the back-off


class Backoffs:
    def __init__(self, offer_unavailable_for: float = UNAVAILABLE_FOR):
        self.offers = UnavailableOffers()
        self.offer_unavailable_for = offer_unavailable_for
        self._creates: dict[str, tuple[int, float]] = {}  # tier -> (failures in a row, no creates until)
        self._interruptions: dict[str, deque[float]] = defaultdict(deque)
        self._crashes: dict[tuple[str, str], deque[float]] = defaultdict(deque)  # (provider, offer) -> times
        self._tier_crashes: dict[str, deque[float]] = defaultdict(deque)
        self._crash_gate: dict[str, float] = {}  # tier -> no creates until (after a crash)
        self._spot_short: dict[str, float] = {}  # tier -> since when spot could not be placed

    @property
    def memory(self) -> float:
        """How far back the store must be read to rebuild this object (create back-offs aside)."""
        return max(SPOT_BACKOFF_WINDOW, self.offer_unavailable_for, PROVIDER_UNAVAILABLE_FOR, CRASH_MEMORY)

    def load(self, history: FailureHistory) -> None:
        """Replay what the store recorded (oldest first); marks already expired drop out when next read."""
        for provider, offer_id, capacity, t in history.no_capacity:
            self.offers.mark_id(provider, offer_id, Capacity(capacity), t, self.offer_unavailable_for)
        for provider, t in history.refused:
            self.offers.mark_provider(provider, t)
        for tier, provider, offer_id, t in history.crashes:
            self.crashed(tier, provider, offer_id, t)
        self._replay_tiers(history, None)

    def follow(self, history: FailureHistory, new: Collection[str], gone: Collection[str]) -> None:
        """Tiers this reconciler starts or stops acting on (sharded daemons hand tiers over): what it kept
        for a tier it leaves is dropped, and a tier it takes resumes from what the store recorded for it —
        its interruptions, create and crash back-offs and spot waits (offer-wide marks stay as they are)."""
        for tier in {*new, *gone}:
            for per_tier in (
                self._creates,
                self._interruptions,
                self._tier_crashes,
                self._crash_gate,
                self._spot_short,
            ):
                per_tier.pop(tier, None)
        wanted = set(new)
        for tier, _provider, _offer, t in history.crashes:
            if tier in wanted:
                self._tier_crashed(tier, t)
        self._replay_tiers(history, wanted)

    def _replay_tiers(self, history: FailureHistory, only: Collection[str] | None) -> None:
        """The per-tier marks of ``history`` (interruptions, create back-offs, spot waits): of ``only`` these
        tiers, or of every tier. A tier's crashes are replayed by the caller (with or without the offer's)."""
        for tier, t in history.interruptions:
            if only is None or tier in only:
                self.interrupted(tier, t)
        for tier, t in history.create_backoffs:
            if only is None or tier in only:
                self.create_refused(tier, t)
        for tier, t in history.spot_waits:
            if only is None or tier in only:
                self.spot_short(tier, t)

    # ---- offers and providers --------------------------------------------------------------------
    def no_capacity(self, offer: Offer, capacity: Capacity, now: float) -> None:
        self.offers.mark(offer, capacity, now, self.offer_unavailable_for)

    def provider_refused(self, provider: str, now: float) -> None:
        self.offers.mark_provider(provider, now)

    def crashed(self, tier: str, provider: str, offer_id: str, now: float) -> tuple[int, float]:
        """An instance of ``tier`` on this offer failed soon after launch (bootstrap, readiness, or died).
        The offer is skipped — both capacities: the server is what fails — and the tier's creates wait,
        each for exponentially longer with every recent crash, so a crash loop slows down and placement
        moves on. Returns (the tier's recent crashes, seconds its creates wait)."""
        offer_crashes = _recent(self._crashes[(provider, offer_id)], now)
        for capacity in Capacity:
            self.offers.mark_id(provider, offer_id, capacity, now, _doubling(CRASH_BACKOFF_FIRST, offer_crashes))
        return self._tier_crashed(tier, now)

    def _tier_crashed(self, tier: str, now: float) -> tuple[int, float]:
        crashes = _recent(self._tier_crashes[tier], now)
        delay = _doubling(CRASH_TIER_FIRST, crashes)
        self._crash_gate[tier] = max(self._crash_gate.get(tier, 0.0), now + delay)
        return crashes, delay

    # ---- creates ---------------------------------------------------------------------------------
    def create_refused(self, tier: str, now: float) -> tuple[int, float]:
        """Creates for this tier failed for a reason a retry cannot fix: wait 10 s, 20 s, … up to 10 min.
        Returns (failures in a row, seconds to wait)."""
        failures = self.create_failures(tier) + 1
        delay = min(CREATE_BACKOFF_MAX, CREATE_BACKOFF_FIRST * 2 ** (failures - 1))
        self._creates[tier] = (failures, now + delay)
        return failures, delay

    def create_succeeded(self, tier: str) -> None:
        self._creates.pop(tier, None)

    def create_failures(self, tier: str) -> int:
        return self._creates.get(tier, (0, 0.0))[0]

    def creates_blocked(self, tier: str, now: float) -> bool:
        return now < max(self._creates.get(tier, (0, 0.0))[1], self._crash_gate.get(tier, 0.0))

    # ---- spot interruptions ----------------------------------------------------------------------
    def interrupted(self, tier: str, now: float) -> None:
        self._interruptions[tier].append(now)

    def recent_interruptions(self, tier: str, now: float) -> int:
        times = self._interruptions[tier]
        while times and now - times[0] > SPOT_BACKOFF_WINDOW:
            times.popleft()
        return len(times)

    def spot_short(self, tier: str, now: float) -> None:
        """A spot tier wanted an instance and no spot offer could take it (``fallback_after`` counts from here)."""
        self._spot_short.setdefault(tier, now)

    def spot_placed(self, tier: str) -> None:
        self._spot_short.pop(tier, None)

    def fallback_allowed(self, tier: str, now: float, after: float) -> bool:
        """Spot has been short for ``after`` seconds (0: at once); the wait's start is rebuilt from the store's
        ``spot-wait`` events on start, so a restart neither resets nor skips it."""
        since = self._spot_short.get(tier)
        return after <= 0 or (since is not None and now - since >= after)

    def spot_backoff(self, tier: str, now: float) -> bool:
        """Spot was interrupted repeatedly lately: prefer the fallback until the window passes."""
        return self.recent_interruptions(tier, now) >= SPOT_BACKOFF_AFTER


def _recent(times: deque[float], now: float) -> int:
    """Record a crash at ``now``; how many happened within ``CRASH_MEMORY`` (this one included)."""
    while times and now - times[0] > CRASH_MEMORY:
        times.popleft()
    times.append(now)
    return len(times)


def _doubling(first: float, count: int) -> float:
    return min(CRASH_BACKOFF_MAX, first * 2 ** (count - 1))
