"""The daemon: composition root, settings, store, signal sources, reconciler, HTTP app and scalectl."""
