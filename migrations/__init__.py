"""Alembic migrations for the state store (run with `scalectl db upgrade`)."""
