"""Bootstrap rendering: one server description to cloud-init, container args, or an SSH script."""

from controller.bootstrap.render import describe_tier_server, render_bootstrap

__all__ = ["describe_tier_server", "render_bootstrap"]
