"""A tier's rollout controls, as `scalectl rollout` stores them and the reconciler reads them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RolloutControl:
    """``generation``: bumped by `scalectl rollout restart` (every instance then counts as drifted);
    ``paused``: no rollout step is taken. A tier never touched is at generation 0, running."""

    generation: int = 0
    paused: bool = False
