"""Routing: point a load balancer at each tier's ready instances."""

from scalectl.serving.routing.base import Endpoint, RoutingError, RoutingResult, RoutingTarget, TierRoute
from scalectl.serving.routing.nginx import NginxTarget

__all__ = ["Endpoint", "NginxTarget", "RoutingError", "RoutingResult", "RoutingTarget", "TierRoute"]
