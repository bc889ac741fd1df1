"""scalectl: the operator's command line. Each command group lives in its own module with ``register``."""
