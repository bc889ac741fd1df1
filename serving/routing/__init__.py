"""Routing: point a load balancer at each tier's ready instances."""

from serving.routing.base import Endpoint, RoutingError, RoutingResult, RoutingTarget, TierRoute
from serving.routing.nginx import NginxTarget

__all__ = ["Endpoint", "NginxTarget", "RoutingError", "RoutingResult", "RoutingTarget", "TierRoute"]
