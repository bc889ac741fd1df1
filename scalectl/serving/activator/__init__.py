"""Scale-from-zero for HTTP tiers: hold requests while a tier starts, hand them to its first instance."""

from scalectl.serving.activator.gate import HoldLimits, TierGate
from scalectl.serving.activator.service import Activator

__all__ = ["Activator", "HoldLimits", "TierGate"]
