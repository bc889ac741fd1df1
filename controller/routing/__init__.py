"""Routing: point a load balancer at each tier's ready instances."""

from controller.routing.base import Endpoint, RoutingError, RoutingResult, RoutingTarget, TierRoute
from controller.routing.nginx import NginxTarget

__all__ = ["Endpoint", "NginxTarget", "RoutingError", "RoutingResult", "RoutingTarget", "TierRoute"]
