"""From a tier to the description of the server its machines run (rendering lives in serving.bootstrap)."""

from controller.bootstrap.render import describe_tier_server

__all__ = ["describe_tier_server"]
