"""Phase 6, record: decisions and repeating conditions, written so history stays readable — a decision
when it changes and at least once a minute; a condition's event once, then every five minutes."""

from __future__ import annotations

import logging
from typing import Any

from scalectl.controller.reconciler.decision import TierDecision
from scalectl.controller.reconciler.tick import Tick
from scalectl.sources.reading import SignalSource, TierReading

ACTIVATOR = "activator"  # the source of the figures the activator gives a tier at zero (controller/activation.py)

log = logging.getLogger("scalectl.reconciler")
RECORD_EVERY = 60.0  # a decision is recorded when it changes, and at least this often
NOTE_EVERY = 300.0  # a repeating condition's event is written again at most this often


class Recorder:
    def __init__(self, signals: SignalSource):
        self.signals = signals
        self._last_recorded: dict[str, tuple[int, str, float]] = {}
        self._notes: dict[tuple[str, str], tuple[str, float]] = {}

    def decision(self, tick: Tick, name: str, decision: TierDecision, reading: TierReading) -> None:
        now, desired = tick.now, decision.desired
        last = self._last_recorded.get(name)
        changed = last is None or last[0] != desired
        if not changed and last is not None and now - last[2] < RECORD_EVERY:
            return  # reasons carry elapsed times; record changes, and a sample a minute for history
        self._last_recorded[name] = (desired, decision.reason, now)
        signals: dict[str, Any] = {k: v for k, v in reading.signals.to_dict().items() if v is not None}
        if reading.errors:
            signals["errors"] = dict(reading.errors)
        held = sorted(figure for figure, source in reading.sources.items() if source == ACTIVATOR)
        if held:  # a tier at zero: these figures are the requests its activator holds (describe says so)
            signals["sources"] = dict.fromkeys(held, ACTIVATOR)
        counts = getattr(self.signals, "error_counts", None)  # sources that count failures since start
        if callable(counts) and (tier_counts := counts(name)):
            signals["error_counts"] = dict(tier_counts)
        tick.uow.add_decision(name, now, decision.current, desired, decision.demand, decision.reason, signals)
        if changed:
            fields = {"tier": name, "current": decision.current, "desired": desired, "reason": decision.reason}
            log.info("%s: %d → %d: %s", name, decision.current, desired, decision.reason, extra=fields)

    def note(self, tick: Tick, tier: str, kind: str, message: str) -> None:
        """An event that would repeat every tick while a condition lasts."""
        last = self._notes.get((tier, kind))
        if last is not None and last[0] == message and tick.now - last[1] < NOTE_EVERY:
            return
        self._notes[(tier, kind)] = (message, tick.now)
        tick.event(tier, None, kind, message)
