"""The state store: SQLAlchemy 2 models, engine setup, the repository of store operations, and the unit of
work (session, instance repository, explicit commits) the reconciler's tick runs in."""
