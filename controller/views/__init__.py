"""Read models: what `scalectl status`, `describe` and the daemon's /v1/status show, built from the store and the
leadership records. Above both ``controller.store`` and ``controller.ha`` (an import-linter contract), so
neither of those reads the other's view of the fleet."""
