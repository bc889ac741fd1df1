"""The state store: SQLAlchemy 2 models, engine setup, and the repository the reconciler uses."""
